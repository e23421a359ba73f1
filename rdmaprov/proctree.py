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


def cmdline(pid: int, proc: str = "/proc") -> str:
    try:
        return Path(proc, str(pid), "cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def started_sessions(parent: int, program: str, before: frozenset[int] = frozenset(),
                     proc: str = "/proc") -> list[Proc]:
    """``parent``'s children that lead a session of their own and run ``program`` (what
    ansible-runner started; not one of ``before``, the ones that were there already, e.g. a
    test's lab nodes), and every process below them."""
    procs = table(proc)
    kids: dict[int, list[Proc]] = {}
    for p in procs:
        kids.setdefault(p.ppid, []).append(p)
    roots = [p for p in kids.get(parent, []) if p.sid == p.pid and p.pid not in before
             and program in cmdline(p.pid, proc)]
    out, todo = [], list(roots)
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p.pid, []))
    return out


def session_leaders(parent: int, proc: str = "/proc") -> frozenset[int]:
    """``parent``'s children that lead a session of their own, now."""
    return frozenset(p.pid for p in table(proc) if p.ppid == parent and p.sid == p.pid)


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
