"""firewall's pure logic (plugins/module_utils/netcfg_firewall.py)."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from rdmaprov.collection import netcfg_firewall as fw

ROOT = Path(__file__).resolve().parents[2]

# firewall_probe.py's output on a Debian 12 lab node with real listeners (see its _source).
PROBE = json.loads((ROOT / "tests/fixtures/firewall/probe-bookworm-listeners.json").read_text())

# slurm.conf in the format Slurm documents (slurm.conf(5)): names are case-insensitive, '#'
# starts a comment, node and partition lines carry several Key=Value pairs.
SLURM_CONF = """\
# slurm.conf for the lab cluster
ClusterName=lab
SlurmctldHost=node1
slurmctldport=6820-6821   # two ports: slurmctld spreads its RPCs over a range
SlurmdPort=7003
SrunPortRange=60001-63000
#SlurmdPort=9999
NodeName=node[1-3] CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

SETTINGS = {"backend": "auto", "policy": "scoped", "cluster_subnets": ["10.198.246.8/29"],
            "allow_control_host": True, "ssh_sources": [], "ssh_port": 22,
            "rendezvous_ports": [29500], "nccl_port_range": "auto", "roce_udp_port": 4791,
            "slurm": "auto", "allow": [], "waive": []}


def test_backend_choice():
    assert fw.pick_backend("auto", True, True, True)[0] == "firewalld"
    assert fw.pick_backend("auto", False, True, True)[0] == "ufw"
    assert fw.pick_backend("auto", False, False, True)[0] == "nftables"
    assert fw.pick_backend("auto", False, False, False)[0] is None
    assert fw.pick_backend("ufw", True, False, True)[0] == "ufw"
    # An explicit backend that is not there says so instead of failing in a command later.
    assert fw.pick_backend("ufw", False, False, True, ufw_present=False) == (
        None, "firewall_backend=ufw, but ufw is not installed")
    assert fw.pick_backend("firewalld", False, False, True)[0] is None


def test_port_range_and_span():
    assert fw.port_range("auto", "32768\t60999") == (32768, 60999)
    assert fw.port_range("40000-41000", "") == (40000, 41000)
    assert fw.port_span("60001:63000") == (60001, 63000)
    for bad in ("5-1", "0", "70000", "22,23", "ssh"):
        with pytest.raises(ValueError):
            fw.port_span(bad)


def test_merge_ports_never_overlaps():
    # nft refuses overlapping intervals in one set: an SrunPortRange over the ephemeral range.
    assert fw.merge_ports(["22", "32768-60999", "29500", "60001-63000", "6818", "6817"]) == [
        "22", "6817-6818", "29500", "32768-63000"]


def test_subnets_and_control_host():
    nets = fw.normalise_subnets(["10.0.0.5/24", "10.0.0.0/24", "fd00::/64"])
    assert nets == {"ipv4": ["10.0.0.0/24"], "ipv6": ["fd00::/64"]}
    assert fw.control_host_allowed("10.0.0.9", ["10.0.0.0/24"])
    assert not fw.control_host_allowed("10.1.0.9", ["10.0.0.0/24"])


def test_listeners_from_a_real_node():
    got = {(lst["port"], lst["proto"]): lst["processes"] for lst in
           fw.listeners(PROBE["proc_net"], PROBE["socket_owners"])}
    assert got == {(22, "tcp"): ["sshd"], (68, "udp"): ["dhclient"],
                   (5353, "udp"): ["python3"], (9100, "tcp"): ["python3"]}
    # 127.0.0.1:8125 is in the file, but nothing off the host reaches it.
    assert any(s["port"] == 8125 for s in fw.parse_proc_net("tcp", PROBE["proc_net"]["tcp"]))


def test_proc_net_addresses():
    v6 = ("  sl  local_address                         remote_address                        st\n"
          "   0: 0000000000000000FFFF00000100007F:1F90 00000000000000000000000000000000:0000 0A "
          "00000000:00000000 00:00000000 00000000     0        0 7 1\n"
          "   1: B80D0120000000000000000001000000:0050 00000000000000000000000000000000:0000 0A "
          "00000000:00000000 00:00000000 00000000     0        0 8 1\n")
    socks = fw.parse_proc_net("tcp6", v6)
    assert [ipaddress.ip_address(s["address"]) for s in socks] == [
        ipaddress.ip_address("::ffff:127.0.0.1"), ipaddress.ip_address("2001:db8::1")]
    # The v4-mapped loopback is loopback too.
    assert [lst["port"] for lst in fw.listeners({"tcp6": v6}, {})] == [80]


