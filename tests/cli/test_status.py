"""`rdmaprov status` cells: the kernel-module answer and what the QoS unit really did per NIC
(an active oneshot unit on NICs that are not capable must not read as QoS in force)."""

from __future__ import annotations

import os
from pathlib import Path

from rdmaprov.cli.status import STATE_KEYS, cells, modules_cell, qos_cell
from rdmaprov.collection import node_state as probe

# `journalctl -b -u rdmaprov-roce-qos.service -o cat`: systemd's own lines and two boots' runs of
# the unit's script (its log lines are those of roles/roce_qos/templates/rdmaprov-roce-qos.sh.j2).
JOURNAL = """\
Starting rdmaprov-roce-qos.service - rdmaprov: lossless RoCEv2 QoS...
rdmaprov-roce-qos: eth1: DCB settings applied
Finished rdmaprov-roce-qos.service - rdmaprov: lossless RoCEv2 QoS.
Starting rdmaprov-roce-qos.service - rdmaprov: lossless RoCEv2 QoS...
rdmaprov-roce-qos: eth1: not capable: dcb pfc show: Operation not supported
rdmaprov-roce-qos: skipped (absent): /sys/class/net/eth1/ecn/roce_np/enable/3
rdmaprov-roce-qos: eth2: no such interface
Finished rdmaprov-roce-qos.service - rdmaprov: lossless RoCEv2 QoS.
"""


def test_qos_results_are_the_last_runs() -> None:
    assert probe.qos_results(JOURNAL) == {
        "eth1": "not capable: dcb pfc show: Operation not supported",
        "eth2": "no such interface"}


def test_active_unit_on_a_nic_that_is_not_capable_says_so() -> None:
    nics = probe.qos_results(JOURNAL)
    assert qos_cell({"unit": "active", "script": True, "nics": nics}) == (
        "eth1 not capable, eth2: no such interface")
    assert qos_cell({"unit": "active", "script": True,
                     "nics": {"eth1": "DCB settings applied"}}) == "eth1 applied"
    assert qos_cell({"unit": "active", "script": True, "nics": None}) == (
        "unit active, no journal")
    assert qos_cell({"unit": None, "script": False, "nics": None}) == "not configured"


def test_modules_cell_is_the_kernel_modules_answer() -> None:
    lab = {"can_load": False, "reason": "no /proc/modules: this kernel has no loadable-module "
           "support", "modules": [{"name": "ib_core", "state": "absent"},
                                  {"name": "ib_uverbs", "state": "absent"}]}
    assert modules_cell(lab) == "2 absent, cannot load"
    h200 = {"can_load": False, "reason": "no /lib/modules/6.18.44-fc-v973-gpu: ...",
            "modules": [{"name": "ib_uverbs", "state": "builtin"},
                        {"name": "nvidia_peermem", "state": "absent"}]}
    assert modules_cell(h200) == "built in: ib_uverbs; absent: nvidia_peermem, cannot load"
    row = cells({"modules": {"can_load": True, "reason": "modules can be loaded",
                             "modules": [{"name": "mlx5_ib", "state": "loaded"}]},
                 "qos": {"unit": None, "script": False}, "mtu": {"eth0": 1500}})
    assert row["modules"] == "1 loaded" and row["qos"] == "not configured"


# What each command answers on the real H200 host (Ubuntu 24.04, no HCA, no firewall tool, no
# container engine, no OFED): dpkg knows rdma-core; the QoS unit was never installed.
H200_ANSWERS = {
    ("dpkg-query", "-W", "-f=${Version}\\t${db:Status-Abbrev}", "rdma-core"):
        (0, "50.0-2ubuntu0.2\tii "),
    ("systemctl", "show", "-p", "LoadState,ActiveState", probe.QOS_UNIT):
        (0, "LoadState=not-found\nActiveState=inactive\n"),
}


def _answers(table: dict):
    calls = []

    def run(argv: list):
        calls.append(tuple(argv))
        return table.get(tuple(argv), probe.MISSING)
    return run, calls


