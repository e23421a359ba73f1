"""net_mtu's pure logic (plugins/module_utils/netcfg_mtu.py) and the role's argument specs."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
import yaml

from rdmaprov import collection
from rdmaprov.collection import netcfg_mtu as mtu

ROOT = Path(__file__).resolve().parents[2]



IP_ADDR = [
    {"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1", "scope": "host"}]},
    {"ifname": "eth0", "mtu": 1500,
     "addr_info": [{"family": "inet", "local": "10.199.249.11", "prefixlen": 24, "scope": "global"},
                   {"family": "inet6", "local": "fe80::1", "scope": "link"}]},
]


def test_df_payload_is_mtu_minus_ip_and_icmp_headers():
    assert mtu.df_payload(9000) == 8972
    assert mtu.df_payload(1500) == 1472


def test_ipv4_of():
    assert mtu.ipv4_of(IP_ADDR, "eth0") == "10.199.249.11"


@pytest.mark.parametrize(("value", "kind", "mode", "bad"), [
    (9000, "ether", None, False), (9300, "ether", None, True),
    (4092, "infiniband", "datagram", False), (4096, "infiniband", "datagram", True),
    (65520, "infiniband", "connected", False), (60, "ether", None, True),
])
def test_mtu_limits(value, kind, mode, bad):
    assert (mtu.mtu_limit_error(value, kind, mode) is not None) is bad


@pytest.mark.parametrize(("declared", "kind", "mode", "bad"), [
    ("auto", "infiniband", "connected", False),
    ("ipoib_connected", "infiniband", "connected", False),
    ("ipoib_connected", "infiniband", "datagram", True),
    ("ethernet", "infiniband", "connected", True),
    ("ipoib_datagram", "ether", None, True),
])
def test_a_declared_link_type_must_be_the_hosts(declared, kind, mode, bad):
    """The inventory's link_type decides the range before any host; on the host, a declared
    type that is not the host's link is refused rather than trusted."""
    why = mtu.mtu_limit_error(1500, kind, mode, declared)
    assert (why is not None) is bad
    if bad:
        assert why.startswith(f"link_type is {declared} but the host's interface is ")


def test_backend_order_and_clear_failure():
    base = {"name": "ens1", "nm": {"active": False}, "networkd": {"active": False}}
    assert mtu.pick_backend({**base, "netplan_present": True,
                             "netplan_files": ["/etc/netplan/50.yaml"],
                             "nm": {"active": True, "connection": "x"}})[0] == "netplan"
    assert mtu.pick_backend(
        {**base, "nm": {"active": True, "connection": "Wired 1"}})[0] == "networkmanager"
    assert mtu.pick_backend(
        {**base, "networkd": {"active": True,
                              "network_file": "/etc/systemd/network/10.network"}})[0] == "networkd"
    assert mtu.pick_backend({**base, "ifupdown_file": "/etc/network/interfaces"})[0] == "ifupdown"
    assert mtu.pick_backend(
        {**base, "ifcfg_file": "/etc/sysconfig/network-scripts/ifcfg-ens1"})[0] == "ifcfg"
    backend, why = mtu.pick_backend({**base, "networkd": {"active": True}})
    assert backend is None
    assert "ens1" in why and "no .network file" in why and "systemd_unit" in why


def test_ifupdown_edit_touches_only_the_stanza_and_is_idempotent():
    text = ("auto lo\niface lo inet loopback\n\n"
            "auto ens1\niface ens1 inet static\n    address 10.0.0.2/24\n\n"
            "iface ens2 inet dhcp\n    mtu 1500\n")
    once = mtu.ifupdown_set_mtu(text, "ens1", 9000)
    assert "    address 10.0.0.2/24\n    mtu 9000\n\niface ens2" in once
    assert "iface ens2 inet dhcp\n    mtu 1500\n" in once
    assert mtu.ifupdown_set_mtu(once, "ens1", 9000) == once
    assert "    mtu 9000" in mtu.ifupdown_set_mtu(text, "ens2", 9000).split("iface ens2")[1]


def test_ping_verdict_names_the_pair():
    lost = mtu.ping_verdict("node1", "10.0.0.1", "node3", "10.0.0.3", 9000, 1,
                            "--- 10.0.0.3 ping statistics ---\n"
                            "3 packets transmitted, 0 received, 100% packet loss", "")
    assert not lost["ok"] and lost["msg"].startswith("node1 (10.0.0.1) -> node3 (10.0.0.3)")
    assert "-s 8972" in lost["msg"] and "drops the frame" in lost["msg"]
    local = mtu.ping_verdict("node3", "10.0.0.3", "node1", "10.0.0.1", 9000, 1, "",
                             "ping: local error: message too long, mtu=1500")
    assert "mtu=1500" in local["msg"]
    assert mtu.ping_verdict("a", "1", "b", "2", 9000, 0, "", "")["ok"]


PEERS = [{"name": "node3", "address": "10.0.0.3", "drift": False},
         {"name": "node1", "address": "10.0.0.1", "drift": True},
         {"name": "node4", "address": "", "drift": False},
         {}]


def test_ping_targets_are_sorted_by_peer_name_and_need_both_addresses():
    assert mtu.ping_targets("10.0.0.2", PEERS) == [
        {"name": "node1", "address": "10.0.0.1"}, {"name": "node3", "address": "10.0.0.3"}]
    assert mtu.ping_targets("", PEERS) == []
    assert mtu.ping_targets("10.0.0.2", []) == []


