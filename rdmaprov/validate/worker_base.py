"""What every part of the validation worker shares: the document's schema and exit codes, the
steps file and the watchdog's progress pipe, one rank's context and the small all-gather, and
the loaders of rounds.py and rdma_ports.py.

Standard library only. Copied beside worker.py wherever the worker runs, with the other parts
(worker_preflight.py, worker_timing.py, worker_rails.py, worker_watchdog.py): the files
rdmaprov.validate.slurm.worker_files() names, which the nccl_validate role copies too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any

SCHEMA = "rdmaprov.validate.worker/1"

# Exit codes (plugins/module_utils/validate_launch.py names the same ones for the launch).
RC_FAILED = 1        # failed in the rendezvous or a collective: a peer may be the cause
RC_CANNOT_START = 2  # failed on this host before joining: no torch, no CUDA, bad arguments
RC_WATCHDOG = 3      # no progress within --timeout (+ grace): the watchdog killed the worker

# Where the kernel lists RDMA devices (the preflight's and the rail round's default).
_SYS_IB = "/sys/class/infiniband"


def _ports() -> Any:
    """rdma_ports.py, the one port reader (plugins/module_utils, standard library only): the
    copy the launch puts next to worker.py on a host or in a container; run from the package
    (tests), the collection's own, in a wheel or a checkout."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    utils = os.path.join("plugins", "module_utils", "rdma_ports.py")
    for path in (os.path.join(here, "rdma_ports.py"),
                 os.path.join(here, "..", "_collection", utils),
                 os.path.join(here, "..", "..", utils)):
        if os.path.isfile(path):
            break
    name = "_rdmaprov_worker_rdma_ports"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


# --- progress, for the watchdog ----------------------------------------------------------------

_PROGRESS_FD: int | None = None  # write end of the pipe the watchdog reads; None: no watchdog


def progress(phase: str) -> None:
    """Tell the watchdog a phase began (and so that the previous one ended): it kills the worker
    when one phase outlasts --timeout + grace. The phase is also a line of the run's steps file."""
    phase = phase.replace("\n", " ")
    step(phase)
    if _PROGRESS_FD is not None:
        with contextlib.suppress(OSError):
            os.write(_PROGRESS_FD, (phase + "\n").encode())


# The launch's steps file (plugins/module_utils/validate_launch.py STEPS_FILE), beside the exit
# codes: a failed run's reason then says which step each rank got to, and when.
STEPS_FILE = "steps.log"
_STEP_RANK: int | None = None  # --rank (the direct launcher); else torchrun's RANK


def step(what: str) -> None:
    """Append "<unix time> rank<N> <what>" to RDMAPROV_WORKER_RC_DIR/steps.log (one write of
    one short line, O_APPEND: the ranks of a host share the file); nothing without that dir."""
    where = os.environ.get("RDMAPROV_WORKER_RC_DIR")
    if not where:
        return
    rank = _STEP_RANK if _STEP_RANK is not None else os.environ.get("RANK", "0")
    line = f"{time.time():.3f} rank{rank} {what}\n".encode()
    with contextlib.suppress(OSError):
        fd = os.open(os.path.join(where, STEPS_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                     0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


class _Ctx:
    """What one rank knows about itself once the process group is up."""

    def __init__(self, torch: Any, dist: Any, backend: str, rank: int, world: int,
                 local_rank: int, group: Any = None) -> None:
        self.torch, self.dist, self.backend = torch, dist, backend
        self.rank, self.world, self.local_rank = rank, world, local_rank
        self.group = group  # None: the whole job; else a subgroup (a pair of hosts)
        self.rendezvous: dict[str, Any] | None = None  # worker_join's record of its phases
        self.device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")

    def sub(self, group: Any) -> _Ctx:
        """This rank inside ``group``: its rank and size there."""
        return _Ctx(self.torch, self.dist, self.backend, self.dist.get_rank(group),
                    self.dist.get_world_size(group), self.local_rank, group)

    def sync(self) -> None:
        if self.backend == "nccl":
            self.torch.cuda.synchronize(self.device)


def _node_rank(ctx: _Ctx) -> int:
    return node_rank_of(ctx.rank)


def node_rank_of(rank: int) -> int:
    """The node (launch host) of ``rank``: torchrun's GROUP_RANK, else rank // local world."""
    for name in ("GROUP_RANK", "NODE_RANK"):
        v = os.environ.get(name, "")
        if v.isdecimal():
            return int(v)
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    return rank // (int(local) if local.isdecimal() and int(local) > 0 else 1)


def _gather_json(ctx: _Ctx, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's small JSON object, in rank order.

    Done with byte tensors rather than all_gather_object, which needs numpy in some torch
    builds, and the worker must run on a bare torch image.
    """
    torch, dist = ctx.torch, ctx.dist
    data = json.dumps(obj).encode()
    length = torch.tensor([len(data)], dtype=torch.int64, device=ctx.device)
    lengths = [torch.zeros_like(length) for _ in range(ctx.world)]
    dist.all_gather(lengths, length)
    width = max(int(t.item()) for t in lengths)
    mine = torch.zeros(width, dtype=torch.uint8, device=ctx.device)
    mine[: len(data)] = torch.tensor(list(data), dtype=torch.uint8, device=ctx.device)
    bufs = [torch.zeros_like(mine) for _ in range(ctx.world)]
    dist.all_gather(bufs, mine)
    return [json.loads(bytes(b[: int(n.item())].cpu().tolist()).decode())
            for b, n in zip(bufs, lengths)]  # noqa: B905 (strict= needs 3.10; images vary)


def _rounds() -> Any:
    """rounds.py from beside this file: the package's own copy when run as a module, the copy
    the launch puts next to worker.py on a host."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import rounds  # type: ignore[import-not-found,unused-ignore]

    return rounds


def _hosts_of(ranks: list[dict[str, Any]]
              ) -> tuple[list[str], dict[str, list[int]], dict[str, str]]:
    """One key per node ("node<N>", in rank order), each node's ranks, and its host name."""
    hosts: list[str] = []
    host_ranks: dict[str, list[int]] = {}
    hostname: dict[str, str] = {}
    for r in sorted(ranks, key=lambda r: r["rank"]):
        key = f"node{r.get('node', r['rank'])}"
        if key not in host_ranks:
            hosts.append(key)
            hostname[key] = r["hostname"]
        host_ranks.setdefault(key, []).append(int(r["rank"]))
    return hosts, host_ranks, hostname


def one_line(exc: BaseException) -> str:
    """The most telling line of an error: NCCL's 'Last error:' when torch wraps one."""
    text = str(exc).strip()
    if "Last error:" in text:
        text = text.split("Last error:", 1)[1].strip()
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _rank_of(args: argparse.Namespace) -> int:
    return args.rank if args.rank is not None else int(os.environ.get("RANK", "0"))