def test_slurm_ports():
    assert fw.slurm_ports(SLURM_CONF, True) == ["6820-6821", "7003", "60001-63000"]
    assert fw.slurm_ports(None, True) == ["6817", "6818"]          # installed, no slurm.conf
    assert fw.slurm_ports("ClusterName=x\n", False) == ["6817", "6818"]
    assert fw.slurm_ports(None, False) == []                        # no Slurm on the host
    with pytest.raises(ValueError, match="SlurmdPort=abc"):
        fw.slurm_ports("SlurmdPort=abc\n", True)


def test_scoped_cuts_nothing_that_runs_here():
    plan = fw.plan(PROBE, SETTINGS)
    assert plan["backend"] == "nftables" and plan["cut"] == []
    assert plan["restricted_tcp"] == ["29500", "32768-60999"]
    assert plan["cluster_tcp"] == ["22", "29500", "32768-60999"] and plan["slurm_ports"] == []


def test_scoped_names_a_foreign_listener_on_rdmaprovs_ports():
    # The fixture's http.server socket (0.0.0.0:9100, 0x238C) moved to 29500 (0x733C), the
    # rendezvous port: scoped mode refuses that port to hosts outside the cluster.
    tcp = PROBE["proc_net"]["tcp"].replace("00000000:238C", "00000000:733C")
    plan = fw.plan({**PROBE, "proc_net": {**PROBE["proc_net"], "tcp": tcp}}, SETTINGS)
    assert plan["cut_text"] == "29500/tcp (python3)"


def test_deny_names_every_listener_it_would_cut_until_allowed_or_waived():
    deny = {**SETTINGS, "policy": "deny"}
    plan = fw.plan(PROBE, deny)
    assert plan["cut_text"] == "68/udp (dhclient), 5353/udp (python3), 9100/tcp (python3)"
    ok = fw.plan(PROBE, {**deny, "allow": [{"port": 9100, "sources": ["10.0.0.0/8"]}],
                         "waive": ["68/udp", "python3"]})
    assert ok["cut"] == []
    # A waiver for the wrong protocol does not count.
    wrong = fw.plan(PROBE, {**deny, "waive": ["9100/udp"]})
    assert wrong["cut_text"].endswith("9100/tcp (python3)")


def test_deny_keeps_slurm_between_cluster_hosts():
    probe = {**PROBE, "slurm_conf": "SlurmdPort=9100\n", "slurm_conf_path": "/etc/slurm/slurm.conf"}
    plan = fw.plan(probe, {**SETTINGS, "policy": "deny"})
    assert plan["slurm_ports"] == ["6817", "9100"]
    assert "9100" in plan["cluster_tcp"] and "9100/tcp" not in plan["cut_text"]
    never = fw.plan(probe, {**SETTINGS, "policy": "deny", "slurm": "never"})
    assert never["slurm_ports"] == [] and "9100/tcp" in never["cut_text"]


def test_bad_input_says_what_and_where():
    with pytest.raises(ValueError, match=r"firewall_allow\[0\]: proto 'icmp'"):
        fw.plan(PROBE, {**SETTINGS, "allow": [{"port": 1, "proto": "icmp"}]})
    with pytest.raises(ValueError, match=r"firewall_allow\[1\]: needs a port"):
        fw.normalise_allow([{"port": 1}, {"proto": "tcp"}])
    with pytest.raises(ValueError, match="firewall_policy 'open'"):
        fw.plan(PROBE, {**SETTINGS, "policy": "open"})
    with pytest.raises(ValueError, match=r"^/etc/slurm/slurm\.conf: SrunPortRange=9-1: "):
        fw.plan({**PROBE, "slurm_conf": "SrunPortRange=9-1\n",
                 "slurm_conf_path": "/etc/slurm/slurm.conf"}, SETTINGS)


def _plan_with_allow():
    return fw.plan({**PROBE, "control_ip": "10.199.246.1"},
                   {**SETTINGS, "allow": [{"port": 9100}, {"port": "5000-5001", "proto": "udp",
                                                           "sources": ["fd00::/64"]}]})


def test_firewalld_rules_as_firewalld_prints_them():
    rules = fw.firewalld_rules(_plan_with_allow())
    # Lines as `firewall-cmd --policy=P --list-rich-rules` printed them on a lab node (1.3.3).
    assert 'rule family="ipv4" source address="10.198.246.8/29" port port="32768-60999" ' \
           'protocol="tcp" accept' in rules
    assert 'rule port port="9100" protocol="tcp" accept' in rules
    assert 'rule family="ipv4" source address="10.199.246.1/32" port port="22" protocol="tcp" ' \
           'accept' in rules
    assert 'rule family="ipv6" source address="fd00::/64" port port="5000-5001" ' \
           'protocol="udp" accept' in rules