def test_ping_targets_under_check_leave_out_what_was_only_reported():
    assert mtu.ping_targets("10.0.0.2", PEERS, check_mode=True) == [
        {"name": "node3", "address": "10.0.0.3"}]
    assert mtu.ping_targets("10.0.0.2", PEERS, check_mode=True, unproven=True) == []
    # Outside --check this host's drift is set by now: every pair is pinged.
    assert len(mtu.ping_targets("10.0.0.2", PEERS, check_mode=False, unproven=True)) == 2


def test_ping_argv_is_a_df_ping_of_exactly_the_mtu():
    assert mtu.ping_argv("10.0.0.2", "10.0.0.1", 9000, 3, 2) == [
        "ping", "-M", "do", "-s", "8972", "-c", "3", "-i", "0.2", "-W", "2",
        "-I", "10.0.0.2", "10.0.0.1"]
    hostile = "10.0.0.1; touch /tmp/x"
    assert mtu.ping_argv("10.0.0.2", hostile, 1500, 1, 1)[-1] == hostile


def test_ping_argv_refuses_an_address_ping_would_read_as_an_option():
    with pytest.raises(ValueError, match="'-f' is not an address"):
        mtu.ping_argv("10.0.0.2", "-f", 9000, 3, 2)
    with pytest.raises(ValueError):
        mtu.ping_argv("-c1000", "10.0.0.1", 9000, 3, 2)


def test_ping_verdict_pass_line_word_for_word():
    ok = mtu.ping_verdict("node2", "10.198.250.12", "node1", "10.198.250.11", 9000, 0, "", "")
    assert ok["msg"] == "node2 (10.198.250.12) -> node1 (10.198.250.11): 9000-byte DF packets pass"


def test_drift():
    assert mtu.mtu_drift([{"name": "eth0", "mtu": 9000}],
                         [{"name": "eth0", "mtu": 1500}]) == ["eth0"]
    assert mtu.mtu_drift([{"name": "eth0", "mtu": 9000}], [{"name": "eth0", "mtu": 9000}]) == []


# -- plan(): the role's decisions for one host, as the probe module returns them -------------

def _iface(name: str, mtu: int | None = 1500, **kw) -> dict:
    """One interface's probe entry (module_utils/net_mtu_probe.py's shape): an Ethernet link,
    no manager unless given."""
    return {"name": name, "exists": mtu is not None, "mtu": mtu,
            "link_type": "ether" if mtu is not None else None, "ipoib_mode": None,
            "ipv4": None, "netplan_present": False, "netplan_files": [],
            "nm": {"active": False}, "networkd": {"active": False},
            "ifupdown_file": None, "ifupdown_text": None, "ifcfg_file": None, **kw}


def _probe(*interfaces: dict, conn: str | None = "eth0", ping: str | None = "/usr/bin/ping",
           control_ip: str | None = "10.0.0.254") -> dict:
    return {"connection_iface": conn, "control_ip": control_ip, "interfaces": list(interfaces),
            "ping": ping, "apt": True}


def _settings(**kw) -> dict:
    return {"interfaces": [], "interfaces_group": [], "interfaces_host": [], "default": 9000,
            "allow_connection_interface": False, "persist": "auto", "verify": True,
            "host": "node1", "address": "10.0.0.1", "unit_name": "rdmaprov-mtu.service",
            "networkd_dropin": "60-rdmaprov-mtu.conf", **kw}


IFUPDOWN = "auto ens1\niface ens1 inet static\n    address 10.0.0.2/24\n"


def test_plan_merges_the_layers_by_name_later_wins():
    settings = _settings(
        interfaces=[{"name": "ens1", "mtu": 4000}, {"name": "ens2"}],
        interfaces_group=[{"name": "ens1", "mtu": "9000"}, {"name": "ib0", "mtu": 2044,
                                                           "link_type": "ipoib_datagram"}],
        interfaces_host=[{"name": "ens2", "mtu": 1500.0}], default=8000)
    plan = mtu.plan(_probe(), settings)
    assert plan["wanted"] == [{"name": "ens1", "mtu": 9000, "link_type": "auto"},
                              {"name": "ens2", "mtu": 1500, "link_type": "auto"},
                              {"name": "ib0", "mtu": 2044, "link_type": "ipoib_datagram"}]
    assert plan["mtu"] == {"ens1": 9000, "ens2": 1500, "ib0": 2044}
    # The default MTU for an entry that gives none; a later layer's entry replaces the whole entry.
    assert mtu.merge_interfaces([[{"name": "a"}], [], []], 9000) == [
        {"name": "a", "mtu": 9000, "link_type": "auto"}]
    assert mtu.merge_interfaces([[{"name": "a", "mtu": 4092, "link_type": "ipoib_datagram"}],
                                 [{"name": "a", "mtu": 1500}], []], 9000) == [
        {"name": "a", "mtu": 1500, "link_type": "auto"}]
    assert mtu.merge_interfaces([[], [{"name": "a", "mtu": "9000.0"}]], 1) == [
        {"name": "a", "mtu": 9000, "link_type": "auto"}]


