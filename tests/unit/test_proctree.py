"""Which processes an interrupt reaches: only what ansible-runner started (a session of its own
running ansible-playbook) and everything below it; never another session of ours, such as the
lab nodes a test started in the same process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from rdmaprov import proctree


def test_started_sessions_are_only_ansible_runners() -> None:
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a lab node, say
    before = proctree.session_leaders(os.getpid())
    runner = subprocess.Popen(  # ansible-playbook and one worker of its own
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(['sleep', '60']);"
         " time.sleep(60)", "ansible-playbook"], start_new_session=True)
    try:
        for _ in range(100):  # the worker is there once the child has started it
            found = proctree.started_sessions(os.getpid(), "ansible-playbook", before)
            if len(found) == 2:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        assert {p.pid for p in found} >= {runner.pid} and len(found) == 2
        assert other.pid not in {p.pid for p in found}
        assert proctree.started_sessions(os.getpid(), "ansible-playbook",
                                         before | {runner.pid}) == []
        assert all(proctree.alive(p) for p in found)
        proctree.signal_groups(found, signal.SIGKILL)
        runner.wait()
        # SIGKILL is queued at once but takes effect when the target next runs: on a loaded
        # machine the worker can still read as running for a moment (the engine polls too).
        for _ in range(100):
            if not any(proctree.alive(p) for p in found):
                break
            subprocess.run(["sleep", "0.1"], check=True)
        assert not any(proctree.alive(p) for p in found)
        assert other.poll() is None  # untouched
    finally:
        for p in (other, runner):
            if p.poll() is None:
                p.kill()
                p.wait()