def test_firewalld_changes():
    plan = _plan_with_allow()
    want = fw.firewalld_rules(plan)
    create = fw.firewalld_changes(plan, "rdmaprov", None, None)
    assert create[0] == ["firewall-cmd", "--permanent", "--new-policy=rdmaprov"]
    assert create[-1] == ["firewall-cmd", "--reload"]
    assert not any(c[1].startswith("--policy") for c in create)  # runtime waits for the reload
    have = "\n".join(want) + "\n"
    assert fw.firewalld_changes(plan, "rdmaprov", have, have) == []
    stale = 'rule port port="1234" protocol="tcp" accept'
    cmds = fw.firewalld_changes(plan, "rdmaprov", have + stale + "\n", "\n".join(want[1:]))
    assert cmds == [
        ["firewall-cmd", "--permanent", "--policy=rdmaprov", f"--remove-rich-rule={stale}"],
        ["firewall-cmd", "--policy=rdmaprov", f"--add-rich-rule={want[0]}"]]


def test_ufw_rules_as_ufw_prints_them():
    rules = fw.ufw_rules(_plan_with_allow())
    added = [r["added"] for r in rules]
    # Lines as `ufw show added` printed them on a lab node (ufw 0.36.2).
    assert ("ufw allow from 10.198.246.8/29 to any port 32768:60999 proto tcp "
            "comment 'rdmaprov'") in added
    assert "ufw allow 9100/tcp comment 'rdmaprov'" in added
    assert "ufw allow from 10.199.246.1 to any port 22 proto tcp comment 'rdmaprov'" in added
    assert rules[0]["args"] == ["allow", "proto", "tcp", "from", "10.198.246.8/29", "to", "any",
                                "port", "22", "comment", "rdmaprov"]


def test_live_hash_and_summary():
    text = 'table inet rdmaprov {\n\tcomment "rdmaprov sha1=' + "a" * 40 + '"\n}'
    assert fw.live_hash(text) == "a" * 40
    assert fw.live_hash("") == ""
    listing = {"nftables": [{"metainfo": {"version": "1.0.6"}},
                            {"table": {"family": "inet", "name": "rdmaprov", "handle": 6}},
                            {"set": {"name": "cluster_ipv4"}},
                            {"chain": {"name": "input", "hook": "input", "policy": "drop"}},
                            {"rule": {"chain": "input"}}, {"rule": {"chain": "input"}}]}
    summary = fw.nft_table_summary(json.dumps(listing))
    assert summary["rules"] == 2 and summary["chains"][0]["policy"] == "drop"
    assert fw.nft_table_summary("") is None


@pytest.mark.parametrize(("value", "problem"), [
    ({"firewall_policy": "open"}, "firewall_policy: 'open' is not one of scoped, deny"),
    ({"firewall_allow": [{"port": 70000}]},
     "firewall_allow[0].port: 70000 is not a valid TCP/UDP port (1..65535)"),
    ({"firewall_allow": [{"port": "61100-61001"}]},
     "firewall_allow[0].port: '61100-61001' is not a TCP/UDP port or LOW-HIGH range (1..65535)"),
    ({"firewall_allow": [{"port": 9100, "proto": "icmp"}]},
     "firewall_allow[0].proto: 'icmp' is not one of tcp, udp"),
    ({"firewall_allow": [{"prot": "tcp", "port": 1}]},
     "firewall_allow[0]: unknown key 'prot' (did you mean proto?)"),
    ({"firewall_slurm": "yes"}, "firewall_slurm: 'yes' is not one of auto, never"),
])
def test_bad_settings_stop_before_any_host(value, problem):
    """The role's argument specs, through the check every command runs before SSH."""
    from rdmaprov import inventory

    specs = inventory.load_specs(ROOT)
    assert inventory.check_variables(value, specs) == [problem]


def test_good_settings_pass_the_same_check():
    from rdmaprov import inventory

    good = {"firewall_policy": "deny", "firewall_waive": ["68/udp", "rpc.statd"],
            "firewall_allow": [{"port": 9100, "sources": ["10.0.0.0/24"]},
                               {"port": "60001-63000", "proto": "udp"}]}
    assert inventory.check_variables(good, inventory.load_specs(ROOT)) == []