def test_plan_verify_is_the_entry_the_peers_ping():
    probe = _probe(_iface("eth0", 1500, ipv4="10.0.0.1"), _iface("ens1", 1500, ipv4="10.1.0.1"),
                   _iface("ens2", 9000, ipv4="10.2.0.1"))
    settings = _settings(interfaces=[{"name": "ens1"}, {"name": "ens2", "mtu": 4000}],
                         persist="none")
    # The first interface set, its IPv4, its MTU; drift is this host's runtime MTU to change.
    assert mtu.plan(probe, settings)["verify"] == {
        "name": "node1", "interface": "ens1", "address": "10.1.0.1", "mtu": 9000, "drift": True,
        "peers": [], "count": 3, "timeout": 2}
    # The peers, packets and timeout are the role's (net_mtu_verify_peers, _ping_count, _timeout).
    asked = mtu.plan(probe, {**settings, "verify_peers": ["n2"], "ping_count": 5,
                             "ping_timeout": 1})["verify"]
    assert (asked["peers"], asked["count"], asked["timeout"]) == (["n2"], 5, 1)
    # Without the proof there is nothing for the peers to ping.
    assert mtu.plan(probe, {**settings, "verify": False})["verify"] is None
    other = mtu.plan(probe, {**settings, "verify_interface": "ens2"})["verify"]
    assert (other["interface"], other["address"], other["mtu"]) == ("ens2", "10.2.0.1", 4000)
    given = mtu.plan(probe, {**settings, "fabric_address": "10.9.9.9"})["verify"]
    assert given["address"] == "10.9.9.9" and given["interface"] == "ens1"
    # No IPv4 and none given: an empty address, which leaves every pair out.
    bare = mtu.plan(_probe(_iface("ens1", 9000)), {**settings, "interfaces": [{"name": "ens1"}]})
    assert bare["verify"]["address"] == "" and bare["verify"]["drift"] is False
    assert mtu.plan(probe, _settings())["verify"] is None


def test_plan_refuses_a_verify_interface_it_does_not_set():
    probe = _probe(_iface("eth0", 1500), _iface("ens1", 9000))
    settings = _settings(interfaces=[{"name": "ens1"}], persist="none", verify_interface="ens9")
    plan = mtu.plan(probe, settings)
    assert plan["errors"] == ["node1: net_mtu_verify_interface ens9 is not one of the interfaces "
                              "net_mtu sets: nothing to prove its MTU against"]
    assert plan["verify"] is None and plan["host_drift"] is True
    # Without the proof there is nothing to refuse.
    assert mtu.plan(probe, {**settings, "verify": False})["errors"] == []


def test_plan_nothing_to_do_on_a_converged_host():
    probe = _probe(_iface("eth0"), _iface("ens1", 9000, ifcfg_file="/x/ifcfg-ens1"))
    plan = mtu.plan(probe, _settings(interfaces=[{"name": "ens1"}], persist="none"))
    assert plan["drift"] == [] and plan["runtime"] == [] and plan["errors"] == []
    assert plan["persist_drift"] == [] and plan["host_drift"] is False
    assert plan["by_backend"] == {"none": [{"name": "ens1", "mtu": 9000}]}
    assert plan["report"] == ["ens1: none, MTU 9000 (chosen: net_mtu_persist=none)",
                              "ens1: MTU 9000 set at runtime only (net_mtu_persist: none)"]
    assert mtu.plan(_probe(), _settings())["host_drift"] is False


def test_plan_drift_is_the_runtime_mtu_that_differs():
    probe = _probe(_iface("ens1", 1500), _iface("ens2", 9000))
    plan = mtu.plan(probe, _settings(interfaces=[{"name": "ens1"}, {"name": "ens2"}],
                                     persist="none"))
    assert plan["drift"] == ["ens1"]
    assert plan["runtime"] == [{"name": "ens1", "current": 1500, "mtu": 9000}]
    assert plan["host_drift"] is True


def test_plan_missing_ping_is_something_to_do_only_when_verifying():
    probe = _probe(_iface("ens1", 9000), ping=None)
    settings = _settings(interfaces=[{"name": "ens1"}], persist="none")
    assert mtu.plan(probe, settings)["host_drift"] is True
    assert mtu.plan(probe, {**settings, "verify": False})["host_drift"] is False
    assert mtu.plan(_probe(ping=None), _settings(persist="none"))["host_drift"] is False


def test_plan_ping_package_only_where_ping_is_missing_for_the_proof():
    probe = _probe(_iface("eth0", 1500), _iface("ens1", 9000), ping=None)
    settings = _settings(interfaces=[{"name": "ens1"}], persist="none")
    assert mtu.plan(probe, settings)["ping_package"] == "iputils-ping"
    assert mtu.plan({**probe, "apt": False}, settings)["ping_package"] == "iputils"
    assert mtu.plan(probe, {**settings, "ping_package": "inetutils-ping"})["ping_package"] == \
        "inetutils-ping"
    assert mtu.plan(probe, {**settings, "verify": False})["ping_package"] is None
    assert mtu.plan({**probe, "ping": "/bin/ping"}, settings)["ping_package"] is None


def test_plan_errors_word_for_word():
    probe = _probe(
        _iface("eth0", 1500), _iface("ens1", 1500), _iface("gone", None),
        _iface("ib0", 2044, link_type="infiniband", ipoib_mode="datagram"),
        _iface("ens3", 1500), _iface("ens4", 1500, nm={"active": False},
                                      networkd={"active": True}))
    settings = _settings(interfaces=[
        {"name": "gone"}, {"name": "ens1", "mtu": 9300}, {"name": "ib0", "mtu": 4092,
                                                           "link_type": "ipoib_connected"},
        {"name": "eth0"}, {"name": "ens3", "mtu": 1500, "link_type": "ethernet"},
        {"name": "ens4"}])
    plan = mtu.plan(probe, settings)
    ib = mtu.mtu_limit_error(4092, "infiniband", "datagram", "ipoib_connected")
    assert ib.startswith("link_type is ipoib_connected but the host's interface is ipoib_datagram")
    assert plan["errors"] == [
        "node1: gone: no such interface",
        "node1: ens1: " + mtu.mtu_limit_error(9300, "ether"),
        "node1: ib0: " + ib,
        "node1: eth0 carries Ansible's connection (10.0.0.254 -> 10.0.0.1); raising its MTU from"
        " 1500 to 9000 can cut that path if any hop is smaller. Set"
        " net_mtu_allow_connection_interface=true once the switch ports are ready.",
        # ens3 is fine: at its MTU, with a backend (none of them here: it is refused next).
        "node1: " + mtu.pick_backend(probe["interfaces"][4])[1],
        "node1: " + mtu.pick_backend(probe["interfaces"][5])[1],
    ]
    assert "no network manager recognised" in plan["errors"][-1]
    assert "active, but no .network file matches it" in plan["errors"][-1]
    assert plan["host_drift"] is True
    # An interface without a backend is refused, and has no persistence edits.
    assert "ens3" not in str(plan["by_backend"])
    assert plan["report"][-1].startswith("ens4: not persisted, MTU 9000 (ens4: no network")


