"""Lab state that cannot collide or linger: two labs of one name from different roots (state
directories) run side by side, and a node left running by a lab whose state was lost is cleaned
up by the next `lab up` instead of a raw EBUSY on its cgroup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab
NAME = os.environ.get("RDMAPROV_ROOTS_LAB", "vkind2")
RDMAPROV = [sys.executable, "-m", "rdmaprov"]


@pytest.fixture
def roots(tmp_path):
    if os.geteuid() != 0:
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail("the lab needs root")
        pytest.skip("the lab needs root")
    dirs = [tmp_path / "root-a", tmp_path / "root-b"]
    yield dirs
    for d in dirs:
        lab(d, "down")


def lab(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RDMAPROV, "lab", *args, "--name", NAME], capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "RDMAPROV_LAB_DIR": str(state_dir)})


def state(state_dir: Path) -> dict:
    return json.loads((state_dir / NAME / "state.json").read_text())


def test_two_labs_of_one_name_from_two_roots_do_not_collide(roots):
    for d in roots:
        up = lab(d, "up", "--nodes", "1")
        assert up.returncode == 0, up.stderr[-2000:]
    a, b = (state(d) for d in roots)
    assert a["tag"] != b["tag"]
    assert {a["bridge"], a["fabric_bridge"]}.isdisjoint({b["bridge"], b["fabric_bridge"]})
    assert a["subnet"] != b["subnet"] and a["fabric_subnet"] != b["fabric_subnet"]
    for d in roots:  # both answer: neither took the other's bridge, netns or cgroup
        status = lab(d, "status", "--json")
        assert status.returncode == 0, status.stdout + status.stderr
        assert all(row["ssh"] for row in json.loads(status.stdout))
    down = lab(roots[0], "down")
    assert down.returncode == 0, down.stderr
    assert lab(roots[1], "status").returncode == 0, "taking one down hurt the other"


def running(pid: int) -> bool:
    """Alive, not a zombie waiting for a parent that is gone to be reaped by init."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_up_cleans_a_node_whose_lab_state_was_lost(roots):
    d = roots[0]
    up = lab(d, "up", "--nodes", "1")
    assert up.returncode == 0, up.stderr[-2000:]
    old = state(d)
    orphan = old["nodes"][0]["pid"]
    # The lab's state vanishes while its node runs on: a crashed `up`, a deleted directory.
    (d / NAME / "state.json").unlink()
    again = lab(d, "up", "--nodes", "1")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Traceback" not in again.stderr
    assert not running(orphan), "the orphaned node still runs"
    status = lab(d, "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)[0]["ssh"]
    # The orphan's bridges went with `down` (the new state knows them by name).
    assert lab(d, "down").returncode == 0
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert old["bridge"] not in links
