"""A reader that goes away (`rdmaprov check | true`, `explain … | head -1`, `probe --json | true`):
the real command line ends quietly, with the exit code it has when its output is read."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPLAIN = ROOT / "tests/fixtures/explain"
SYSFS = ROOT / "tests/fixtures/sysfs"

_spec = importlib.util.spec_from_file_location(
    "_check_fakes", ROOT / "tests" / "unit" / "test_check_logic.py")
assert _spec is not None and _spec.loader is not None
_fakes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fakes)
fake_node = _fakes.fake_node


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RDMAPROV_", "NCCL_"))}
    return env | extra


def closed(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the command with its stdout a pipe whose only reader is closed before the command
    starts, so that its first write or flush finds no reader (deterministically)."""
    p = subprocess.Popen([sys.executable, "-m", "rdmaprov", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env or _env(), cwd=ROOT)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read()
    return p.wait(timeout=120), err


def read(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rdmaprov", *argv], capture_output=True,
                          text=True, env=env or _env(), cwd=ROOT, timeout=120, check=False)


@pytest.mark.parametrize("argv", [
    ["explain", str(EXPLAIN / "nccl_1053_ib_disabled_lo.log")],           # an error found: 2
    ["explain", "--json", str(EXPLAIN / "nccl_1320_v2.21.5_hpcx_bridges.log")],
    ["probe", "--json", "--sysfs-root", str(SYSFS / "roce")],           # 0
    ["probe", "--sysfs-root", str(SYSFS / "ib_ndr")],
    ["--help"],
])
def test_closed_stdout_keeps_the_commands_exit_code(argv: list[str]) -> None:
    expected = read(argv)
    assert expected.stdout, "the command must have output for the pipe to matter"
    code, err = closed(argv)
    assert (code, err) == (expected.returncode, "")


def test_check_verdicts_survive_a_closed_stdout(tmp_path: Path) -> None:
    base = ["check", "--expect-memlock", "1", "--expect-ports", "2"]
    healthy = fake_node(tmp_path / "ok")
    sick = fake_node(tmp_path / "sick", ports=[
        ("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ib0"),
        ("mlx5_1", 1, "1: DOWN", "10 Gb/sec (4X SDR)", "InfiniBand", "ib1")])
    for flags in ([], ["--json"], ["--nhc"]):
        assert closed([*base, "--sysroot", str(healthy), *flags]) == (0, "")
        assert closed([*base, "--sysroot", str(sick), *flags]) == (2, "")
    # A config error stays 1, and says so on stderr.
    code, err = closed([*base, "--sysroot", str(healthy), "--expect-mtu", "12000"])
    assert code == 1 and err.startswith("rdmaprov: error: ") and "Traceback" not in err


def test_check_still_drains_when_nobody_reads_its_output(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sinfo").write_text('#!/bin/sh\nprintf "%s\\n" "idle|none"\n')
    (bindir / "scontrol").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path}/scontrol.log\n')
    for f in bindir.iterdir():
        f.chmod(0o755)
    sick = fake_node(tmp_path / "sick", gpus=1)
    env = _env(PATH=f"{bindir}:{os.environ['PATH']}", SLURMD_NODENAME="gpu17")
    code, err = closed(["check", "--sysroot", str(sick), "--expect-memlock", "1",
                        "--expect-gpus", "2", "--drain"], env)
    assert code == 2
    assert (tmp_path / "scontrol.log").read_text() == (
        "update nodename=gpu17 state=drain reason=rdmaprov: [reboot] 1 of 2 GPUs visible\n")
    assert "Traceback" not in err and "BrokenPipe" not in err