def test_plan_connection_interface():
    def errors(current, want, allow=False, control_ip="10.0.0.254", conn="eth0"):
        probe = _probe(_iface("eth0", current), conn=conn, control_ip=control_ip)
        return mtu.plan(probe, _settings(interfaces=[{"name": "eth0", "mtu": want}],
                                         persist="none", allow_connection_interface=allow,
                                         address="node1.lab"))["errors"]
    assert errors(1500, 9000) == [
        "node1: eth0 carries Ansible's connection (10.0.0.254 -> node1.lab); raising its MTU"
        " from 1500 to 9000 can cut that path if any hop is smaller. Set"
        " net_mtu_allow_connection_interface=true once the switch ports are ready."]
    assert "(control host -> node1.lab)" in errors(1500, 9000, control_ip=None)[0]
    assert errors(1500, 9000, allow=True) == []
    assert errors(9000, 1500) == []      # lowering never cuts the path
    assert errors(9000, 9000) == []
    assert errors(1500, 9000, conn="eth1") == []
    # Without an address the inventory name stands in (ansible_host's default).
    probe = _probe(_iface("eth0", 1500))
    assert "(10.0.0.254 -> node1)" in mtu.plan(probe, _settings(
        interfaces=[{"name": "eth0"}], persist="none", address=""))["errors"][0]


def test_plan_backend_auto_and_chosen():
    probe = _probe(
        _iface("ens1", 9000, netplan_present=True, netplan_files=["/etc/netplan/50.yaml"]),
        _iface("ens2", 9000, nm={"active": True, "connection": "fab", "setting_key":
                                 "802-3-ethernet.mtu", "mtu_setting": "9000"}),
        _iface("ens3", 9000, networkd={"active": True, "network_file": "/run/n/10-ens3.network"}),
        _iface("ens4", 9000, ifupdown_file="/etc/network/interfaces", ifupdown_text=IFUPDOWN
               .replace("ens1", "ens4")),
        _iface("ens5", 9000, ifcfg_file="/etc/sysconfig/network-scripts/ifcfg-ens5"))
    names = [{"name": f"ens{i}"} for i in range(1, 6)]
    plan = mtu.plan(probe, _settings(interfaces=names))
    assert {n: b["backend"] for n, b in plan["backends"].items()} == {
        "ens1": "netplan", "ens2": "networkmanager", "ens3": "networkd", "ens4": "ifupdown",
        "ens5": "ifcfg"}
    assert plan["backends"]["ens1"]["reason"] == (
        "ens1: netplan configuration in /etc/netplan/50.yaml")
    assert plan["by_backend"]["networkd"] == [{"name": "ens3", "mtu": 9000}]
    # Each manager's file as it must be, in one list the role writes with one loop.
    assert plan["to_write"] == [
        {"path": "/etc/netplan/60-rdmaprov-mtu.yaml", "mode": "0600", "backup": False,
         "content": "# Ansible managed (net_mtu). netplan merges this with the host's own files.\n"
                    "network:\n  version: 2\n  ethernets:\n    ens1:\n      mtu: 9000\n"},
        {"path": "/etc/systemd/network/10-ens3.network.d/60-rdmaprov-mtu.conf", "mode": "0644",
         "backup": False, "content": "# Managed by rdmaprov (net_mtu)\n[Link]\nMTUBytes=9000\n"},
        {"path": "/etc/network/interfaces", "mode": "0644", "backup": True,
         "content": mtu.ifupdown_set_mtu(IFUPDOWN.replace("ens1", "ens4"), "ens4", 9000)},
        {"path": "/etc/sysconfig/network-scripts/ifcfg-ens5", "mode": "0644", "backup": False,
         "content": "MTU=9000\n"}]
    assert plan["dirs"] == ["/etc/systemd/network/10-ens3.network.d"]
    assert plan["errors"] == [] and plan["drift"] == [] and plan["commands"] == []
    # Files the probe did not read: something to do (the probe module reads them, then plans again).
    assert plan["persist_drift"] == [f"{f['path']}: not probed" for f in plan["to_write"]]
    assert plan["host_drift"] is True
    assert [c["argv"] for c in plan["persist"]] == [["netplan", "generate"],
                                                    ["networkctl", "reload"]]
    assert plan["report"][1] == (
        "ens2: networkmanager, MTU 9000 (ens2: NetworkManager connection 'fab')")
    chosen = mtu.plan(probe, _settings(interfaces=names[:2], persist="systemd_unit"))
    assert chosen["backends"]["ens1"] == {"backend": "systemd_unit",
                                          "reason": "chosen: net_mtu_persist=systemd_unit"}
    assert chosen["by_backend"] == {"systemd_unit": [{"name": "ens1", "mtu": 9000},
                                                     {"name": "ens2", "mtu": 9000}]}
    # The boot unit is the plan's: absent here (not probed), so something to do.
    assert chosen["unit"] == mtu.unit(chosen["by_backend"]["systemd_unit"])
    assert chosen["unit_path"] == "/etc/systemd/system/rdmaprov-mtu.service"
    assert chosen["persist_drift"] == ["/etc/systemd/system/rdmaprov-mtu.service: not probed",
                                       "rdmaprov-mtu.service: not probed, wanted enabled"]
    assert chosen["persist"] == [
        {"argv": ["systemctl", "daemon-reload"],
         "removes": "/etc/systemd/system/rdmaprov-mtu.service", "label": "systemctl daemon-reload"},
        {"argv": ["systemctl", "enable", "rdmaprov-mtu.service"],
         "removes": "/etc/systemd/system/rdmaprov-mtu.service",
         "label": "systemctl enable rdmaprov-mtu.service"}]
    assert chosen["host_drift"] is True and plan["unit"] == ""


