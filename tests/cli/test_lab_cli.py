"""`rdmaprov lab` refuses bad input and a missing privilege with one line, before touching
anything (no namespace, no bridge, no state directory)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

RDMAPROV = [sys.executable, "-m", "rdmaprov"]


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# Imports what the command needs while still root, then gives up root for good (setresuid: no
# capability is left) and runs it. Another user could not import a checkout under /root (mode
# 0700); a user namespace (`unshare --user`) would keep the file access, but the kernel refuses
# one to a chrooted process (a fresh machine's root) and where user namespaces are turned off.
AS_NOBODY = """
import os, sys
import rdmaprov.cli, rdmaprov.cli.lab, rdmaprov.lab
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
sys.exit(rdmaprov.cli.main(sys.argv[1:]))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to give it up")
def test_lab_up_without_root_says_so(tmp_path):
    proc = subprocess.run([sys.executable, "-c", AS_NOBODY, "lab", "up", "--name", "nope"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "RDMAPROV_LAB_DIR": str(tmp_path / "state")})
    assert "needs root" in one_line_error(proc)
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("argv, expected", [
    (["--name", "Bad_Name"], "lab name"),
    (["--name", "ok", "--nodes", "0"], "--nodes 0"),
    (["--name", "ok", "--subnet", "10.1.2.3/24"], "--subnet"),
    (["--name", "ok", "--fabric-mtu", "70000"], "--fabric-mtu 70000"),
    (["--name", "ok", "--suite", "../trixie"], "--suite '../trixie'"),
])
def test_lab_up_rejects_bad_options(tmp_path, argv, expected):
    if os.geteuid() != 0:
        pytest.skip("as non-root the privilege check answers first")
    env = {**os.environ, "RDMAPROV_LAB_DIR": str(tmp_path / "state"),
           "RDMAPROV_LAB_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([*RDMAPROV, "lab", "up", *argv], capture_output=True, text=True,
                          timeout=60, env=env)
    assert expected in one_line_error(proc)
    assert not (tmp_path / "cache").exists(), "a base image build started"
    names = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not re.search(r": rl(-|[0-9a-f]{3})ok-?[mf][:@]", names), "a bridge was made"


def test_lab_restart_of_an_unknown_node_says_so(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("as non-root the privilege check answers first")
    proc = subprocess.run([*RDMAPROV, "lab", "restart", "--name", "ok", "node1"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "RDMAPROV_LAB_DIR": str(tmp_path / "state")})
    assert one_line_error(proc) == "rdmaprov: error: lab 'ok' has no node 'node1'"


@pytest.mark.parametrize("argv, expected", [
    (["--mtu", "9000"], "lab 'ok' runs --mtu 1500; run 'rdmaprov lab down --name ok' first "
                        "to change it"),
    (["--fabric-mtu", "4000"], "lab 'ok' runs --fabric-mtu 9000;"),
    (["--subnet", "10.77.1.0/24"], "lab 'ok' runs --subnet 10.199.250.0/24;"),
    (["--fabric-subnet", "10.77.2.0/24"], "lab 'ok' runs --fabric-subnet 10.198.250.0/24;"),
])
def test_lab_up_of_a_lab_already_up_refuses_a_setting_it_would_drop(tmp_path, argv, expected):
    """A lab that is up keeps its networks: a different --mtu or subnet given again was
    silently dropped (issue 37, item 4); the same one, or none, is fine."""
    if os.geteuid() != 0:
        pytest.skip("as non-root the privilege check answers first")
    state = tmp_path / "state" / "ok"
    state.mkdir(parents=True)
    (state / "state.json").write_text(
        '{"name": "ok", "subnet": "10.199.250.0/24", "bridge": "rlxok", "mtu": 1500, '
        '"fabric_subnet": "10.198.250.0/24", "fabric_bridge": "rlxokf", "fabric_mtu": 9000, '
        '"nodes": [{"name": "node1"}], "suite": "bookworm"}')
    env = {**os.environ, "RDMAPROV_LAB_DIR": str(tmp_path / "state"),
           "RDMAPROV_LAB_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([*RDMAPROV, "lab", "up", "--name", "ok", *argv], capture_output=True,
                          text=True, timeout=60, env=env)
    assert one_line_error(proc).removeprefix("rdmaprov: error: ").startswith(expected)
    assert not (tmp_path / "cache").exists(), "a base image build started"
