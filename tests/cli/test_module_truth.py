"""One truth about kernel modules (issue 15 item 4): `rdmaprov check` and `rdmaprov probe`, run as
a user runs them, give the same loaded / built in / absent answer on three kernels: the lent
H200's (RDMA built in, nothing in /sys/module for ib_uverbs and rdma_ucm, no HCA), a
distribution kernel with the stack loaded as modules, and a kernel with no RDMA at all.
The roots come from tests/fixtures/sysfs/make_trees.py (what each models is in SOURCES.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
sys.path.insert(0, str(FIXTURES))
try:
    import make_trees
finally:
    sys.path.remove(str(FIXTURES))

STACK = ("ib_core", "ib_uverbs", "rdma_ucm")
EXPECTED = {
    "h200_builtin": {"ib_core": "builtin", "ib_uverbs": "builtin", "rdma_ucm": "builtin"},
    "modular_loaded": {"ib_core": "loaded", "ib_uverbs": "loaded", "rdma_ucm": "loaded"},
    "no_rdma": {"ib_core": "absent", "ib_uverbs": "absent", "rdma_ucm": "absent"},
}


def rdmaprov(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "RDMAPROV_"))}
    return subprocess.run([sys.executable, "-m", "rdmaprov", *args], capture_output=True,
                          text=True, timeout=60, check=False, env=env)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_check_and_probe_give_the_same_answer(tmp_path: Path, name: str) -> None:
    root = make_trees.build_root(name, tmp_path)
    chk = rdmaprov("check", "--sysroot", str(root), "--expect-memlock", "1", "--json")
    assert chk.returncode in (0, 2), chk.stderr
    check_doc = json.loads(chk.stdout)
    prb = rdmaprov("probe", "--sysfs-root", str(root / "sys"), "--json")
    assert prb.returncode == 0, prb.stderr
    probe_doc = json.loads(prb.stdout)

    from_check = {m: check_doc["state"]["modules"][m]["state"] for m in STACK}
    from_probe = {m: probe_doc["rdma"]["kernel"]["modules"][m]["state"] for m in STACK}
    assert from_check == from_probe == EXPECTED[name]
    # Evidence travels with each answer, and it is the same evidence.
    assert {m: check_doc["state"]["modules"][m]["evidence"] for m in STACK} == {
        m: probe_doc["rdma"]["kernel"]["modules"][m]["evidence"] for m in STACK}
    modules = {c["name"]: c for c in check_doc["checks"]}["modules"]
    assert modules["status"] == ("fail" if name == "no_rdma" else "pass"), modules


def flat(text: str) -> str:
    """The table with runs of spaces as one (its name column is as wide as the longest name)."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def test_h200_kernel_is_not_called_not_loaded(tmp_path: Path) -> None:
    """The false 'unhealthy' of issue 15: a built-in stack must not drain a healthy node."""
    root = make_trees.build_root("h200_builtin", tmp_path)
    p = rdmaprov("check", "--sysroot", str(root), "--expect-memlock", "1", "--no-peermem")
    assert "modules PASS built in: ib_core, ib_uverbs, rdma_ucm" in flat(p.stdout), p.stdout
    assert "not loaded" not in p.stdout and "not in the kernel" not in p.stdout
    # What is really missing on that machine is named instead: no HCA.
    assert p.returncode == 2
    assert ("UNHEALTHY: [investigate] no RDMA devices: ib_uverbs is built into the kernel but "
            "/sys/class/infiniband is empty") in p.stdout
    pr = rdmaprov("probe", "--sysfs-root", str(root / "sys"))
    assert "Kernel modules: built in: ib_core, ib_uverbs, rdma_ucm." in pr.stdout, pr.stdout
    assert "is loaded" not in pr.stdout


def test_healthy_modular_node_passes(tmp_path: Path) -> None:
    root = make_trees.build_root("modular_loaded", tmp_path)
    p = rdmaprov("check", "--sysroot", str(root), "--expect-memlock", "1", "--expect-gpus", "1",
                 "--expect-rate", "400")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "modules PASS loaded: ib_core, ib_uverbs, rdma_ucm" in flat(p.stdout)
    assert "gpudirect PASS nvidia_peermem loaded" in flat(p.stdout)


def test_kernel_without_rdma_says_why(tmp_path: Path) -> None:
    root = make_trees.build_root("no_rdma", tmp_path)
    p = rdmaprov("check", "--sysroot", str(root), "--expect-memlock", "1", "--expect-gpus", "0")
    assert p.returncode == 2
    assert ("modules FAIL kernel module ib_core, ib_uverbs, rdma_ucm not in the kernel "
            "(neither loaded nor built in): no /proc/modules: this kernel has no "
            "loadable-module support") in flat(p.stdout), p.stdout