def test_plan_networkmanager_only_where_the_setting_differs():
    def nm(setting):
        return {"active": True, "connection": "fab", "setting_key": "802-3-ethernet.mtu",
                "mtu_setting": setting}
    probe = _probe(_iface("ens1", 9000, nm=nm("9000")), _iface("ens2", 9000, nm=nm("")),
                   _iface("ens3", 9000, nm=nm(None)))
    plan = mtu.plan(probe, _settings(interfaces=[{"name": "ens1"}, {"name": "ens2"},
                                                 {"name": "ens3"}]))
    assert plan["networkmanager"] == [
        {"name": "ens2", "mtu": 9000, "connection": "fab", "setting_key": "802-3-ethernet.mtu"},
        {"name": "ens3", "mtu": 9000, "connection": "fab", "setting_key": "802-3-ethernet.mtu"}]
    assert plan["persist_drift"] == ["ens2: NetworkManager setting differs",
                                     "ens3: NetworkManager setting differs"]
    assert plan["persist"][0] == {
        "argv": ["nmcli", "connection", "modify", "fab", "802-3-ethernet.mtu", "9000"],
        "removes": "/sys/class/net/ens2", "label": "ens2 (fab)"}
    assert len(plan["persist"]) == 2 and plan["to_write"] == []


def test_plan_ifupdown_edit():
    probe = _probe(_iface("ens1", 1500, ifupdown_file="/etc/network/interfaces.d/ens1",
                          ifupdown_text=IFUPDOWN))
    plan = mtu.plan(probe, _settings(interfaces=[{"name": "ens1", "mtu": 9000}]))
    assert plan["to_write"] == [{
        "path": "/etc/network/interfaces.d/ens1", "mode": "0644", "backup": True,
        "content": "auto ens1\niface ens1 inet static\n    address 10.0.0.2/24\n    mtu 9000\n"}]
    assert plan["to_write"][0]["content"] == mtu.ifupdown_set_mtu(IFUPDOWN, "ens1", 9000)
    assert plan["drift"] == ["ens1"]
    assert plan["commands"] == [{"argv": ["ip", "link", "set", "dev", "ens1", "mtu", "9000"],
                                 "removes": "/sys/class/net/ens1", "label": "ens1: 1500 -> 9000"}]
    # ifupdown applies its file at the next boot: nothing follows the write.
    assert plan["persist"] == []


