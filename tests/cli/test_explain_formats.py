"""`rdmaprov explain` on the formats added for issue 27 (perftest, kernel logs, ethtool -S,
nvidia-smi topo -m), through the real command: kind, exit code, JSON shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
ROOT = Path(__file__).resolve().parents[2]


def explain(*args: str, stdin: str | None = None) -> tuple[int, str]:
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "explain", *args], input=stdin,
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in p.stderr
    return p.returncode, p.stdout


@pytest.mark.parametrize(("name", "kind", "rc"), [
    ("perftest228_oob_connect.txt", "perftest", 2),
    ("perftest132_ib_gbits_healthy.txt", "perftest", 0),
    ("kernel_l2fwd6_pcie_x8_limited.txt", "kernel_log", 0),  # a warning only
    ("kernel_cubecos733_journal_link_flap.txt", "kernel_log", 2),
    ("ethtool_ethq8_mlx5_healthy.txt", "ethtool_stats", 0),
    ("topo_nccl933_8gpu_9nic_pix.txt", "nvidia_topo", 0),
])
def test_new_formats_through_the_cli(name: str, kind: str, rc: int) -> None:
    code, out = explain("--json", str(FIX / name))
    doc = json.loads(out)
    assert doc["kind"] == kind and isinstance(doc["findings"], list)
    assert all({"severity", "message", "hint"} <= set(f) for f in doc["findings"])
    # Exit 0 nothing wrong, 2 an error found (a warning alone is not an error).
    assert code == rc


def test_text_report_names_the_format_and_the_cause() -> None:
    code, out = explain(str(FIX / "perftest140_use_cuda_status4.txt"))
    assert code == 2
    assert "perftest" in out and "status 4 (local protection error)" in out
    assert "nvidia_peermem" in out


def test_pasted_on_stdin_with_a_prefix_and_colours() -> None:
    text = (FIX / "kernel_cubecos733_journal_link_flap.txt").read_text()
    pasted = "".join(f"\x1b[32m3: {line}\x1b[0m\n" for line in text.splitlines())
    code, out = explain("--json", "-", stdin=pasted)
    doc = json.loads(out)
    assert code == 2 and doc["kind"] == "kernel_log"
    assert any(f.get("code") == "link_flap" for f in doc["findings"])
