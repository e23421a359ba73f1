"""Every molecule scenario, as `molecule test -s NAME` runs it: create (rdmaprov lab up), converge,
idempotence, verify, destroy (rdmaprov lab down), against real lab nodes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))
# One lab at a time, named after the session's lab so that two test sessions do not collide.
LAB = (os.environ.get("RDMAPROV_MOLECULE_LAB")
       or os.environ.get("RDMAPROV_TEST_LAB", "test")[:7] + "m")
ACTIONS = ("create", "converge", "idempotence", "verify", "destroy")


def test_every_scenario_is_found() -> None:
    assert SCENARIOS == ["drivers", "network"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario: str) -> None:
    if os.geteuid() != 0:
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail("the lab needs root")
        pytest.skip("the lab needs root")
    env = {
        **os.environ,
        # molecule and the playbooks' ansible-* next to this interpreter, venv activated or not
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", os.defpath)]),
        "RDMAPROV_MOLECULE_LAB": LAB,
        # the lab's inventory is passed to converge, idempotence and verify, not to create
        "MOLECULE_ANSIBLE_ARGS_STRICT_MODE": "1",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "NO_COLOR": "1",
        "PY_COLORS": "0",
    }
    try:
        proc = subprocess.run([str(BIN / "molecule"), "test", "-s", scenario], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=900)
    finally:
        subprocess.run([str(BIN / "rdmaprov"), "lab", "down", "--name", LAB],
                       capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    for action in ACTIONS:
        assert re.search(rf"{scenario}\s+\S+\s+{action}: Executed: Successful", out), \
            f"{action} did not run: {out[-4000:]}"