def test_the_probe_module_documents_its_settings():
    """net_mtu_probe's settings: the spec's options and defaults are the documented ones, and
    they are the plan's table, which the probe's action plugin fills for the role."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "net_mtu_probe_module", ROOT / "plugins/modules/net_mtu_probe.py")
    text = (ROOT / "plugins/modules/net_mtu_probe.py").read_text()
    doc = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    documented = doc["options"]["settings"]["suboptions"]
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    assert set(module.SETTINGS_SPEC) == set(documented)
    for name, opt in module.SETTINGS_SPEC.items():
        assert opt["type"] == documented[name]["type"], name
        assert opt.get("default") == documented[name].get("default"), name
    preflight = yaml.safe_load((ROOT / "roles/net_mtu/tasks/preflight.yml").read_text())
    assert preflight[0]["rdmaprov.cluster.net_mtu_probe"]["settings"] == {}
    assert set(mtu.SETTINGS) == set(documented)


@pytest.mark.parametrize("role", ["net_mtu", "roce_qos", "firewall"])
def test_argument_specs_match_defaults(role):
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults/main.yml").read_text())
    specs = yaml.safe_load((ROOT / "roles" / role / "meta/argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    for name, value in defaults.items():
        assert options[name]["default"] == value, name
        assert options[name].get("description"), name
        assert name.startswith(role + "_"), name


def _run_verify(tmp_path: Path, args: dict, ping: bool = True) -> tuple[int, dict, list]:
    """Run module net_mtu_verify as Ansible runs it on a node, with a stand-in `ping` first on
    PATH that records its argv and loses every packet to 10.0.0.3."""
    import json
    import subprocess
    import sys

    from rdmaprov.resources import collection_root

    root = tmp_path / "ansible_collections" / "rdmaprov"
    root.mkdir(parents=True)
    (root / "cluster").symlink_to(collection_root())
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls.jsonl"
    if ping:
        fake = bindir / "ping"
        fake.write_text(
            f"#!{sys.executable}\nimport json, sys\n"
            f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
            "if sys.argv[-1] == '10.0.0.3':\n"
            "    print('3 packets transmitted, 0 received, 100% packet loss'); sys.exit(1)\n")
        fake.chmod(0o755)
    argfile = tmp_path / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    module = collection_root() / "plugins" / "modules" / "net_mtu_verify.py"
    env = {"PYTHONPATH": str(tmp_path), "PATH": f"{bindir}:/nonexistent"}
    proc = subprocess.run([sys.executable, str(module), str(argfile)], capture_output=True,
                          text=True, check=False, env=env)
    seen = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    return proc.returncode, json.loads(proc.stdout), seen


def test_verify_module_pings_each_pair_as_argv_and_names_the_failing_one(tmp_path: Path) -> None:
    args = {"verify": {"name": "node2", "address": "10.0.0.2", "mtu": 9000, "count": 3,
                       "timeout": 2, "drift": False}, "peers": PEERS}
    rc, out, seen = _run_verify(tmp_path, args)
    # A pair whose DF packets do not pass fails the host, naming the pair.
    assert rc != 0 and out["failed"] is True, out
    assert out["msg"] == "MTU-sized DF packets do not pass: " + out["failures"][0]
    assert [s[-1] for s in seen] == ["10.0.0.1", "10.0.0.3"]
    assert seen[0] == ["-M", "do", "-s", "8972", "-c", "3", "-i", "0.2", "-W", "2",
                       "-I", "10.0.0.2", "10.0.0.1"]
    assert out["lines"][0] == "node2 (10.0.0.2) -> node1 (10.0.0.1): 9000-byte DF packets pass"
    assert out["failures"] == [
        "node2 (10.0.0.2) -> node3 (10.0.0.3): 9000-byte DF packets do NOT pass (ping -M do -s "
        "8972): no reply: a hop on the path (switch port, bridge, the peer's interface) drops "
        "the frame"]
    assert [r["dst"] for r in out["report"]] == ["node1", "node3"]


def test_verify_module_in_check_mode_pings_only_what_was_made(tmp_path: Path) -> None:
    own = {"name": "node2", "address": "10.0.0.2", "mtu": 9000}
    args = {"verify": own, "peers": PEERS, "_ansible_check_mode": True}
    rc, out, seen = _run_verify(tmp_path / "a", args)
    assert [s[-1] for s in seen] == ["10.0.0.3"] and out["failures"], out
    rc, out, seen = _run_verify(tmp_path / "b", {**args, "verify": {**own, "drift": True}})
    assert rc == 0 and seen == [] and out["report"] == [] and out["rdmaprov_report"] == []
    rc, out, seen = _run_verify(tmp_path / "d", {"verify": own, "peers": PEERS[1:]})
    assert rc == 0 and out["rdmaprov_report"] == out["lines"] == [
        "node2 (10.0.0.2) -> node1 (10.0.0.1): 9000-byte DF packets pass"], out
    # ping not there yet (only reported for installation under --check): nothing proves anything.
    rc, out, seen = _run_verify(tmp_path / "c", args, ping=False)
    assert rc == 0 and out["report"] == []


def test_verify_module_refuses_an_option_as_an_address(tmp_path: Path) -> None:
    args = {"verify": {"name": "node2", "address": "10.0.0.2", "mtu": 9000},
            "peers": [{"name": "evil", "address": "-f", "drift": False}]}
    rc, out, seen = _run_verify(tmp_path, args)
    assert rc != 0 and out["msg"] == "net_mtu verify: '-f' is not an address" and seen == []


def test_the_boot_unit_sets_each_mtu_and_its_drift_is_the_plans():
    text = mtu.unit([{"name": "ens1", "mtu": "9000"}, {"name": "my if", "mtu": 4000}])
    assert text.startswith("# Ansible managed (net_mtu)\n")
    assert text.endswith("[Install]\nWantedBy=multi-user.target\n")
    execs = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    assert [ln.rsplit("rdmaprov-mtu ", 1)[1] for ln in execs] == ["ens1 9000", '"my if" 4000']
    probe = _probe(_iface("ens1", 9000))
    settings = _settings(interfaces=[{"name": "ens1"}], persist="systemd_unit")
    first = mtu.plan(probe, settings)
    state = {first["unit_path"]: {"exists": True, "mode": "0644", "owner": "root",
                                  "group": "root",
                                  "sha1": collection.state_drift.sha1(first["unit"].encode())}}
    same = mtu.plan({**probe, "file_state": state,
                     "unit_state": {"rdmaprov-mtu.service": "enabled"}}, settings)
    assert same["persist_drift"] == [] and same["host_drift"] is False
    off = mtu.plan({**probe, "file_state": state,
                    "unit_state": {"rdmaprov-mtu.service": "disabled"}}, settings)
    assert off["persist_drift"] == ["rdmaprov-mtu.service: disabled, wanted enabled"]
    assert off["host_drift"] is True
    # Another MTU is another unit.
    other = mtu.plan({**probe, "file_state": state,
                      "unit_state": {"rdmaprov-mtu.service": "enabled"}},
                     {**settings, "default": 4000})
    assert other["persist_drift"] == [
        "/etc/systemd/system/rdmaprov-mtu.service: content differs"]


def test_plan_runtime_only_lines_ping_install_and_provable():
    probe = _probe(_iface("ens1", 9000), ping=None)
    plan = mtu.plan(probe, _settings(interfaces=[{"name": "ens1"}], persist="none"))
    assert plan["unpersisted"] == [
        {"name": "ens1", "msg": "ens1: MTU 9000 set at runtime only (net_mtu_persist: none)"}]
    assert plan["ping_install"] == "apt" and plan["provable"] is True
    assert mtu.plan({**probe, "apt": False}, _settings(interfaces=[{"name": "ens1"}],
                                                       persist="none"))["ping_install"] == \
        "package"
    quiet = mtu.plan(probe, _settings(interfaces=[{"name": "ens1"}], persist="none",
                                      verify=False))
    assert quiet["ping_install"] is None and quiet["provable"] is False
    assert mtu.plan(_probe(), _settings())["provable"] is False  # nothing set, nothing to prove
    assert mtu.plan({**probe, "ping": "/bin/ping"}, _settings(
        interfaces=[{"name": "ens1"}], persist="none"))["ping_install"] is None


def test_the_boot_units_header_is_the_plays_managed_string():
    probe = _probe(_iface("ens1", 9000))
    settings = _settings(interfaces=[{"name": "ens1"}], persist="systemd_unit",
                         managed="Managed by ops")
    assert mtu.plan(probe, settings)["unit"].startswith("# Managed by ops (net_mtu)\n")


def test_a_host_without_iproute2_and_nothing_to_set_is_not_a_failure(monkeypatch):
    """The lent GPU host (Ubuntu 24.04, no `ip`, local connection) failed bootstrap --check at
    net_mtu's probe although no MTU was asked for: `ip` is needed only to read the interfaces
    the role sets."""
    probe_mod = collection.net_mtu_probe
    monkeypatch.setattr(probe_mod, "run", lambda argv: None)  # no `ip` command
    assert probe_mod.probe("h200", ["eth1"]) == {
        "error": "ip -j addr show failed: is iproute2 installed?"}
    seen = probe_mod.probe("h200", [])
    assert "error" not in seen and seen["interfaces"] == []
    plan = mtu.plan(seen, _settings())
    assert plan["errors"] == [] and plan["host_drift"] is False and plan["wanted"] == []


def test_ifcfg_edit_is_lineinfiles():
    assert mtu.ifcfg_set_mtu("DEVICE=ens5\nMTU=1500\nONBOOT=yes\n", 9000) == \
        "DEVICE=ens5\nMTU=9000\nONBOOT=yes\n"
    assert mtu.ifcfg_set_mtu("DEVICE=ens5\nMTU=1500\nMTU=1600", 9000) == \
        "DEVICE=ens5\nMTU=1500\nMTU=9000\n"  # the last one, as lineinfile
    assert mtu.ifcfg_set_mtu("DEVICE=ens5\n", 9000) == "DEVICE=ens5\nMTU=9000\n"
    assert mtu.ifcfg_set_mtu(None, 4000) == "MTU=4000\n"


def _kept(plan, **changes):
    """file_state as the probe reads the plan's files once written (owner root), with changes."""
    return {f["path"]: {"exists": True, "mode": f["mode"], "owner": "root", "group": "root",
                        "sha1": collection.state_drift.sha1(f["content"].encode()),
                        **changes.get(f["path"], {})} for f in plan["to_write"]}


