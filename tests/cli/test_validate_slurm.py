"""`rdmaprov validate --launcher slurm`: a bad flag is one line and exit 1, before anything
runs (no salloc, no srun: PATH holds a salloc that would leave a mark if it were called)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def validate(tmp: Path, *args: str, slurm: bool = True) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    if slurm:
        for tool in ("salloc", "srun", "sinfo", "scontrol"):
            (bin_dir / tool).write_text(f"#!/bin/sh\ntouch {tmp}/called-{tool}\nexit 3\n")
            (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    env.pop("RDMAPROV_VALIDATE_LAUNCHER", None)
    return subprocess.run([sys.executable, "-m", "rdmaprov", "validate", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("args, line", [
    (["--launcher", "slurm"], "--launcher slurm needs --partition P"),
    (["--launcher", "slurm", "-p", "gpu", "--nodes", "0"],
     "--nodes: 0 is not a valid count (1..1000000)"),
    (["--partition", "gpu"], "--partition is for --launcher slurm"),
    (["inventory.ini", "--drain"], "--drain is for --launcher slurm"),
    (["--launcher", "slurm", "-p", "gpu", "inventory.ini"],
     "--launcher slurm takes the nodes from Slurm: give no INVENTORY"),
    (["--launcher", "slurm", "-p", "gpu", "--runtime", "container"],
     "--runtime container: with --launcher slurm the worker runs as the job step"),
    (["--launcher", "slurm", "-p", "gpu", "--compare-socket"],
     "--compare-socket is not available with --launcher slurm"),
    (["--launcher", "slurm", "-p", "gpu", "-e", "nccl_validate_pairs=sometimes"],
     "nccl_validate_pairs: 'sometimes' is not one of"),
    (["--launcher", "slurm", "-p", "gpu", "--nodes", "two"], "--nodes: 'two' is not a number"),
])
def test_bad_flag_is_one_line_exit_1(tmp_path: Path, args: list[str], line: str) -> None:
    p = validate(tmp_path, *args)
    assert p.returncode == 1, p.stdout + p.stderr
    assert len(p.stderr.splitlines()) == 1 and line in p.stderr, p.stderr
    assert p.stdout == ""
    assert not list(tmp_path.glob("called-*"))  # nothing ran


def test_no_slurm_on_this_host_is_one_line(tmp_path: Path) -> None:
    p = validate(tmp_path, "--launcher", "slurm", "-p", "gpu", slurm=False)
    if any(Path(d, "salloc").exists() for d in ("/usr/bin", "/bin")):
        pytest.skip("this host has Slurm's salloc")
    assert p.returncode == 1
    assert p.stderr.strip().endswith("--launcher slurm needs Slurm's salloc, srun, sinfo, "
                                     "scontrol on PATH (run it on a submit host)")
