"""Bad inventories stop before SSH (issue 15 item 8): `rdmaprov bootstrap BAD` exits 1 with one
line, and the host it names is never contacted. The host is a TCP listener of this test on
127.0.0.1: had anything tried to connect (ssh, or Ansible's first task), it would have a
connection waiting."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def contacted(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def bootstrap(inventory: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RDMAPROV_", "ANSIBLE_"))}
    return subprocess.run([sys.executable, "-m", "rdmaprov", "bootstrap", str(inventory)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rdmaprov: error: "), proc.stderr
    return lines[0].removeprefix("rdmaprov: error: ")


def test_latin1_inventory(tmp_path: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    p = tmp_path / "cluster.ini"
    p.write_bytes(f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={port}\n"
                  "# salle serveur \xe9tage 2\n".encode("latin-1"))
    msg = one_line_error(bootstrap(p))
    assert msg.startswith(f"{p}: line 3, byte 17 (0xe9) is not UTF-8")
    assert not contacted(listener)


def test_host_name_with_a_space(tmp_path: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    p = tmp_path / "cluster.yml"
    p.write_text(f'all:\n  hosts:\n    "gpu node 1":\n      ansible_host: 127.0.0.1\n'
                 f"      ansible_port: {port}\n")
    msg = one_line_error(bootstrap(p))
    assert msg.startswith(f"{p}: host name 'gpu node 1' has a space: that breaks --limit")
    assert not contacted(listener)


def test_unknown_connection_plugin(tmp_path: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    p = tmp_path / "cluster.ini"
    p.write_text(f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={port} "
                 "ansible_connection=shh\n")
    msg = one_line_error(bootstrap(p))
    assert msg.startswith(f"{p}: host node1: ansible_connection 'shh' is not a connection "
                          "plugin (did you mean ssh?)")
    assert not contacted(listener)