def test_files_in_line_are_nothing_to_do_and_one_that_differs_is_rewritten():
    """A converged netplan, networkd or ifupdown host costs no converge include (the probe
    reads the files the plan keeps); one that differs is written and followed by its manager's
    command, that one only."""
    probe = _probe(
        _iface("ens1", 9000, netplan_present=True, netplan_files=["/etc/netplan/50.yaml"]),
        _iface("ens3", 9000, networkd={"active": True, "network_file": "/run/n/10-ens3.network"}),
        _iface("ens4", 9000, ifupdown_file="/etc/network/interfaces",
               ifupdown_text=IFUPDOWN.replace("ens1", "ens4")))
    settings = _settings(interfaces=[{"name": "ens1"}, {"name": "ens3"}, {"name": "ens4"}],
                         netplan_file="/etc/netplan/61-mine.yaml")
    first = mtu.plan(probe, settings)
    assert first["to_write"][0]["path"] == "/etc/netplan/61-mine.yaml"
    same = mtu.plan({**probe, "file_state": _kept(first)}, settings)
    assert same["persist_drift"] == [] and same["host_drift"] is False and same["persist"] == []
    dropin = "/etc/systemd/network/10-ens3.network.d/60-rdmaprov-mtu.conf"
    off = mtu.plan({**probe, "file_state": _kept(first, **{dropin: {"sha1": "0"}})}, settings)
    assert off["persist_drift"] == [f"{dropin}: content differs"] and off["host_drift"] is True
    assert off["persist"] == [{"argv": ["networkctl", "reload"], "removes": dropin,
                               "label": "networkctl reload"}]
    mode = mtu.plan({**probe, "file_state": _kept(first, **{
        "/etc/netplan/61-mine.yaml": {"mode": "0644"}})}, settings)
    assert mode["persist_drift"] == ["/etc/netplan/61-mine.yaml: mode 0644, wanted 0600"]


def test_an_enabled_boot_unit_needs_no_command_and_a_disabled_one_is_enabled():
    probe = _probe(_iface("ens1", 9000))
    settings = _settings(interfaces=[{"name": "ens1"}], persist="systemd_unit")
    state = _kept(mtu.plan(probe, settings))
    on = mtu.plan({**probe, "file_state": state,
                   "unit_state": {"rdmaprov-mtu.service": "enabled"}}, settings)
    assert on["persist"] == [] and on["to_write"][0]["path"] == on["unit_path"]
    off = mtu.plan({**probe, "file_state": state,
                    "unit_state": {"rdmaprov-mtu.service": "disabled"}}, settings)
    assert [c["argv"] for c in off["persist"]] == [["systemctl", "enable", "rdmaprov-mtu.service"]]


