"""`rdmaprov check --kernel-log`: the kernel's messages since the last check, judged by explain's
rules table (one rule, one place), reported and never drained on. The messages are real ones
(tests/fixtures/explain/index.yaml: rp-ext#129's probe failure, l2fwd-nv#6's x8 slot) written
as /dev/kmsg records ('PRI,SEQ,TS_USEC,FLAGS;MESSAGE') into the captured H200 root."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rdmaprov.check import kernel
from rdmaprov.cli import main

EXPLAIN = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
DMESG = re.compile(r"^\[\s*(\d+)\.(\d+)\]\s(.*)$")


def kmsg_records(paths: list[Path], first_seq: int = 100) -> list[str]:
    out = []
    for path in paths:
        for line in path.read_text().splitlines():
            m = DMESG.match(line)
            if m:
                usec = int(m[1]) * 1_000_000 + int(m[2])
                out.append(f"3,{first_seq + len(out)},{usec},-;{m[3]}")
    return out


def run_check(root: Path, capsys, *flags: str) -> tuple[int, dict]:
    rc = main(["check", "--sysroot", str(root), "--expect-ports", "0", "--expect-memlock", "1",
               "--json", *flags])
    return rc, json.loads(capsys.readouterr().out)


def item(doc: dict, name: str) -> dict:
    return next(c for c in doc["checks"] if c["name"] == name)


def test_new_kernel_errors_are_reported_once_and_never_drain(h200_root: Path, capsys) -> None:
    kmsg = h200_root / "dev" / "kmsg"
    probe_failed = kmsg_records([EXPLAIN / "kernel_rpext129_mlx5_probe_failed.txt"])
    kmsg.write_text("\n".join(probe_failed) + "\n")
    (h200_root / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (h200_root / "proc/sys/kernel/random/boot_id").write_text("boot-1\n")

    rc, doc = run_check(h200_root, capsys)
    assert item(doc, "kernel")["status"] == "n/a"  # opt-in: the prolog's budget is 0.1 s

    rc, doc = run_check(h200_root, capsys, "--kernel-log")
    k = item(doc, "kernel")
    assert rc == 0 and doc["healthy"] is True, doc["reason"]  # reported, not a drain
    assert k["status"] == "pass" and k["detail"].startswith("reported, not judged: ")
    assert "probe" in k["detail"].lower() and "[" in k["detail"]
    assert doc["state"]["kernel"]["new"] == len(probe_failed)

    # The next check sees only what is new: nothing, then the x8 slot warning.
    rc, doc = run_check(h200_root, capsys, "--kernel-log")
    assert item(doc, "kernel")["detail"].startswith("no RDMA, PCIe or GPU error in 0 kernel")
    x8 = kmsg_records([EXPLAIN / "kernel_l2fwd6_pcie_x8_limited.txt"],
                      first_seq=100 + len(probe_failed))
    kmsg.write_text("\n".join(probe_failed + x8) + "\n")
    rc, doc = run_check(h200_root, capsys, "--kernel-log")
    k = item(doc, "kernel")
    assert rc == 0 and doc["state"]["kernel"]["new"] == len(x8)
    assert "PCIe" in k["detail"] and "probe" not in k["detail"].lower()

    # A new boot (another boot id, the sequence restarted): the whole ring is new again.
    (h200_root / "proc/sys/kernel/random/boot_id").write_text("boot-2\n")
    rc, doc = run_check(h200_root, capsys, "--kernel-log")
    assert doc["state"]["kernel"]["new"] == len(probe_failed + x8)


def test_records_and_continuation_lines() -> None:
    assert kernel.parse_record("6,1234,5678901,-;mlx5_core 0000:17:00.0: Link up") == (
        1234, "mlx5_core 0000:17:00.0: Link up")
    assert kernel.parse_record(" SUBSYSTEM=pci") is None
    assert kernel.parse_record("garbage") is None
    assert kernel.parse_record("6,x,1,-;m") is None


def test_an_unreadable_log_is_said_not_failed(h200_root: Path, capsys) -> None:
    kmsg = h200_root / "dev" / "kmsg"
    if kmsg.exists():
        kmsg.unlink()
    rc, doc = run_check(h200_root, capsys, "--kernel-log")
    k = item(doc, "kernel")
    assert k["status"] == "n/a" and k["detail"].startswith("kernel log not readable")
    assert rc == 0
