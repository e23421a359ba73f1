"""`rdmaprov lab` refuses bad input and a missing privilege with one line, before touching
anything (no namespace, no bridge, no state directory)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

RDMAPROV = [sys.executable, "-m", "rdmaprov"]


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root to make an unprivileged user namespace")
def test_lab_up_without_root_says_so(tmp_path):
    # In a new user namespace the command runs as uid 65534 without any capability on the host,
    # yet still reads the checkout with root's file access: a repository under /root (mode
    # 0700) stays importable, which a switch to another host user (setpriv) would not allow.
    proc = subprocess.run(["unshare", "--user", *RDMAPROV, "lab", "up", "--name", "nope"],
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
