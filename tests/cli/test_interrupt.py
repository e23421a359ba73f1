"""Ctrl-C (SIGINT) or SIGTERM during a run whose host hangs in the SSH banner: the signal reaches
ansible-playbook and its workers (each in a session of its own), rdmaprov waits for them, names
the host whose task was in flight, removes its private data dir once they are gone, exits 130.

The host is a local TCP listener that accepts and never sends an SSH banner."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rdmaprov import proctree

ROOT = Path(__file__).resolve().parents[2]


class SilentHost:
    """Accepts TCP connections and says nothing; records each one and when its peer left."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.connected = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.connected.set()

    def peers_gone(self) -> bool:
        """Every client closed its end (recv sees EOF or a reset after the client's own
        identification line, which it sends without waiting for the server's)."""
        for c in self.conns:
            c.settimeout(30)
            try:
                while c.recv(4096):
                    pass
            except ConnectionResetError:
                pass
            except TimeoutError:
                return False
        return True

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


def _default_sigint() -> None:
    """Ctrl-C's default action in the child, as in a terminal's foreground job. A test run
    started in the background of a non-interactive shell (`.ci/run &`) inherits SIGINT ignored,
    and Python keeps an ignored SIGINT ignored: rdmaprov then rightly runs on (as a nohup'd run
    must), and the test would judge the shell that started it, not rdmaprov."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def silent_host():
    host = SilentHost()
    yield host
    host.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_stops_ansible_and_names_the_host(tmp_path: Path, silent_host: SilentHost,
                                                    sig: signal.Signals) -> None:
    inv = tmp_path / "inventory.ini"
    inv.write_text(f"hang ansible_host=127.0.0.1 ansible_port={silent_host.port} "
                   "ansible_user=root\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RDMAPROV_", "ANSIBLE_"))}
    env["TMPDIR"] = str(tmp)
    # A session of its own, as a shell job: the signal goes to its process group, as a
    # terminal's Ctrl-C does (and reaches nothing that ansible-runner started).
    p = subprocess.Popen([sys.executable, "-m", "rdmaprov", "status", str(inv)], cwd=ROOT,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=_default_sigint)
    try:
        assert silent_host.connected.wait(180), "ssh never reached the silent host"
        started = proctree.started_sessions(p.pid, "ansible-playbook")
        assert any(pr.pid != pr.sid or pr.ppid != p.pid for pr in started), \
            "the workers (their own sessions) should be running by now"
        os.killpg(p.pid, sig)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, err
    assert "rdmaprov: hang: interrupted in task 'Read node state'" in err.splitlines(), err
    assert out == ""  # no table as if nothing had happened
    assert not [pr for pr in started if proctree.alive(pr)]
    assert silent_host.peers_gone()  # the ssh client in the banner wait went too
    assert not list(tmp.glob("rdmaprov-*"))  # the private data dir, once they were gone
