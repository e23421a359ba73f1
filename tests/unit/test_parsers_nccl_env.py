"""NCCL variable lint: deprecated and removed names from NCCL's own docs and source history."""

from __future__ import annotations

from rdmaprov.parsers import nccl_env
from rdmaprov.parsers.nccl_log import parse_nccl_log


def _msgs(env: dict[str, str], version: str | None) -> list[tuple[str, str, str | None]]:
    return [(f.severity, f.message, f.hint) for f in nccl_env.lint(env, version)]


def test_deprecated_names_carry_their_replacement() -> None:
    out = _msgs({"NCCL_IB_GDR_LEVEL": "3", "NCCL_MIN_NRINGS": "4", "NCCL_MAX_NRINGS": "8"},
                "2.18.5")
    by_name = {m.split("=")[0]: (sev, m, hint) for sev, m, hint in out}
    assert by_name["NCCL_IB_GDR_LEVEL"][0] == "warning"
    assert "deprecated" in by_name["NCCL_IB_GDR_LEVEL"][1]
    assert "NCCL_NET_GDR_LEVEL" in (by_name["NCCL_IB_GDR_LEVEL"][2] or "")
    assert "NCCL_MIN_CTAS" in (by_name["NCCL_MIN_NRINGS"][2] or "")
    assert "NCCL_MAX_CTAS" in (by_name["NCCL_MAX_NRINGS"][2] or "")


def test_removed_name_depends_on_the_version_in_the_log() -> None:
    # NCCL_WORK_FIFO_DEPTH: read by v2.21.5-1, not by v2.22.3-1.
    old = _msgs({"NCCL_WORK_FIFO_DEPTH": "65536"}, "2.21.5")
    new = _msgs({"NCCL_WORK_FIFO_DEPTH": "65536"}, "2.22.3")
    unknown = _msgs({"NCCL_WORK_FIFO_DEPTH": "65536"}, None)
    assert old[0][0] == "info" and "still read by NCCL 2.21.5" in old[0][1]
    assert new[0][0] == "warning" and "removed in NCCL 2.22.3 (NCCL 2.22.3 ignores it)" in new[0][1]
    assert "NCCL_WORK_FIFO_BYTES" in (new[0][2] or "")
    assert unknown[0][0] == "warning" and "check your NCCL version" in unknown[0][1]


def test_typo_is_named_and_known_or_foreign_names_are_quiet() -> None:
    out = _msgs({"NCCL_SOCKET_IFNAMES": "eth0", "NCCL_IB_HCA": "mlx5_0",
                 "NCCL_VERSION": "2.21.5", "NCCL_UCX_TLS": "rc_x", "NCCL_IB_TC": "106"},
                "2.21.5")
    assert out == [("warning", "NCCL_SOCKET_IFNAMES is not a variable NCCL reads; did you mean "
                    "NCCL_SOCKET_IFNAME?",
                    "NCCL ignores unknown names silently: rename it to NCCL_SOCKET_IFNAME.")]


def test_version_compare() -> None:
    assert nccl_env.vtuple("2.22.3") > nccl_env.vtuple("2.22") > nccl_env.vtuple("2.5")
    assert nccl_env.vtuple("2.28.9+cuda13.0") == (2, 28)  # the suffix stops the parse
    assert nccl_env.vtuple(None) == ()


def test_log_lints_env_lines_and_pasted_command_lines() -> None:
    r = parse_nccl_log([
        "n1:1:1 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n",
        "n1:1:1 [0] NCCL INFO NCCL_WORK_FIFO_DEPTH set by environment to 4194304.\n",
        "mpirun -x NCCL_IB_GDR_LEVEL=PHB -x NCCL_DEBUG=INFO ./a.out\n",
    ])
    assert r.env == {"NCCL_WORK_FIFO_DEPTH": "4194304"}
    assert r.env_pasted == {"NCCL_IB_GDR_LEVEL": "PHB", "NCCL_DEBUG": "INFO"}
    msgs = [f.message for f in r.findings]
    assert "NCCL_WORK_FIFO_DEPTH=4194304: removed in NCCL 2.22.3 (NCCL 2.23.4 ignores it)" in msgs
    assert any(m.startswith("NCCL_IB_GDR_LEVEL=PHB is deprecated") for m in msgs)


def test_known_list_holds_current_and_old_names() -> None:
    for name in ("NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX", "NCCL_NET_PLUGIN", "NCCL_CROSS_NIC",
                 "NCCL_MNNVL_ENABLE", "NCCL_WORK_FIFO_BYTES", "NCCL_IB_GDR_LEVEL"):
        assert name in nccl_env.KNOWN, name
    assert not any(n.startswith(("NCCL_LOG_", "NCCL_NCCL_")) for n in nccl_env.KNOWN)
    assert set(nccl_env.DEPRECATED) <= nccl_env.KNOWN | {"NCCL_CHECKS_DISABLE"}
