"""The worker's watchdog: a supervisor process that runs the worker in a child and kills it when
one phase outlasts its limit, and the exit code it leaves where the launch reads it.

Standard library only; copied beside worker.py (rdmaprov.validate.slurm.worker_files()).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # from the rdmaprov package (tests, python -m)
    from . import worker_base as base
else:  # a file beside worker.py on a host or in an image, where rdmaprov is not installed
    import worker_base as base

IMPORT_FLOOR_S = 120.0


def watchdog_limit(timeout: float) -> float:
    """Seconds one phase may take before the watchdog kills the worker: --timeout, which torch
    also gets (its own error, more telling, comes first when torch can raise one), plus a grace."""
    return timeout + max(5.0, min(30.0, 0.1 * timeout))


def start_limit(timeout: float) -> float:
    """Seconds the start (Python, then ``import torch``) may take: --timeout, at least
    IMPORT_FLOOR_S (tens of seconds on a loaded host or a network filesystem), and no grace:
    torch has no error of its own to give before the rendezvous. A worker frozen while it starts
    is then killed (exit 3, named by this watchdog) when its peers, which started with it, have
    waited --timeout in their rendezvous at most, so the launch stops them at once; with the
    grace, the run lasted that much longer (bench/RESULTS.md, issue 23)."""
    return max(timeout, IMPORT_FLOOR_S)


def _supervise(args: argparse.Namespace,
               work: Callable[[argparse.Namespace], int]) -> int:
    """Run the worker in a child process and kill its whole process group with SIGKILL when one
    phase (import, rendezvous, one size of the sweep) outlasts watchdog_limit: a hung NCCL or
    gloo collective, or a peer that never joins, cannot be ended from inside the Python that
    waits on it. This process imports no torch, so it stays responsive. Also ends the worker
    when this process is told to stop (SIGTERM from torchrun or the launch) or is orphaned."""
    import select
    import signal

    limit = watchdog_limit(args.timeout)
    # Starting is no collective: start_limit, so a short --timeout still reaches torch's own
    # rendezvous error, and a worker frozen before its rendezvous is named before its peers'
    # rendezvous timeouts end them.
    first = start_limit(args.timeout)
    read_fd, write_fd = os.pipe()
    parent = os.getppid()
    # A stop signal that arrived between the fork and the handlers below would end this
    # process by default and orphan the worker (which holds the launcher's pipes open, so the
    # launcher waits for it): hold them until the handlers are in place; the child starts with
    # the default dispositions and the mask it would have had.
    stops = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    pid = os.fork()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        os.close(read_fd)
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # its own group, so that killing it spares this supervisor
        base._PROGRESS_FD = write_fd
        code = 1
        try:
            code = work(args)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write_fd)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)

    def kill(sig: int) -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, sig)
        with contextlib.suppress(OSError):
            os.kill(pid, sig)

    def on_signal(signum: int, _frame: Any) -> None:
        kill(signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        os._exit(128 + signum)

    for sig in stops:
        signal.signal(sig, on_signal)
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)

    phase, printed, buf = "start", False, b""
    current = first
    deadline = time.monotonic() + current
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return _exit_code(status)
        if os.getppid() != parent:  # the launcher died (torchrun's agent killed): follow it
            kill(signal.SIGKILL)
            os.waitpid(pid, 0)
            return base.RC_FAILED
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.5))
        if ready:
            data = os.read(read_fd, 4096)
            if not data:  # the child closed the pipe: it is exiting
                _, status = os.waitpid(pid, 0)
                return _exit_code(status)
            buf += data
            *lines, buf = buf.split(b"\n")
            if lines:
                phase = lines[-1].decode(errors="replace")
                printed = printed or phase == "document printed"
                current = first if phase == "import torch" else limit
                deadline = time.monotonic() + current
    kill(signal.SIGKILL)
    os.waitpid(pid, 0)
    rank = base._rank_of(args)
    err = {"schema": base.SCHEMA, "ok": False, "rank": rank, "hostname": socket.gethostname(),
           "error": f"watchdog: no progress for {current:.0f} s in {phase}; killed the worker "
                    "(a peer gone, or a collective hung)", "phase": phase}
    print(json.dumps(err), file=sys.stderr, flush=True)
    base.step(f"watchdog: killed after {current:.0f} s in {phase}")
    if printed:  # the document is out and whole: only the teardown hung
        return 0
    if rank == 0:
        print(json.dumps(err, indent=1), flush=True)
    return base.RC_WATCHDOG


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _record_exit(code: int) -> None:
    """Leave this rank's exit code where the launch reads it (RDMAPROV_WORKER_RC_DIR): torchrun
    reports any failed worker as its own exit 1, which would hide a 2 or a 3."""
    where = os.environ.get("RDMAPROV_WORKER_RC_DIR")
    if where:
        with contextlib.suppress(OSError), open(
                os.path.join(where, f"worker-rc.{os.environ.get('RANK', '0')}"), "w") as f:
            f.write(f"{code}\n")
    base.step(f"exit {code}")