def test_ping_under_check_without_python_apt_is_not_installed():
    probe = _probe(_iface("ens1", 9000), ping=None)
    settings = _settings(interfaces=[{"name": "ens1"}], persist="none")
    assert mtu.plan(probe, settings)["ping_apt"] == ["iputils-ping"]
    assert mtu.plan(probe, {**settings, "check_mode": True})["ping_apt"] == ["iputils-ping"]
    held = mtu.plan(probe, {**settings, "check_mode": True, "python_apt": False})
    assert held["ping_apt"] == [] and held["host_drift"] is True  # still reported as to do
    other = mtu.plan({**probe, "apt": False}, settings)
    assert other["ping_apt"] == [] and other["ping_other"] == ["iputils"]
    assert mtu.plan(probe, {**settings, "verify": False})["ping_other"] == []


def test_refused_is_the_errors_in_one_line():
    probe = _probe(_iface("eth0", 1500))
    plan = mtu.plan(probe, _settings(interfaces=[{"name": "ens9"}, {"name": "ens8"}]))
    assert plan["refused"] == "node1: ens9: no such interface; node1: ens8: no such interface"
    assert mtu.plan(probe, _settings())["refused"] == ""


def test_proof_runs_when_asked_or_when_any_host_has_something_to_do():
    def entry(name, drift=False):
        return {"name": name, "address": f"10.0.0.{name[-1]}", "drift": drift, "peers": []}
    plans = {f"node{i}": {"host_drift": False, "verify": entry(f"node{i}")} for i in (1, 2, 3)}
    own = plans["node2"]["verify"]
    assert mtu.proof("node2", own, plans, []) == (False, [])
    assert mtu.proof("node2", own, plans, ["net_mtu_verify"]) == (
        True, [plans["node1"]["verify"], plans["node3"]["verify"]])
    plans["node3"]["host_drift"] = True
    assert mtu.proof("node2", own, plans, [])[0] is True
    # Nothing to prove on this host: no proof, whatever the play.
    assert mtu.proof("node2", None, plans, ["net_mtu_verify"]) == (False, [])
    # net_mtu_verify_peers names the peers; one without a plan gives an empty entry.
    assert mtu.proof("node2", {**own, "peers": ["node1", "node2", "gone"]}, plans, []) == (
        True, [plans["node1"]["verify"], {}])
    # A peer outside the play, known through peer_plans; its drift does not start the proof.
    outside = {"node9": {"host_drift": True, "verify": entry("node9")}}
    plans["node3"]["host_drift"] = False
    asked = {**own, "peers": ["node9"]}
    assert mtu.proof("node2", asked, plans, ["net_mtu_verify"], {**plans, **outside}) == (
        True, [outside["node9"]["verify"]])
    assert mtu.proof("node2", asked, plans, [], {**plans, **outside}) == (False, [])


def test_the_verify_action_fills_the_peers_from_the_plays_plans(monkeypatch):
    from ansible_collections.rdmaprov.cluster.plugins.action import net_mtu_verify as action

    def entry(name, drift=False):
        return {"name": name, "address": f"10.0.0.{name[-1]}", "drift": drift, "peers": []}
    hostvars = {f"node{i}": {"_net_mtu_probe": {"plan": {"host_drift": i == 3,
                                                         "verify": entry(f"node{i}")}}}
                for i in (1, 2, 3)}
    task = mock.MagicMock()
    task.args = {"verify": entry("node2")}
    task.action = "rdmaprov.cluster.net_mtu_verify"
    task.resolved_action = "rdmaprov.cluster.net_mtu_verify"
    task.async_val = 0
    task.check_mode = False
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None,
                                 templar=None, shared_loader_obj=None)
    seen = {}

    def execute(module_name, module_args, task_vars):
        seen.update(module=module_name, args=module_args)
        return {"changed": False, "lines": ["ok"]}
    monkeypatch.setattr(plugin, "_execute_module", execute)
    task_vars = {"hostvars": hostvars, "ansible_play_hosts": ["node1", "node2", "node3"],
                 "inventory_hostname": "node2", "ansible_run_tags": ["all"]}
    result = plugin.run(task_vars=task_vars)
    assert seen["args"]["peers"] == [entry("node1"), entry("node3")]
    assert result["_ansible_verbose_always"] is True and result["lines"] == ["ok"]
    # No host with anything to do and the proof not asked for: skipped, nothing run.
    hostvars["node3"]["_net_mtu_probe"]["plan"]["host_drift"] = False
    seen.clear()
    result = plugin.run(task_vars=task_vars)
    assert result["skipped"] is True and seen == {}


@pytest.mark.parametrize("managed", [
    "Ansible managed",
    "Managed by rdmaprov\nnetwork: {version: 3}",
    "one\r\nethernets: {eth9: {mtu: 1500}}",
    "x\u2028network: {}\x85y\x1b[31m",
])
def test_the_netplan_file_is_the_interfaces_mtu_whatever_ansible_managed_holds(managed):
    """The header is the play's ansible_managed (an inventory may set several lines, or line
    breaks YAML reads as such): every line of it stays a comment, so netplan reads only ours."""
    text = mtu.netplan([{"name": "eth1", "mtu": 9000}], managed)
    assert yaml.safe_load(text) == {"network": {"version": 2,
                                                "ethernets": {"eth1": {"mtu": 9000}}}}
    head = text.split("network:\n")[0]
    assert all(line.startswith("#") for line in head.splitlines()), head
    assert "\x1b" not in text
    if managed == "Ansible managed":  # a one-line header: as the roles always wrote it
        assert text.startswith("# Ansible managed (net_mtu). netplan merges this with")
