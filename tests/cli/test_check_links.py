"""Link health over time through the real CLI: `rdmaprov check --sysroot ROOT` run several times
against a root whose counters and port states change between runs, with the state file
(issue 24: deltas not totals, a flap sticky for a window that clears by itself, a counter reset
is no error)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_check_fakes", Path(__file__).resolve().parents[1] / "unit" / "test_check_logic.py")
assert _spec is not None and _spec.loader is not None
_fakes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fakes)
fake_node = _fakes.fake_node

# The PMA counters an mlx5 IB port shows under ports/1/counters (drivers/infiniband/core/
# sysfs.c names), with the values of a port that has run for months: old errors, no new ones.
AGED = {"symbol_error": 17, "link_error_recovery": 1, "link_downed": 2, "port_rcv_errors": 4,
        "port_rcv_remote_physical_errors": 0, "port_rcv_switch_relay_errors": 0,
        "port_xmit_discards": 12, "port_xmit_constraint_errors": 0,
        "port_rcv_constraint_errors": 0, "local_link_integrity_errors": 0,
        "excessive_buffer_overrun_errors": 0, "VL15_dropped": 0, "port_xmit_wait": 812734,
        "port_xmit_data": 4120368231, "port_rcv_data": 3985103216}


def set_port(root: Path, dev: str, state: str | None = None, **counters: int) -> None:
    pdir = root / "sys/class/infiniband" / dev / "ports/1"
    (pdir / "counters").mkdir(exist_ok=True)
    for name, value in counters.items():
        (pdir / "counters" / name).write_text(f"{value}\n")
    if state is not None:
        (pdir / "state").write_text(state + "\n")
        (pdir / "phys_state").write_text("5: LinkUp\n" if "ACTIVE" in state else "2: Polling\n")


def check(root: Path, cfg: Path) -> tuple[int, dict]:
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--config", str(cfg), "--json"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.stderr == "", p.stderr
    doc = json.loads(p.stdout)
    return p.returncode, {c["name"]: c for c in doc["checks"]} | {"_reason": doc["reason"]}


def test_flap_deltas_reset_and_recovery_over_several_runs(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "node")
    cfg = tmp_path / "check.yml"
    cfg.write_text("memlock: '1'\nports: 2\nlink_stable_s: 2\n")
    for dev in ("mlx5_0", "mlx5_1"):
        set_port(root, dev, **AGED)
    state_file = root / "var/lib/rdmaprov/check-links.json"

    rc, c = check(root, cfg)  # first sample: old totals never fail
    assert rc == 0 and c["links"]["status"] == "n/a", c
    assert "first sample" in c["links"]["detail"] and state_file.is_file()
    rc, c = check(root, cfg)
    assert rc == 0 and c["links"]["status"] == "pass", c

    set_port(root, "mlx5_1", link_downed=3)  # one flap between two checks
    rc, c = check(root, cfg)
    assert rc == 2 and c["links"]["status"] == "fail"
    assert c["links"]["detail"].startswith("mlx5_1/1 link_downed +1 (unhealthy until stable")
    assert c["links"]["remedy"] == "reset-link"
    assert c["_reason"].startswith("[reset-link] mlx5_1/1 link_downed +1"), c["_reason"]
    rc, c = check(root, cfg)  # nothing new, but inside the sticky window
    assert rc == 2 and c["links"]["status"] == "fail"
    time.sleep(2.2)  # link_stable_s: 2
    rc, c = check(root, cfg)  # stable for the whole window: clears by itself
    assert rc == 0 and c["links"]["status"] == "pass", c

    # A reboot or driver reload: every counter back near zero. Not an error.
    for dev in ("mlx5_0", "mlx5_1"):
        set_port(root, dev, **{k: 0 for k in AGED})
    rc, c = check(root, cfg)
    assert rc == 0 and c["links"]["status"] == "pass", c

    # Symbol errors climbing on one port: that port is named, the other is not.
    set_port(root, "mlx5_0", symbol_error=25)
    rc, c = check(root, cfg)
    assert rc == 2 and c["links"]["detail"].startswith("mlx5_0/1 symbol_error +25"), c
    assert "mlx5_1" not in c["links"]["detail"]


def test_a_port_that_left_active_stays_unhealthy_after_it_is_back(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "node")
    cfg = tmp_path / "check.yml"
    cfg.write_text("memlock: '1'\nports: 2\nlink_stable_s: 600\n")
    set_port(root, "mlx5_0", **AGED)
    set_port(root, "mlx5_1", **AGED)
    assert check(root, cfg)[0] == 0
    set_port(root, "mlx5_1", state="1: DOWN")
    rc, c = check(root, cfg)
    assert rc == 2 and c["ports"]["status"] == "fail"
    assert c["links"]["detail"].startswith("mlx5_1/1 left ACTIVE (DOWN now)")
    set_port(root, "mlx5_1", state="4: ACTIVE", link_downed=3)  # back, and the PMA saw it
    rc, c = check(root, cfg)
    assert rc == 2 and c["ports"]["status"] == "pass" and c["links"]["status"] == "fail"
    assert c["_reason"].startswith(
        "[reset-link] mlx5_1/1 link_downed +1 (unhealthy until stable"), c["_reason"]


def test_thresholds_come_from_the_config_and_bad_ones_are_config_errors(tmp_path: Path) -> None:
    root = fake_node(tmp_path / "node")
    set_port(root, "mlx5_0", **AGED)
    set_port(root, "mlx5_1", **AGED)
    cfg = tmp_path / "check.yml"
    cfg.write_text("memlock: '1'\nlink_thresholds: {symbol: 100}\n")
    assert check(root, cfg)[0] == 0
    set_port(root, "mlx5_0", symbol_error=17 + 50)  # +50: under the configured 100
    rc, c = check(root, cfg)
    assert rc == 0 and c["links"]["status"] == "pass", c
    cfg.write_text("memlock: '1'\nlink_thresholds: {symbols: 100}\n")
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "check", "--sysroot", str(root),
                        "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.returncode == 1 and "unknown counter class 'symbols'" in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1


def test_roce_retransmissions_warn_and_never_drain(tmp_path: Path) -> None:
    """mlx5 RoCE hw_counters (ports/1/hw_counters/): loss-driven retransmissions are reported
    on the item, the node stays healthy (congestion elsewhere raises them too)."""
    root = fake_node(tmp_path / "node", ports=[
        ("mlx5_0", 1, "4: ACTIVE", "100 Gb/sec (4X EDR)", "Ethernet", "ens1f0np0")],
        mtus={"ens1f0np0": 9000})
    hw = root / "sys/class/infiniband/mlx5_0/ports/1/hw_counters"
    hw.mkdir()
    base = {"out_of_sequence": 1203, "packet_seq_err": 88, "local_ack_timeout_err": 3,
            "rnr_nak_retry_err": 0, "np_cnp_sent": 90211, "rp_cnp_handled": 88410,
            "out_of_buffer": 0, "duplicate_request": 12, "implied_nak_seq_err": 40}
    for name, value in base.items():
        (hw / name).write_text(f"{value}\n")
    cfg = tmp_path / "check.yml"
    cfg.write_text("memlock: '1'\n")
    assert check(root, cfg)[0] == 0
    (hw / "out_of_sequence").write_text(f"{1203 + 5000}\n")
    (hw / "np_cnp_sent").write_text("990211\n")  # congestion notifications: not judged
    rc, c = check(root, cfg)
    assert rc == 0 and c["links"]["status"] == "pass", c
    assert "warn: mlx5_0/1 out_of_sequence +5000" in c["links"]["detail"]
    assert "np_cnp_sent" not in c["links"]["detail"]
