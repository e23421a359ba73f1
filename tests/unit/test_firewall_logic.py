"""firewall's pure logic (plugins/module_utils/netcfg_firewall.py)."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from rdmaprov import collection
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
            "slurm": "auto", "allow": [], "waive": [], "host": "node1", "connection": "ssh",
            "nft_extra_rules": [], "nft_dir": "/etc/rdmaprov",
            "nft_unit_name": "rdmaprov-firewall.service", "nft_table": "rdmaprov"}


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


def test_live_hash():
    text = 'table inet rdmaprov {\n\tcomment "rdmaprov sha1=' + "a" * 40 + '"\n}'
    assert fw.live_hash(text) == "a" * 40
    assert fw.live_hash("") == ""


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


# --- refusals (the preflight's one assert) -----------------------------------------------------
LOCKOUT = ("node1: firewall_allow_control_host is false and no declared source admits the "
           "control host 10.199.246.1: this ruleset would lock Ansible out")


@pytest.mark.parametrize(("probe", "settings", "locked_out"), [
    # SSH from 10.199.246.1, outside the cluster subnet: only firewall_allow_control_host
    # admits it; without it, the ruleset is refused.
    ({"control_ip": "10.199.246.1"}, {"allow_control_host": False}, True),
    ({"control_ip": "10.199.246.1"}, {}, False),
    # A declared SSH source or a cluster subnet that covers it admits it too.
    ({"control_ip": "10.199.246.1"}, {"allow_control_host": False,
                                      "ssh_sources": ["10.199.246.0/24"]}, False),
    ({"control_ip": "10.198.246.9"}, {"allow_control_host": False}, False),
    ({"control_ip": "10.198.246.9"}, {"allow_control_host": False,
                                      "cluster_subnets": ["10.198.0.0/30"]}, True),
    # An allow entry open to anyone is not an SSH source: still refused.
    ({"control_ip": "10.199.246.1"}, {"allow_control_host": False,
                                      "allow": [{"port": 22}]}, True),
    # Ansible on the host itself, or no SSH session to read: nothing to lock out.
    ({"control_ip": "10.199.246.1"}, {"allow_control_host": False, "connection": "local"}, False),
    ({"control_ip": None}, {"allow_control_host": False}, False),
])
def test_the_control_hosts_ssh_stays_admitted(probe, settings, locked_out):
    for backend in ("nftables", "ufw", "firewalld"):
        fake = {**PROBE, **probe, "ufw_present": True, "ufw_active": backend == "ufw",
                "firewalld_active": backend == "firewalld"}
        plan = fw.plan(fake, {**SETTINGS, **settings})
        assert plan["backend"] == backend
        assert fw.admits_control_host(plan, fake, {**SETTINGS, **settings}) is not locked_out
        got = plan["refusals"]
        assert got == ([LOCKOUT.replace("10.199.246.1", str(probe["control_ip"]))]
                       if locked_out else []), backend


def test_refusals_without_a_backend_or_the_rollback_timer():
    none = fw.plan({**PROBE, "nft_present": False}, SETTINGS)
    assert none["backend"] is None
    assert none["refusals"] == ["node1: no firewall backend found: firewalld and ufw are not "
                                "active and nft is not installed (install nftables or set "
                                "firewall_backend)"]
    assert none["nft_cut_refusal"] == []
    # No backend: the lockout rule has nothing to judge, even without any admitted source.
    assert fw.plan({**PROBE, "nft_present": False, "control_ip": "10.199.246.1"},
                   {**SETTINGS, "allow_control_host": False})["refusals"] == none["refusals"]
    timerless = fw.plan({**PROBE, "systemd_run": False, "control_ip": "10.199.246.1"},
                        {**SETTINGS, "allow_control_host": False})
    assert timerless["refusals"] == [
        "node1: systemd-run is missing; the nftables backend will not apply a ruleset it cannot "
        "roll back if the SSH path is lost", LOCKOUT]


def test_a_cut_is_refused_only_where_the_change_tightens():
    deny = {**SETTINGS, "policy": "deny"}
    line = ("node1: firewall_policy=deny would cut these listening services: 68/udp (dhclient), "
            "5353/udp (python3), 9100/tcp (python3); allow each one (firewall_allow) or waive it "
            "(firewall_waive)")
    # nftables: the control host adds it when the rendered ruleset is not the live one.
    nft = fw.plan(PROBE, deny)
    assert nft["refusals"] == [] and nft["nft_cut_refusal"] == [line]
    assert fw.plan(PROBE, SETTINGS)["nft_cut_refusal"] == []
    # ufw: switched on under deny tightens; an active ufw only gets additions.
    off = fw.plan({**PROBE, "ufw_present": True}, {**deny, "backend": "ufw"})
    assert off["refusals"] == [line] and off["nft_cut_refusal"] == []
    assert off["ufw_enable"] is True and off["ufw_enable_drift"] == (
        "node1: drift: ufw is inactive; firewall_policy=deny switches it on")
    on = fw.plan({**PROBE, "ufw_present": True, "ufw_active": True}, {**deny, "backend": "ufw"})
    assert on["refusals"] == [] and on["ufw_active"] is True
    assert on["ufw_enable"] is False and on["ufw_enable_drift"] == ""
    scoped = fw.plan({**PROBE, "ufw_present": True}, {**SETTINGS, "backend": "ufw"})
    assert scoped["ufw_enable"] is False and scoped["ufw_enable_drift"] == ""
    # firewalld only ever adds.
    fwd = fw.plan({**PROBE, "firewalld_active": True}, deny)
    assert fwd["refusals"] == [] and fwd["nft_cut_refusal"] == []


def test_plan_carries_each_backends_changes():
    base = _plan_with_allow()
    assert base["ufw_rules"] == fw.ufw_rules(base)
    assert base["firewalld_rules"] == fw.firewalld_rules(base)
    assert base["firewalld_changes"] == []  # nftables: no firewall-cmd calls
    assert base["live_hash"] == "" and base["nft_table_present"] is False
    have = "\n".join(base["firewalld_rules"][1:])
    probe = {**PROBE, "control_ip": "10.199.246.1", "firewalld_active": True,
             "firewalld_policy": {"permanent": {"rc": 0, "stdout": have, "stderr": ""},
                                  "runtime": {"rc": 0, "stdout": have, "stderr": ""}}}
    settings = {**SETTINGS, "allow": [{"port": 9100}, {"port": "5000-5001", "proto": "udp",
                                                       "sources": ["fd00::/64"]}]}
    plan = fw.plan(probe, settings, "rdmaprov")
    assert plan["firewalld_changes"] == fw.firewalld_changes(plan, "rdmaprov", have, have)
    assert [c[-1] for c in plan["firewalld_changes"]] == [
        f"--add-rich-rule={base['firewalld_rules'][0]}"] * 2
    assert plan["firewalld_drift"] == "node1: drift: " + "; ".join(
        " ".join(c) for c in plan["firewalld_changes"])
    assert base["firewalld_drift"] == ""
    # The policy does not exist yet (firewall-cmd answers rc 1 for an unknown policy).
    missing = {"rc": 1, "stdout": "", "stderr": "Error: INVALID_POLICY: rdmaprov"}
    new = fw.plan({**probe, "firewalld_policy": {"permanent": missing, "runtime": missing}},
                  settings, "rdmaprov")
    assert new["firewalld_changes"] == fw.firewalld_changes(new, "rdmaprov", None, None)
    live = 'table inet rdmaprov {\n\tcomment "rdmaprov sha1=' + "b" * 40 + '"\n}'
    nft = fw.plan({**PROBE, "nft_table": {"rc": 0, "stdout": live, "stderr": ""}}, SETTINGS)
    assert nft["live_hash"] == "b" * 40 and nft["nft_table_present"] is True


# --- verify (the rules read back after applying) ---------------------------------------------
NAMES = {**SETTINGS, "nft_table": "rdmaprov", "firewalld_policy": "rdmaprov"}
# Listings captured on a lab node (Debian 12, nft 1.0.6) after `rdmaprov bootstrap`, then after
# each drift another tool makes; the reference is the rendered ruleset loaded into a network
# namespace of its own and listed (firewall_probe.nft_reference), the rendered file is the one
# the role wrote there (the plan below renders it byte for byte).
FIXTURES = ROOT / "tests/fixtures/firewall"
LAB = {**SETTINGS, "cluster_subnets": ["10.198.249.0/24", "10.199.249.0/24"]}
LAB_PROBE = {**PROBE, "control_ip": "10.199.249.1"}
REJECT = "tcp dport { 29500, 32768-60999 } reject with tcp reset"


def _listing(name):
    return (FIXTURES / name).read_text()


def _live(name):
    return {"rc": 0, "stdout": _listing(name), "stderr": ""}


def _ok(stdout):
    return {"rc": 0, "stdout": stdout, "stderr": ""}


def test_verify_nftables():
    """After applying, the table read back is held to the wanted one (the lab node's listings)."""
    plan = fw.plan({**LAB_PROBE, "nft_reference": {
        "rc": 0, "stdout": _listing("nft-bookworm-reference.txt"), "stderr": "",
        "sha1": fw.plan(LAB_PROBE, LAB)["nft_hash"]}}, LAB)
    got = fw.verify(plan, NAMES, _live("nft-bookworm-converged.txt"), check=False, pending=True)
    assert got == {"applies": True, "ok": True, "pending": "", "msg": (
        "node1: table inet rdmaprov: 8 rules, as wanted, firewall_policy=scoped; "
        "TCP 22,29500,32768-60999 and UDP 4791 open to 10.198.249.0/24, 10.199.249.0/24; "
        "SSH also from 10.199.249.1/32; Slurm not on this host")}
    bad = fw.verify(plan, NAMES, _live("nft-bookworm-deleted-rule.txt"), check=False,
                    pending=False)
    assert bad["ok"] is False and bad["msg"] == (
        "node1: table inet rdmaprov is not the wanted one: live table inet rdmaprov lacks 1 rule"
        f" (chain input): {REJECT}")
    absent = fw.verify(plan, NAMES, {"rc": 1, "stdout": "", "stderr": "Error: No such file\n"},
                       check=False, pending=False)
    assert absent == {"applies": True, "ok": False, "pending": "", "msg": (
        "node1: nft list table inet rdmaprov failed (rc 1): Error: No such file")}
    # --check with the ruleset still to load: drift, not a verification; the role's assert
    # reports it as its message, naming what the live table lacks.
    drift = "node1: drift: live table inet rdmaprov is absent; a real run loads it"
    assert fw.verify(plan, NAMES, None, check=True, pending=True) == {
        "applies": False, "ok": True, "msg": drift, "pending": drift}
    assert fw.verify(plan, NAMES, _live("nft-bookworm-converged.txt"), check=True,
                     pending=False)["applies"] is True


def test_verify_firewalld_and_ufw():
    plan = _plan_with_allow()
    want = plan["firewalld_rules"]
    got = fw.verify({**plan, "backend": "firewalld"}, NAMES, _ok("\n".join(want) + "\n"),
                    check=False, pending=False)
    assert got["ok"] is True and got["msg"] == (
        f"node1: firewalld policy rdmaprov: {len(want)} rules in place")
    got = fw.verify({**plan, "backend": "firewalld"}, NAMES, _ok("\n".join(want[1:])),
                    check=False, pending=False)
    assert got["ok"] is False and got["msg"] == f"node1: firewalld policy rdmaprov lacks: {want[0]}"
    added = [r["added"] for r in plan["ufw_rules"]]
    ufw = {**plan, "backend": "ufw"}
    got = fw.verify(ufw, NAMES, _ok("Added user rules:\n" + "\n".join(added)), check=False,
                    pending=False)
    assert got["ok"] is True and got["msg"] == (
        f"node1: ufw: {len(added)} rdmaprov rules; ufw inactive (firewall_policy=scoped leaves "
        "it as it was)")
    assert fw.verify({**ufw, "policy": "deny"}, NAMES, _ok("\n".join(added)), check=False,
                     pending=False)["msg"].endswith("; ufw active")
    got = fw.verify(ufw, NAMES, _ok(""), check=False, pending=False)
    assert got["ok"] is False and got["msg"] == "node1: ufw lacks: " + "; ".join(added)
    # Under --check neither is read back, and the message says so.
    assert fw.verify(ufw, NAMES, None, check=True, pending=False) == {
        "applies": False, "ok": True, "pending": "",
        "msg": "node1: the ufw rules are read back by a real run"}


def test_probe_module_verify_mode_reads_only_the_backends_rules(tmp_path):
    # As Ansible runs it on a node: the verify mode reads the backend's rules back (here ufw,
    # which this machine lacks: the read fails and says so) and probes nothing else.
    import subprocess
    import sys

    (tmp_path / "ansible_collections" / "rdmaprov").mkdir(parents=True)
    (tmp_path / "ansible_collections" / "rdmaprov" / "cluster").symlink_to(ROOT)

    def run(args):
        argfile = tmp_path / "args.json"
        argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        proc = subprocess.run([sys.executable, str(ROOT / "plugins/modules/firewall_probe.py"),
                               str(argfile)], capture_output=True, text=True, check=False,
                              env={"PYTHONPATH": str(tmp_path), "PATH": "/nonexistent"})
        return json.loads(proc.stdout)

    plan = {**_plan_with_allow(), "backend": "ufw"}
    got = run({"verify": True, "plan": plan, "settings": SETTINGS, "firewalld_policy": "p"})
    assert set(got) >= {"verify"} and "plan" not in got and "proc_net" not in got
    assert got["verify"] == {"applies": True, "ok": False, "pending": "", "msg": (
        "node1: ufw show added failed (rc None): ufw: not installed")}
    checked = run({"verify": True, "plan": plan, "settings": SETTINGS, "_ansible_check_mode": True})
    assert checked["verify"]["applies"] is False
    assert run({"verify": True, "settings": SETTINGS})["failed"] is True
    # Settings without the inventory name the refusals start with: one line, no traceback.
    lacking = run({"settings": {k: v for k, v in SETTINGS.items() if k != "host"}})
    assert lacking["failed"] is True and lacking["msg"] == "firewall plan: settings has no 'host'"
    # The probe reads the files and unit the nftables backend keeps where the settings put them
    # (here nowhere yet) and plans what differs.
    got = run({"settings": {**SETTINGS, "nft_dir": str(tmp_path / "nft"), "backend": "nftables"}})
    assert got["plan"]["file_drift"][:2] == [f"{tmp_path}/nft/firewall.nft: absent",
                                             f"{tmp_path}/nft/firewall.nft.new: absent"], got
    assert got["plan"]["drift"] is True and got["file_state"][f"{tmp_path}/nft/firewall.nft"] == {
        "exists": False}
    lacking = run({"settings": {k: v for k, v in SETTINGS.items() if k != "nft_dir"}})
    assert lacking["failed"] is True
    assert lacking["msg"] == "firewall plan: settings has no 'nft_dir'"


# --- the nftables ruleset, its boot unit and what differs (nft_state) --------------------------
def _fw_files(plan):
    """file_state and unit_state of a host that has exactly what the plan wants."""
    state = {plan[k]: {"exists": True, "sha1": collection.state_drift.sha1(plan[c].encode()),
                       "mode": m, "owner": "root", "group": "root"}
             for k, c, m in (("nft_file", "nft_rules", "0600"),
                             ("nft_candidate", "nft_rules", "0600"),
                             ("unit_file", "nft_unit", "0644"))}
    return {"file_state": state, "unit_state": {"rdmaprov-firewall.service": "enabled"}}


def test_nft_ruleset_carries_its_own_hash_and_the_plans_rules():
    scoped = fw.plan({**PROBE, "control_ip": "10.199.246.1"}, SETTINGS)
    text, digest = scoped["nft_rules"], scoped["nft_hash"]
    # The hash is the text's own with the placeholder, so the live table names what it is.
    assert fw.live_hash(text) == digest
    assert collection.state_drift.sha1(text.replace(digest, "@@HASH@@").encode()) == digest
    assert text.startswith("# Ansible managed (firewall)\n") and text.endswith("\t}\n}\n")
    assert "policy accept;" in text and "ct state invalid drop" not in text
    assert "\tset cluster_ipv4 {\n\t\ttype ipv4_addr\n\t\tflags interval\n" \
           "\t\telements = { 10.198.246.8/29 }\n\t}\n" in text
    assert "set cluster_ipv6" not in text and "set ssh_ipv6" not in text
    assert "\t\tip saddr @ssh_ipv4 tcp dport 22 accept\n" in text
    assert "\t\tip saddr @cluster_ipv4 tcp dport { 22, 29500, 32768-60999 } accept\n" in text
    assert "\t\ttcp dport { 29500, 32768-60999 } reject with tcp reset\n" \
           "\t\tudp dport 4791 drop\n" in text
    deny = fw.plan(PROBE, {**SETTINGS, "policy": "deny", "nft_table": "t2",
                           "nft_extra_rules": ["ip saddr 192.0.2.1 drop"],
                           "cluster_subnets": ["fd00::/64"],
                           "allow": [{"port": 9100}, {"port": 80, "proto": "udp",
                                                      "sources": ["10.0.0.0/8", "fd01::/64"]}]})
    text = deny["nft_rules"]
    assert deny["nft_hash"] != digest and fw.live_hash(text) == deny["nft_hash"]
    assert "table inet t2\ndelete table inet t2\ntable inet t2 {\n" in text
    assert "policy drop;\n\t\tip saddr 192.0.2.1 drop\n\t\tct state established,related accept" \
           "\n\t\tct state invalid drop\n" in text
    assert "ip6 saddr @cluster_ipv6 udp dport 4791 accept" in text and "@cluster_ipv4" not in text
    assert "\t\ttcp dport 9100 accept\n" in text
    assert "\t\tip saddr { 10.0.0.0/8 } udp dport 80 accept\n" \
           "\t\tip6 saddr { fd01::/64 } udp dport 80 accept\n" in text


def test_nft_unit_names_the_table_and_file_as_one_word_each():
    unit = fw.nft_unit("rdmaprov", "/etc/rdmaprov/firewall.nft")
    assert "\nExecStart=/usr/sbin/nft -f /etc/rdmaprov/firewall.nft\n" in unit
    assert "\nConditionPathExists=/etc/rdmaprov/firewall.nft\n" in unit
    assert unit.endswith("' rdmaprov-firewall rdmaprov\n\n[Install]\nWantedBy=multi-user.target\n"
                         "WantedBy=nftables.service\n")
    assert '\nExecStart=/usr/sbin/nft -f "/etc/my dir/firewall.nft"\n' in fw.nft_unit(
        "t", "/etc/my dir/firewall.nft")


def test_nft_state_says_what_differs_and_what_to_refuse():
    deny = {**SETTINGS, "policy": "deny"}
    first = fw.plan(PROBE, deny)
    # Nothing on the host yet: a new ruleset, every file and the unit differ; the cut is refused.
    assert first["new_ruleset"] is True and first["drift"] is True
    assert first["file_drift"] == ["/etc/rdmaprov/firewall.nft: not probed",
                                   "/etc/rdmaprov/firewall.nft.new: not probed",
                                   "/etc/systemd/system/rdmaprov-firewall.service: not probed",
                                   "rdmaprov-firewall.service: not probed, wanted enabled"]
    assert first["errors"] == first["nft_cut_refusal"] != []
    assert first["nft_rollback_rules"] == "table inet rdmaprov\ndelete table inet rdmaprov\n\n"
    # The live table is the wanted one, the files and the unit too: nothing to do or refuse.
    live = {"rc": 0, "stdout": first["nft_rules"], "stderr": ""}
    same = fw.plan({**PROBE, "nft_table": live, **_fw_files(first)}, deny)
    assert same["new_ruleset"] is False and same["file_drift"] == []
    assert same["drift"] is False and same["errors"] == []
    assert same["nft_rollback_rules"] == ("table inet rdmaprov\ndelete table inet rdmaprov\n"
                                          + first["nft_rules"] + "\n")
    # Only the unit disabled: drift, but the live table stays (no new ruleset, no cut refusal).
    off = _fw_files(first)
    off["unit_state"] = {"rdmaprov-firewall.service": "disabled"}
    unit_off = fw.plan({**PROBE, "nft_table": live, **off}, deny)
    assert unit_off["file_drift"] == ["rdmaprov-firewall.service: disabled, wanted enabled"]
    assert unit_off["drift"] is True and unit_off["new_ruleset"] is False
    assert unit_off["errors"] == []
    # firewalld: drift where the policy lacks a rule (here: it does not exist).
    fwd = fw.plan({**PROBE, "firewalld_active": True, "nft_table": live, **_fw_files(first),
                   "firewalld_policy": {"permanent": _absent(), "runtime": _absent()}},
                  deny, "rdmaprov")
    assert fwd["drift"] is True and fwd["errors"] == [] and fwd["firewalld_changes"]
    assert fw.paths({"nft_dir": "/x", "nft_unit_name": "u.service"}) == {
        "nft_file": "/x/firewall.nft", "nft_candidate": "/x/firewall.nft.new",
        "nft_rollback": "/x/firewall.rollback.nft", "unit_file": "/etc/systemd/system/u.service"}


def test_the_files_header_is_the_plays_managed_string():
    """The ruleset and unit carry the managed-file header the play gives (the role_settings
    action fills it from ansible_managed or ansible.cfg), as the role's templates did."""
    own = fw.plan(PROBE, {**SETTINGS, "managed": "Managed by ops"})
    assert own["nft_rules"].startswith("# Managed by ops (firewall)\n")
    assert "Managed by ops" in own["nft_unit"]
    assert fw.plan(PROBE, SETTINGS)["nft_rules"].startswith("# Ansible managed (firewall)\n")


def _absent():
    return {"rc": 1, "stdout": "", "stderr": "Error: INVALID_POLICY: rdmaprov"}


def test_firewalld_and_ufw_drift_only_where_a_rule_is_missing():
    """A converged firewalld or ufw host needs no task beyond the probe, as nftables: the
    firewalld policy's rules and ufw's added rules are read by the probe."""
    plan = _plan_with_allow()
    rules = "\n".join(plan["firewalld_rules"])
    fwd_probe = {**PROBE, "control_ip": "10.199.246.1", "firewalld_active": True,
                 "firewalld_policy": {"permanent": _ok(rules), "runtime": _ok(rules)}}
    settings = {**SETTINGS, "allow": [{"port": 9100}, {"port": "5000-5001", "proto": "udp",
                                                       "sources": ["fd00::/64"]}]}
    same = fw.plan(fwd_probe, settings, "rdmaprov")
    assert same["firewalld_changes"] == [] and same["drift"] is False
    lacking = fw.plan({**fwd_probe, "firewalld_policy": {
        "permanent": _ok(rules), "runtime": _ok("\n".join(plan["firewalld_rules"][1:]))}},
        settings, "rdmaprov")
    assert lacking["drift"] is True and lacking["commands"] == lacking["firewalld_changes"]
    # ufw: `ufw show added` (ufw 0.36's header first) holds every rule: nothing to do; one
    # missing: that one rule is added.
    added = [r["added"] for r in plan["ufw_rules"]]
    ufw_probe = {**PROBE, "control_ip": "10.199.246.1", "ufw_present": True,
                 "ufw_added": _ok("Added user rules (see 'ufw status' for running firewall):\n"
                                  + "\n".join(added) + "\n")}
    ufw = {**settings, "backend": "ufw"}
    done = fw.plan(ufw_probe, ufw)
    assert done["ufw_missing"] == [] and done["drift"] is False and done["commands"] == []
    one = fw.plan({**ufw_probe, "ufw_added": _ok("\n".join(added[1:]))}, ufw)
    assert one["drift"] is True and one["commands"] == [["ufw", *plan["ufw_rules"][0]["args"]]]
    # ufw not readable (or absent): every rule goes through `ufw allow` (which skips what it has).
    unread = fw.plan({**ufw_probe, "ufw_added": None}, ufw)
    assert unread["ufw_missing"] == plan["ufw_rules"] and unread["drift"] is True
    # Switching ufw on (deny) is drift even with every rule in place.
    deny = fw.plan(ufw_probe, {**ufw, "policy": "deny", "waive": ["68/udp", "5353/udp"]})
    assert deny["drift"] is True and deny["commands"] == [["ufw", "--force", "enable"]]
    # No usable backend: drift, so the refusal is reported.
    none = fw.plan({**PROBE, "nft_present": False}, SETTINGS)
    assert none["backend"] is None and none["drift"] is True
    assert none["refusal"] == "; ".join(none["errors"]) != ""


def test_apply_steps_under_check_report_instead_of_running():
    plan = _plan_with_allow()
    added = [r["added"] for r in plan["ufw_rules"]]
    ufw_probe = {**PROBE, "control_ip": "10.199.246.1", "ufw_present": True,
                 "ufw_added": _ok("\n".join(added[1:]))}
    ufw = {**SETTINGS, "backend": "ufw", "policy": "deny", "waive": ["68/udp", "5353/udp"],
           "allow": [{"port": 9100}, {"port": "5000-5001", "proto": "udp",
                                      "sources": ["fd00::/64"]}]}
    real = fw.plan(ufw_probe, ufw)
    assert real["check_mode"] is False and real["check_report"] == []
    assert real["commands"] == [["ufw", *plan["ufw_rules"][0]["args"]],
                                ["ufw", "--force", "enable"]]
    # --check: ufw answers a dry run the same (so it runs); switching on is reported.
    check = fw.plan(ufw_probe, {**ufw, "check_mode": True})
    assert check["commands"] == [["ufw", "--dry-run", *plan["ufw_rules"][0]["args"]]]
    assert check["check_report"] == [
        "node1: drift: ufw is inactive; firewall_policy=deny switches it on"]
    # firewalld: the calls under a real run, the drift line under --check.
    fwd_probe = {**PROBE, "firewalld_active": True,
                 "firewalld_policy": {"permanent": _absent(), "runtime": _absent()}}
    fwd = fw.plan(fwd_probe, SETTINGS, "rdmaprov")
    assert fwd["commands"] == fwd["firewalld_changes"] != [] and fwd["check_report"] == []
    fwd_check = fw.plan(fwd_probe, {**SETTINGS, "check_mode": True}, "rdmaprov")
    assert fwd_check["commands"] == [] and fwd_check["check_report"] == [fwd["firewalld_drift"]]
    # nftables: a new ruleset goes behind the rollback timer; under --check nothing is persisted
    # while the ruleset is still to load.
    nft = fw.plan(PROBE, {**SETTINGS, "rollback_seconds": 30})
    assert nft["nft_apply"] is True and nft["persist_nft"] is True and nft["commands"] == []
    assert nft["nft_arm"] == [
        "systemd-run", "--unit=rdmaprov-firewall-rollback", "--on-active=30s",
        "--timer-property=AccuracySec=1s",
        "--description=rdmaprov firewall rollback (fires unless Ansible reconnects)",
        "--property=SyslogIdentifier=rdmaprov-firewall", "nft", "-f",
        "/etc/rdmaprov/firewall.rollback.nft"]
    assert nft["nft_load"] == ["/bin/sh", "-c", 'sleep 2; exec nft -f "$1"', "rdmaprov-firewall",
                               "/etc/rdmaprov/firewall.nft.new"]
    assert nft["nft_clear_timer"] == ["systemctl", "stop", "rdmaprov-firewall-rollback.timer",
                                      "rdmaprov-firewall-rollback.service"]
    assert nft["nft_disarm"] == ["systemctl", "stop", "rdmaprov-firewall-rollback.timer"]
    assert nft["rollback_wait"] == 90
    assert fw.plan(PROBE, {**SETTINGS, "check_mode": True})["persist_nft"] is False
    live = {"rc": 0, "stdout": nft["nft_rules"], "stderr": ""}
    same = fw.plan({**PROBE, "nft_table": live}, {**SETTINGS, "check_mode": True})
    assert same["nft_apply"] is False and same["persist_nft"] is True
    # Another backend never loads a table, whatever the live one.
    assert fwd["nft_apply"] is False


def test_command_changed_and_the_rollback_report():
    assert fw.command_changed(["ufw", "allow", "22"], "Skipping adding existing rule\n") is False
    assert fw.command_changed(["ufw", "allow", "22"], "Rule added\nRule added (v6)\n") is True
    assert fw.command_changed(["firewall-cmd", "--reload"], "success") is True
    plan = fw.plan(PROBE, SETTINGS)
    assert fw.rollback_report(plan, "node2", "Reconnect through the new ruleset",
                              "timed out waiting for ping module test", 0) == (
        "node2: firewall ROLLED BACK. The new ruleset was not confirmed (Reconnect through the "
        "new ruleset: timed out waiting for ping module test); the rollback timer restored the "
        "previous table inet rdmaprov (restored) and nothing was persisted. Candidate kept in "
        "/etc/rdmaprov/firewall.nft.new for inspection.")
    assert "inet rdmaprov (absent, as before) and" in fw.rollback_report(plan, "n", "t", "m", 1)


# --- the live table against the wanted one (issue 37: a verdict from the live ruleset) ---------
def test_nft_listing_reads_the_lab_nodes_table():
    got = fw.nft_listing(_listing("nft-bookworm-converged.txt"), "rdmaprov")
    assert got["comment"] == '"rdmaprov sha1=3373fec33d0b51ebff4ec81e8d3212d9bf8fffc9"'
    assert got["sets"]["set cluster_ipv4"] == {
        "spec": ["type ipv4_addr", "flags interval"],
        "elements": ["10.198.249.0/24", "10.199.249.0/24"]}
    assert got["sets"]["set ssh_ipv4"]["elements"] == ["10.199.249.1"]
    chain = got["chains"]["input"]
    assert chain["spec"] == ["type filter hook input priority filter - 10; policy accept;"]
    assert len(chain["rules"]) == 8 and chain["rules"][-2:] == [REJECT, "udp dport 4791 drop"]
    # The rendered file: its comments, and the declare-delete before the definition, are not
    # part of the table; its /32 is what nft prints without.
    rendered = fw.nft_listing(_listing("nft-bookworm-rendered.nft"), "rdmaprov")
    assert rendered == got
    # nft wraps a long element list over lines.
    many = fw.nft_listing(_listing("nft-bookworm-many-elements.txt"), "rdmaprov")
    assert many["sets"]["set cluster_ipv4"]["elements"] == [
        f"10.{i}.0.0/16" for i in range(1, 30, 2)]
    assert fw.nft_listing("", "rdmaprov") is None
    assert fw.nft_listing(_listing("nft-bookworm-converged.txt"), "other") is None


def test_nft_differences_name_what_the_live_table_lacks():
    ref = _listing("nft-bookworm-reference.txt")
    assert fw.nft_differences(_listing("nft-bookworm-converged.txt"), ref, "rdmaprov") == []
    where = "live table inet rdmaprov"
    # `nft flush table`: the table and its sha1 comment stay, every rule is gone.
    assert fw.nft_differences(_listing("nft-bookworm-flushed.txt"), ref, "rdmaprov") == [
        f"{where}: set cluster_ipv4 lacks 1 element: 10.199.249.0/24",
        f"{where} lacks 8 rules (chain input): ct state established,related accept; "
        'iif "lo" accept; meta l4proto { icmp, ipv6-icmp } accept; '
        "ip saddr @ssh_ipv4 tcp dport 22 accept (+4 more)"]
    assert fw.nft_differences(_listing("nft-bookworm-deleted-rule.txt"), ref, "rdmaprov") == [
        f"{where} lacks 1 rule (chain input): {REJECT}"]
    assert fw.nft_differences(_listing("nft-bookworm-deleted-rule-and-element.txt"), ref,
                              "rdmaprov") == [
        f"{where}: set cluster_ipv4 lacks 1 element: 10.199.249.0/24",
        f"{where} lacks 1 rule (chain input): {REJECT}"]
    assert fw.nft_differences(None, ref, "rdmaprov") == [f"{where} is absent"]
    converged = _listing("nft-bookworm-converged.txt")
    # A rule someone added, the policy changed, the rules reordered, an element added, another
    # comment (an older ruleset): each is named.
    added = converged.replace("\t\tudp dport 4791 drop\n",
                              "\t\tudp dport 4791 drop\n\t\ttcp dport 9100 accept\n")
    assert fw.nft_differences(added, ref, "rdmaprov") == [
        f"{where} has 1 rule (chain input) the wanted ruleset does not: tcp dport 9100 accept"]
    dropped = converged.replace("policy accept;", "policy drop;")
    assert fw.nft_differences(dropped, ref, "rdmaprov") == [
        f"{where}: chain input is 'type filter hook input priority filter - 10; policy drop;', "
        "wanted 'type filter hook input priority filter - 10; policy accept;'"]
    swapped = converged.replace(f"\t\t{REJECT}\n\t\tudp dport 4791 drop\n",
                                f"\t\tudp dport 4791 drop\n\t\t{REJECT}\n")
    assert fw.nft_differences(swapped, ref, "rdmaprov") == [
        f"{where}: chain input holds the wanted rules in another order"]
    more = converged.replace("10.199.249.0/24 }", "10.199.249.0/24, 192.0.2.0/24 }")
    assert fw.nft_differences(more, ref, "rdmaprov") == [
        f"{where}: set cluster_ipv4 has 1 element it should not: 192.0.2.0/24"]
    older = converged.replace("3373fec3", "00000000")
    assert fw.nft_differences(older, ref, "rdmaprov")[0].startswith(
        f'{where} has comment "rdmaprov sha1=00000000')
    # Counters count: their values are not the table's.
    rule = "udp dport 4791 drop"
    counted = converged.replace(rule, "udp dport 4791 counter packets 7 bytes 9 drop")
    ref_counted = ref.replace(rule, "udp dport 4791 counter packets 0 bytes 0 drop")
    assert fw.nft_differences(counted, ref_counted, "rdmaprov") == []
    with pytest.raises(ValueError, match="defines no table inet other"):
        fw.nft_differences(converged, ref, "other")


def test_plan_reads_the_live_table_not_its_sha1_comment():
    """The bug of issue 37: a flushed table keeps the comment with the wanted sha1; the plan must
    still see a new ruleset (so a real run reloads it and --check names what is missing)."""
    wanted = fw.plan(LAB_PROBE, LAB)
    assert wanted["nft_rules"] == _listing("nft-bookworm-rendered.nft")
    ref = {"rc": 0, "stdout": _listing("nft-bookworm-reference.txt"), "stderr": "",
           "sha1": wanted["nft_hash"]}
    files = _fw_files(wanted)
    for name, lacks in (("nft-bookworm-flushed.txt", "lacks 8 rules"),
                        ("nft-bookworm-deleted-rule.txt", "lacks 1 rule"),
                        ("nft-bookworm-deleted-rule-and-element.txt", "lacks 1 element")):
        probe = {**LAB_PROBE, "nft_table": _live(name), "nft_reference": ref, **files}
        got = fw.plan(probe, LAB)
        assert got["live_hash"] == got["nft_hash"], "the fixture's comment is the wanted sha1"
        assert got["new_ruleset"] is True and got["drift"] is True, name
        assert got["nft_apply"] is True and got["nft_wanted_from"] == "nft"
        assert any(lacks in line for line in got["nft_differences"]), got["nft_differences"]
        said = fw.verify(got, {**NAMES, "nft_table": "rdmaprov"}, None, check=True,
                         pending=got["new_ruleset"])["msg"]
        assert said.startswith("node1: drift: live table inet rdmaprov") and lacks in said
    same = fw.plan({**LAB_PROBE, "nft_table": _live("nft-bookworm-converged.txt"),
                    "nft_reference": ref, **files}, LAB)
    assert same["new_ruleset"] is False and same["drift"] is False
    assert same["nft_differences"] == []
    # Without the host's own print of the ruleset (no unshare, or one made from another ruleset:
    # its sha1 says so), the rendered text is read; the lab's is in nft's own spelling.
    for other in ({"rc": 1, "stdout": "", "stderr": "unshare: Operation not permitted",
                   "sha1": wanted["nft_hash"]}, {**ref, "sha1": "0" * 40}):
        fallback = fw.plan({**LAB_PROBE, "nft_table": _live("nft-bookworm-converged.txt"),
                            "nft_reference": other, **files}, LAB)
        assert fallback["nft_wanted_from"] == "the rendered text"
        assert fallback["new_ruleset"] is False, fallback["nft_differences"]
        flushed = fw.plan({**LAB_PROBE, "nft_table": _live("nft-bookworm-flushed.txt"),
                           "nft_reference": other, **files}, LAB)
        assert flushed["new_ruleset"] is True