def test_the_captured_h200_root_reads_as_that_host(h200_root: Path) -> None:
    run, calls = _answers(H200_ANSWERS)
    doc = probe.collect(run, ["ib_core", "ib_uverbs", "nvidia_peermem"], str(h200_root),
                        "6.18.44-fc-v973-gpu")
    assert set(doc) == set(STATE_KEYS)
    assert doc["drivers"] == "rdma-core 50.0"
    assert doc["gpus"] == 1 and doc["rdma_devices"] == []
    assert doc["mtu"] == {"eth0": 1400, "ifb0": 1500, "ifb1": 1500}
    assert doc["qos"] == {"unit": None, "script": False, "nics": None}
    assert doc["firewall"] is None and doc["runtime"] is None and doc["validation"] is None
    states = {m["name"]: m["state"] for m in doc["modules"]["modules"]}
    assert states == {"ib_core": "builtin", "ib_uverbs": "builtin", "nvidia_peermem": "absent"}
    assert doc["modules"]["can_load"] is False
    # status only reads: no command that could change the node was asked for.
    assert all(c[0] in ("ofed_info", "dpkg-query", "rpm", "systemctl", "journalctl",
                        "firewall-cmd", "ufw", "nft", "docker", "podman") for c in calls)
    row = cells(doc)
    assert row["drivers"] == "rdma-core 50.0" and row["gpus"] == "1"
    assert row["qos"] == "not configured" and row["firewall"] == "no nft"
    assert doc["nccl_conf"] is None  # not asked for


def test_the_nodes_own_answers_fill_qos_firewall_runtime_and_validation(tmp_path: Path) -> None:
    journal = JOURNAL
    # `nft list table inet rdmaprov` of the firewall role's deny table (roles/firewall/
    # templates/rdmaprov.nft.j2) as nft prints it back: no comments, sets with their elements.
    nft = """table inet rdmaprov {
\tset cluster_ipv4 {
\t\ttype ipv4_addr
\t\tflags interval
\t\telements = { 10.0.0.0/24 }
\t}

\tchain input {
\t\ttype filter hook input priority filter - 10; policy drop;
\t\tct state established,related accept
\t\tct state invalid drop
\t\tiif "lo" accept
\t\tmeta l4proto { icmp, ipv6-icmp } accept
\t\tip saddr @cluster_ipv4 tcp dport { 22, 6817, 6818 } accept
\t\tip saddr @cluster_ipv4 udp dport 4791 accept
\t\ttcp dport { 6817, 6818 } reject with tcp reset
\t\tudp dport 4791 drop
\t}
}
"""
    run, _calls = _answers({
        ("ofed_info", "-s"): (0, "MLNX_OFED_LINUX-24.10-1.1.4.0:\n"),
        ("systemctl", "show", "-p", "LoadState,ActiveState", probe.QOS_UNIT):
            (0, "LoadState=loaded\nActiveState=active\n"),
        ("journalctl", "-b", "-u", probe.QOS_UNIT, "-o", "cat", "--no-pager", "-n", "500"):
            (0, journal),
        ("nft", "list", "table", "inet", "rdmaprov"): (0, nft),
        ("docker", "--version"): (0, "Docker version 26.1.5+dfsg1, build a72d7cd\n"),
    })
    older = tmp_path / "var/tmp/rdmaprov-validate/run-1/rc"
    newer = tmp_path / "var/tmp/rdmaprov-validate/run-2/rc"
    for path, rc, when in ((older, "0", 1_000), (newer, "3", 2_000)):
        path.parent.mkdir(parents=True)
        path.write_text(rc + "\n")
        os.utime(path, (when, when))
    doc = probe.collect(run, [], str(tmp_path))
    assert doc["drivers"] == "MLNX_OFED_LINUX-24.10-1.1.4.0"
    assert doc["qos"]["unit"] == "active"
    assert doc["qos"]["nics"] == {"eth1": "not capable: dcb pfc show: Operation not supported",
                                  "eth2": "no such interface"}
    assert doc["firewall"] == "rdmaprov table, 8 rules, policy drop"
    assert doc["runtime"] == "docker 26.1.5"
    assert doc["validation"] == {"label": "run-2", "rc": "3", "mtime": 2000}
    assert doc["mtu"] == {} and doc["gpus"] == 0


def test_a_missing_command_is_no_answer_and_a_present_one_answers_in_full() -> None:
    assert probe.run(["rdmaprov-no-such-command"]) == probe.MISSING
    assert probe.run(["sh", "-c", "echo C; exit 3"]) == (3, "C\n")
