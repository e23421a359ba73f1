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


def test_nodes_the_inotify_cap_would_kill_are_refused_in_one_line(tmp_path, monkeypatch) -> None:
    import pytest

    from rdmaprov.errors import UserError
    from rdmaprov.lab import host as lab_mod

    cap = tmp_path / "max_user_instances"
    monkeypatch.setattr(lab_mod, "INOTIFY_LIMIT", cap)
    in_use = 40
    monkeypatch.setattr(lab_mod, "inotify_in_use", lambda: in_use)
    cap.write_text(f"{in_use + 2 * lab_mod.INOTIFY_PER_NODE}\n")
    lab_mod.check_inotify(2)  # fits
    with pytest.raises(UserError, match=r"3 more lab nodes need about 24 inotify instances.*"
                                        r"fs.inotify.max_user_instances"):
        lab_mod.check_inotify(3)
    lab_mod.check_inotify(0)
