"""A lab node's PID 1 is judged by /proc: alive while it is node-init.sh or systemd, or in the
middle of an exec (an empty cmdline that is no zombie); dead once it is a zombie or gone."""

from __future__ import annotations

import subprocess
import time

from rdmaprov.lab import Lab


def test_a_node_process_is_alive_until_it_is_a_zombie_or_gone() -> None:
    lab = Lab("urun")
    sleeper = subprocess.Popen(["sh", "-c", "sleep 30", "node-init.sh"])
    try:
        assert lab._running({"pid": sleeper.pid})
    finally:
        sleeper.kill()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and lab._running({"pid": sleeper.pid}):
        time.sleep(0.05)  # killed, not yet waited for: a zombie, with an empty cmdline
    assert not lab._running({"pid": sleeper.pid})
    sleeper.wait()
    assert not lab._running({"pid": sleeper.pid})
    assert not lab._running({"pid": 0})
