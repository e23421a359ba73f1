"""net_mtu's pure logic (plugins/module_utils/netcfg_mtu.py) and the role's argument specs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

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


def test_drift():
    assert mtu.mtu_drift([{"name": "eth0", "mtu": 9000}],
                         [{"name": "eth0", "mtu": 1500}]) == ["eth0"]
    assert mtu.mtu_drift([{"name": "eth0", "mtu": 9000}], [{"name": "eth0", "mtu": 9000}]) == []


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
