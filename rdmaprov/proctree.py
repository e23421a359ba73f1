"""The processes an ansible-runner run started, read from /proc, so that an interrupt reaches all
of them. ansible-runner starts ansible-playbook in a session of its own (pexpect), and each of
Ansible's fork workers calls setsid() again: a Ctrl-C on the terminal, or a signal to
rdmaprov's process group, reaches none of them."""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start: int  # clock ticks after boot: with pid, names a process across pid reuse


def read(pid: int, proc: str = "/proc") -> Proc | None:
    try:
        text = Path(proc, str(pid), "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
    fields = text[text.rindex(")") + 2:].split()
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0],
                    int(fields[19]))
    except (IndexError, ValueError):
        return None


def table(proc: str = "/proc") -> list[Proc]:
    out = []
    with contextlib.suppress(OSError):
        for name in os.listdir(proc):
            if name.isdigit():
                p = read(int(name), proc)
                if p is not None:
                    out.append(p)
    return out


def started_sessions(parent: int, proc: str = "/proc") -> list[Proc]:
    """Every process below ``parent``'s children that lead a session of their own (what
    ansible-runner started), those children included."""
    procs = table(proc)
    kids: dict[int, list[Proc]] = {}
    for p in procs:
        kids.setdefault(p.ppid, []).append(p)
    roots = [p for p in kids.get(parent, []) if p.sid == p.pid]
    out, todo = [], list(roots)
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p.pid, []))
    return out


def alive(p: Proc, proc: str = "/proc") -> bool:
    """Still running (a zombie has ended; the same pid with another start time is another
    process)."""
    now = read(p.pid, proc)
    return now is not None and now.start == p.start and now.state not in ("Z", "X")


def signal_groups(procs: list[Proc], sig: int) -> None:
    """``sig`` to each process group among ``procs`` (never rdmaprov's own)."""
    own = os.getpgrp()
    for pgid in sorted({p.pgid for p in procs} - {own}):
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)


INTERRUPT = signal.SIGINT
KILL = signal.SIGKILL
