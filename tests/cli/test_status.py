"""`rdmaprov status` cells: the kernel-module answer and what the QoS unit really did per NIC
(an active oneshot unit on NICs that are not capable must not read as QoS in force)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rdmaprov.cli.status import cells, modules_cell, qos_cell

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "_status_probe", ROOT / "playbooks/files/rdmaprov_status_probe.py")
assert _spec is not None and _spec.loader is not None
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)

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
    text = qos_cell({"unit": "active", "script": True, "nics": probe.qos_results(JOURNAL)})
    assert text == ("unit active: eth1 not capable: dcb pfc show: Operation not supported; "
                    "eth2: no such interface")
    assert qos_cell({"unit": "active", "script": True,
                     "nics": {"eth1": "DCB settings applied"}}) == "unit active: eth1 applied"
    assert qos_cell({"unit": "active", "script": True, "nics": None}) == (
        "unit active (no journal: per-NIC result unknown)")
    assert qos_cell({"unit": None, "script": False, "nics": None}) == "not configured"


def test_modules_cell_is_the_kernel_modules_answer() -> None:
    lab = {"can_load": False, "reason": "no /proc/modules: this kernel has no loadable-module "
           "support", "modules": [{"name": "ib_core", "state": "absent"},
                                  {"name": "ib_uverbs", "state": "absent"}]}
    assert modules_cell(lab) == ("absent: ib_core, ib_uverbs (cannot load: no /proc/modules: "
                                 "this kernel has no loadable-module support)")
    h200 = {"can_load": False, "reason": "no /lib/modules/6.18.44-fc-v973-gpu: ...",
            "modules": [{"name": "ib_uverbs", "state": "builtin"},
                        {"name": "nvidia_peermem", "state": "absent"}]}
    assert modules_cell(h200).startswith("built in: ib_uverbs; absent: nvidia_peermem")
    row = cells({"modules": {"can_load": True, "reason": "modules can be loaded",
                             "modules": [{"name": "mlx5_ib", "state": "loaded"}]},
                 "qos": {"unit": None, "script": False}, "mtu": {"eth0": 1500}})
    assert row["modules"] == "loaded: mlx5_ib" and row["qos"] == "not configured"
