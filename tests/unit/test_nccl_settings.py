"""NCCL's applied settings (from its own log) next to nccl_env's intended ones."""

from __future__ import annotations

from pathlib import Path

from rdmaprov import collection
from rdmaprov.parsers.nccl_log import applied_settings
from rdmaprov.validate import nccl_settings as ns

LOGS = Path(__file__).resolve().parents[1] / "fixtures/nccl"
IB_OFF = LOGS / "h200-nccl2.28.9-1rank-ib-disabled.log"


def test_applied_settings_from_a_real_log() -> None:
    applied = applied_settings(IB_OFF.read_text().splitlines())
    assert applied["NCCL_IB_DISABLE"] == "1"


def test_lines_with_and_without_by_environment() -> None:
    lines = ["n1:10:10 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
             "n1:10:10 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to =eth1",
             "n1:10:10 [0] NCCL INFO NCCL_IB_HCA set to =mlx5_0,mlx5_1",
             "n1:10:10 [0] NCCL INFO Using network IB"]
    assert applied_settings(lines) == {"NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "=eth1",
                                       "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}


def test_a_host_conf_compared_with_the_log(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("# Ansible managed\nNCCL_IB_DISABLE=0\nNCCL_IB_HCA==mlx5_0\n")
    intended = collection.cdi_spec.settings_of(conf.read_text())
    checks = ns.compare(intended, applied_settings(IB_OFF.read_text().splitlines()))
    by = {c.name: c for c in checks}
    assert by["NCCL_IB_DISABLE"].state == ns.MISMATCH
    assert by["NCCL_IB_HCA"].state == ns.NOT_LOGGED
    assert ns.mismatches(checks) == ["NCCL_IB_DISABLE: NCCL applied '1', nccl_env intended '0'"]


def test_as_intended_and_from_elsewhere() -> None:
    checks = ns.compare({"NCCL_IB_TC": "106", "NCCL_DEBUG": "WARN"},
                        {"NCCL_IB_TC": "106", "NCCL_SOCKET_NTHREADS": "4", "NCCL_DEBUG": "INFO",
                         "NCCL_DEBUG_SUBSYS": "ENV"})
    # NCCL_DEBUG*: the validation's own log settings, not the job's (ns.LAUNCH_OWN)
    assert [(c.name, c.state) for c in checks] == [("NCCL_IB_TC", ns.AS_INTENDED),
                                                   ("NCCL_SOCKET_NTHREADS", ns.NOT_INTENDED)]
    assert ns.mismatches(checks) == []
    assert checks[0].line() == "NCCL_IB_TC=106 (as intended)"
