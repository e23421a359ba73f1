"""All-reduce bandwidth worker: runs under torchrun on every host, prints one JSON document.

Runs as ``python -m rdmaprov.validate.worker`` or as a plain file mounted into a container
(``python /rdmaprov/worker.py``): it imports nothing from rdmaprov, only the standard library,
torch, and rounds.py (the pair planner, standard library only) copied beside it, because the
validation image has torch but not rdmaprov.

After the fabric sweep, with ``--pairs``, the same processes run the pair rounds that name a
slow host (rounds.py: neighbours on a ring, then the shifted pairs, a confirm round only when
those leave a host in doubt) on torch.distributed subgroups, every pair of a step at once; every
rank gathers each step's figures and plans the next round with the same rule, so no coordinator
message and no second launch is needed.

Rank 0 prints the document on stdout; every other rank prints nothing there, so the launcher
reads exactly one document. A rank that fails writes one JSON line on stderr and exits 1.

Figures follow nccl-tests: algbw = bytes / time, busbw = algbw * 2(n-1)/n for all_reduce,
GB/s = 1e9 bytes/s. The time of a size is the slowest rank's mean per-iteration time (a
collective is done when the last rank is), with the mean over ranks kept beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import platform
import re
import socket
import sys
import time
import traceback
from typing import Any

SCHEMA = "rdmaprov.validate.worker/1"
PREFLIGHT_SCHEMA = "rdmaprov.validate.preflight/1"

# Exit codes (plugins/module_utils/validate_launch.py names the same ones for the launch).
RC_FAILED = 1        # failed in the rendezvous or a collective: a peer may be the cause
RC_CANNOT_START = 2  # failed on this host before joining: no torch, no CUDA, bad arguments
RC_WATCHDOG = 3      # no progress within --timeout (+ grace): the watchdog killed the worker

# Environment variables worth recording: they decide which transport NCCL or gloo picks.
_ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "CUDA_VISIBLE_DEVICES", "MASTER_", "UCX_")

_DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4}

# Per-backend defaults: gloo on a lab node moves ~1 GB/s, so its sweep stops earlier.
_DEFAULTS = {
    "nccl": {"min_bytes": 1 << 20, "max_bytes": 1 << 30, "warmup": 5, "iters": 20},
    "gloo": {"min_bytes": 1 << 16, "max_bytes": 64 << 20, "warmup": 2, "iters": 5},
}


def bus_factor(world_size: int) -> float:
    """all_reduce moves 2(n-1)/n of the buffer over each rank's link (nccl-tests' factor)."""
    return 2.0 * (world_size - 1) / world_size


def size_sweep(min_bytes: int, max_bytes: int, factor: int, elem_size: int) -> list[int]:
    """Byte sizes from min to max (both kept), each a whole number of elements."""
    if min_bytes <= 0 or max_bytes < min_bytes:
        raise ValueError(f"bad sweep: min {min_bytes} max {max_bytes}")
    if factor < 2:
        raise ValueError(f"sweep factor must be >= 2, got {factor}")
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(max(elem_size, size - size % elem_size))
        size *= factor
    last = max(elem_size, max_bytes - max_bytes % elem_size)
    if sizes[-1] != last:
        sizes.append(last)
    return sizes


def parse_bytes(text: str) -> int:
    """'64M', '1G', '4096', '512K' -> bytes (binary units, as nccl-tests' -b/-e)."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if mult != 1 else text
    try:
        return int(float(number) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None


def rates(nbytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one all_reduce of nbytes that took seconds."""
    if seconds <= 0:
        raise ValueError(f"non-positive time {seconds} for {nbytes} bytes")
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * bus_factor(world_size)


def _env_snapshot() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)}


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rdmaprov-worker",
        description="all_reduce size sweep; rank 0 prints one JSON document on stdout.",
    )
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                   help="auto: nccl when CUDA is available, else gloo")
    p.add_argument("--min-bytes", type=parse_bytes, default=None)
    p.add_argument("--max-bytes", type=parse_bytes, default=None)
    p.add_argument("--factor", type=int, default=2, help="size multiplier between steps")
    p.add_argument("--warmup", type=int, default=None, help="untimed iterations per size")
    p.add_argument("--iters", type=int, default=None, help="timed iterations per size")
    p.add_argument("--dtype", choices=sorted(_DTYPES), default="float32")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds for rendezvous and for any one collective")
    # Explicit rendezvous, for runs without torchrun; torchrun's env:// is the default.
    p.add_argument("--master-addr")
    p.add_argument("--master-port", type=int)
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--local-rank", type=int)
    p.add_argument("--pairs", choices=("never", "auto", "slow", "always"), default="never",
                   help="pair rounds after the fabric sweep: auto when the fabric is below the "
                   "bar or no bar is known, slow only when below it (3+ hosts)")
    # No defaults of its own: the launch passes the settings' (ranges.SETTINGS, one place).
    p.add_argument("--pair-fraction", type=float, default=None,
                   help="a pair is slow below this fraction of the best pair (needed with "
                   "--pairs)")
    p.add_argument("--bw-fraction", type=float, default=None,
                   help="the bar: this fraction of the slowest host's line rate (nccl; without "
                   "it, and without --min-busbw, the pair rounds have the relative rule only)")
    p.add_argument("--min-busbw", type=float, default=None, help="an explicit bar in GB/s")
    p.add_argument("--max-jitter", type=float, default=None,
                   help="unstable above this p99/p50 of the iteration times at the large sizes "
                   "(rounds.DEFAULT_MAX_JITTER); an unstable fabric gets pair rounds too")
    p.add_argument("--pair-sizes", type=int, default=2,
                   help="the pair sweep: the sweep's largest N sizes")
    p.add_argument("--rails-dir",
                   help="run the rail round (ib_write_bw per rail-aligned HCA port pair, "
                   "rounds.rail_plan) after the sweep and leave each rail's output, or why this "
                   "host has none (a 'skipped' file), in this directory on each host")
    p.add_argument("--rail-cuda", action="store_true",
                   help="the rail round's buffers in GPU memory (ib_write_bw --use_cuda, a "
                   "perftest built with CUDA): GPUDirect RDMA per rail")
    p.add_argument("--preflight", action="store_true",
                   help="print what this host/image offers (RDMA userspace, HCAs, torch, libuv) "
                        "as one JSON document and exit; nothing is timed")
    p.add_argument("--no-watchdog", action="store_true",
                   help="run without the watchdog process (tests, debugging)")
    return p


# --- pre-flight: the usual reasons NCCL falls back to Socket, read before NCCL starts ---------

_SYS_IB = "/sys/class/infiniband"


def _can_load(names: tuple[str, ...]) -> str | None:
    """The first of these shared libraries this process can dlopen, or None."""
    import ctypes

    for name in names:
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            continue
    return None


def _verbs_device_count(name: str) -> int | None:
    """How many devices libibverbs lists (ibv_get_device_list): a device appears only when a
    provider for it loads, so fewer than /sys/class/infiniband has means a missing provider."""
    import ctypes

    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    count = ctypes.c_int(0)
    lib.ibv_get_device_list.restype = ctypes.c_void_p
    lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.ibv_free_device_list.argtypes = [ctypes.c_void_p]
    devices = lib.ibv_get_device_list(ctypes.byref(count))
    if not devices:
        return 0
    lib.ibv_free_device_list(devices)
    return int(count.value)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


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


def _ib_ports(root: str = _SYS_IB) -> list[dict[str, Any]]:
    return list(_ports().ports(root, with_counters=False))


def hca_filter_matches(spec: str, devices: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Which (device, port) NCCL_IB_HCA selects, following NCCL's syntax: comma-separated
    names with optional :port; a leading '^' excludes the listed ones, a leading '=' asks
    for exact names (otherwise a name matches every device it is a prefix of)."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    spec = spec.lstrip("=")
    wanted = []
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, _, port = item.partition(":")
        wanted.append((name, int(port) if port.isdecimal() else None))

    def hit(dev: str, port: int) -> bool:
        return any((dev == n if exact else dev.startswith(n)) and (p is None or p == port)
                   for n, p in wanted)

    return [(d, p) for d, p in devices if hit(d, p) != exclude]


def preflight(root: str = _SYS_IB, dev: str = "/dev/infiniband") -> dict[str, Any]:
    """What this host (or container) offers NCCL's IB transport, and what stands in its way.

    ``problems`` are one-line causes that make NCCL fall back to Socket or run without GDR;
    the verdict quotes them when NCCL's log shows the fallback.
    """
    import resource

    problems: list[str] = []
    verbs = _can_load(("libibverbs.so.1", "libibverbs.so"))
    if verbs is None:
        problems.append("no libibverbs.so.1 in this image/host: NCCL cannot use IB")
    uverbs = sorted(d for d in (os.listdir(dev) if os.path.isdir(dev) else [])
                    if d.startswith("uverbs"))
    if not uverbs:
        problems.append(f"no {dev}/uverbs*: RDMA devices not passed in "
                        "(container: --device /dev/infiniband) or none on the host")
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    memlock = "unlimited" if soft == resource.RLIM_INFINITY else soft
    if memlock != "unlimited":
        problems.append(f"ulimit -l is {soft // 1024} KiB, not unlimited "
                        "(container: --ulimit memlock=-1)")
    ports = _ib_ports(root)
    hcas = sorted(os.listdir(root)) if os.path.isdir(root) else []
    verbs_devices = _verbs_device_count(verbs) if verbs and hcas else None
    if verbs_devices is not None and verbs_devices < len(hcas):
        problems.append(f"libibverbs lists {verbs_devices} of {len(hcas)} HCA(s): no provider "
                        "for the others in this image/host")
    active = [(p["device"], p["port"]) for p in ports if p["state"] == "ACTIVE"]
    if not ports:
        problems.append(f"no RDMA device in {root}")
    elif not active:
        problems.append("no ACTIVE RDMA port")
    if os.environ.get("NCCL_IB_DISABLE", "0").strip() not in ("", "0"):
        problems.append(f"NCCL_IB_DISABLE={os.environ['NCCL_IB_DISABLE']} turns IB off")
    hca = os.environ.get("NCCL_IB_HCA")
    if hca and active and not hca_filter_matches(hca, active):
        problems.append(f"NCCL_IB_HCA={hca} matches no ACTIVE port "
                        f"({', '.join(f'{d}:{p}' for d, p in active)})")
    peermem = next((m for m in ("nvidia_peermem", "nv_peer_mem")
                    if os.path.isdir(f"/sys/module/{m}")), None)
    return {
        "hostname": socket.gethostname(),
        "libibverbs": verbs,
        "librdmacm": _can_load(("librdmacm.so.1", "librdmacm.so")),
        "uverbs_devices": uverbs,
        "hcas": hcas,
        "verbs_devices": verbs_devices,
        "memlock": memlock,
        "ports": ports,
        "nccl_ib_disable": os.environ.get("NCCL_IB_DISABLE"),
        "nccl_ib_hca": hca,
        # GDR needs peermem, or DMA-BUF (newer kernels and drivers), which NCCL logs itself.
        "peermem_module": peermem,
        "problems": problems,
    }


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


def _cpu_jiffies() -> tuple[int, int, int] | None:
    """(busy, total, cpus) from /proc/stat's first line: busy excludes idle and iowait."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    fields = [int(x) for x in lines[0].split()[1:]]
    cpus = sum(1 for ln in lines if ln.startswith("cpu") and ln[3:4].isdigit())
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is already counted in user/nice: the first 8 fields are the whole.
    total = sum(fields[:8])
    return total - idle, total, cpus


def busy_cores(before: tuple[int, int, int] | None,
               after: tuple[int, int, int] | None) -> float | None:
    """Cores busy on this host between two /proc/stat reads (host-wide, every process)."""
    if not before or not after or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / ((after[1] - before[1]) / after[2])


class _Ctx:
    """What one rank knows about itself once the process group is up."""

    def __init__(self, torch: Any, dist: Any, backend: str, rank: int, world: int,
                 local_rank: int, group: Any = None) -> None:
        self.torch, self.dist, self.backend = torch, dist, backend
        self.rank, self.world, self.local_rank = rank, world, local_rank
        self.group = group  # None: the whole job; else a subgroup (a pair of hosts)
        self.device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")

    def sub(self, group: Any) -> _Ctx:
        """This rank inside ``group``: its rank and size there."""
        return _Ctx(self.torch, self.dist, self.backend, self.dist.get_rank(group),
                    self.dist.get_world_size(group), self.local_rank, group)

    def sync(self) -> None:
        if self.backend == "nccl":
            self.torch.cuda.synchronize(self.device)


class CannotStart(RuntimeError):
    """This host cannot run the worker at all (exit RC_CANNOT_START): not a peer's fault."""


def _init(args: argparse.Namespace) -> _Ctx:
    progress("import torch")
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise CannotStart(f"torch is not importable: {exc}") from None

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl" and not torch.cuda.is_available():
        raise CannotStart("backend nccl asked for, but torch sees no CUDA device")

    env = os.environ
    rank = args.rank if args.rank is not None else int(env.get("RANK", "0"))
    world = args.world_size if args.world_size is not None else int(env.get("WORLD_SIZE", "1"))
    local_rank = (args.local_rank if args.local_rank is not None
                  else int(env.get("LOCAL_RANK", "0")))
    timeout = _dt.timedelta(seconds=args.timeout)
    kwargs: dict[str, Any] = {"backend": backend, "rank": rank, "world_size": world,
                              "timeout": timeout}
    if args.master_addr:
        port = args.master_port or int(env.get("MASTER_PORT", "29500"))
        kwargs["init_method"] = f"tcp://{args.master_addr}:{port}"
    else:
        kwargs["init_method"] = "env://"
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", "29500")
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        # device_id makes NCCL set up its communicator now, so a transport failure shows here
        # and not inside the first timed collective.
        kwargs["device_id"] = torch.device("cuda", local_rank)
    progress(f"rendezvous at {kwargs['init_method']}")
    try:
        dist.init_process_group(**kwargs)
    except RuntimeError as exc:
        if "without libuv" in str(exc):
            raise CannotStart(f"{one_line(exc)} (set USE_LIBUV=0, or use the direct "
                              "launcher)") from None
        why = own_network_failure(str(exc))
        if why:
            raise CannotStart(f"{one_line(exc)} ({why})") from None
        raise
    return _Ctx(torch, dist, backend, rank, world, local_rank)


# connect(2)'s ENETUNREACH: this host's own routing table has no route to the peer's network
# (its fabric interface down or without its address), found before any packet leaves. Not
# EHOSTUNREACH ("No route to host"), which a host also gets when the *peer* is gone.
_OWN_NETWORK = ("Network is unreachable",)


def own_network_failure(text: str) -> str:
    """Why a failed rendezvous is this host's own doing, or '': its fabric network is not
    reachable from here at all. Such a host cannot join (exit 2), so the launch stops its peers
    at once instead of leaving them to wait out their timeouts in their own names (issue 23:
    a node cut off the fabric got its three peers killed by their watchdogs, 157 s after the
    launch, each named as hung)."""
    if any(marker in text for marker in _OWN_NETWORK):
        return "this host has no route to its peers' network: its fabric interface is down " \
               "or has no address"
    return ""


def _node_rank(ctx: _Ctx) -> int:
    for name in ("GROUP_RANK", "NODE_RANK"):
        v = os.environ.get(name, "")
        if v.isdecimal():
            return int(v)
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    return ctx.rank // (int(local) if local.isdecimal() and int(local) > 0 else 1)


def _rank_info(ctx: _Ctx) -> dict[str, Any]:
    info: dict[str, Any] = {
        "rank": ctx.rank,
        "local_rank": ctx.local_rank,
        "hostname": socket.gethostname(),
        # The node (launch host) this rank runs on: torchrun's GROUP_RANK (its --node-rank),
        # else rank // local world size. Hosts are told apart by it, never by hostname: fresh
        # nodes all say localhost, and containers share their host's name.
        "node": _node_rank(ctx),
        "pid": os.getpid(),
    }
    if ctx.backend == "nccl":
        info["device"] = ctx.torch.cuda.get_device_name(ctx.device)
    return info


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


def _versions(torch: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "nccl": None}
    if torch.cuda.is_available():
        # A build without NCCL raises here; the key then stays null.
        with contextlib.suppress(Exception):
            out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of values, interpolated between the two nearest ranks (numpy's
    default). With fewer than 100 iterations p99 lies between the two slowest."""
    v = sorted(values)
    if not v:
        raise ValueError("no values")
    k = (len(v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def iteration_stats(per_iter_s: list[float]) -> dict[str, Any]:
    """p50/p99/max of one size's iteration times, in microseconds."""
    return {"n": len(per_iter_s),
            "p50_us": round(percentile(per_iter_s, 50) * 1e6, 3),
            "p99_us": round(percentile(per_iter_s, 99) * 1e6, 3),
            "max_us": round(max(per_iter_s) * 1e6, 3)}


def _time_size(ctx: _Ctx, nbytes: int, dtype: Any, elem: int, warmup: int, iters: int,
               check: bool, cpu: dict[str, Any] | None = None,
               ) -> tuple[float, bool, list[float]]:
    """Mean seconds per all_reduce of nbytes on this rank, whether the sum was right, and each
    iteration's seconds. nccl: a CUDA event between iterations (recorded on the stream, no host
    sync inside the loop); gloo: the monotonic perf_counter around each blocking call. With
    ``cpu`` (a dict), the host's busy cores during the timed loop are put in it."""
    torch, dist = ctx.torch, ctx.dist
    count = nbytes // elem
    buf = torch.full((count,), float(ctx.rank + 1), dtype=dtype, device=ctx.device)
    correct = True
    if check:
        # One checked reduction: each rank holds rank+1, so every element must be n(n+1)/2.
        dist.all_reduce(buf, group=ctx.group)
        expected = ctx.world * (ctx.world + 1) / 2
        correct = bool(torch.all(buf == expected).item())
    # Zeros for the timed loop so that repeated in-place sums never overflow to inf.
    buf.zero_()
    for _ in range(warmup):
        dist.all_reduce(buf, group=ctx.group)
    ctx.sync()
    dist.barrier(group=ctx.group)
    cpu_before = _cpu_jiffies() if cpu is not None else None
    if ctx.backend == "nccl":
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        marks[0].record()
        for i in range(iters):
            dist.all_reduce(buf, group=ctx.group)
            marks[i + 1].record()
        marks[-1].synchronize()
        per_iter = [marks[i].elapsed_time(marks[i + 1]) / 1e3 for i in range(iters)]
        seconds = marks[0].elapsed_time(marks[-1]) / 1e3 / iters
    else:
        stamps = [time.perf_counter()]
        for _ in range(iters):
            dist.all_reduce(buf, group=ctx.group)
            stamps.append(time.perf_counter())
        per_iter = [stamps[i + 1] - stamps[i] for i in range(iters)]
        seconds = (stamps[-1] - stamps[0]) / iters
    if cpu is not None:
        after = _cpu_jiffies()
        cores = busy_cores(cpu_before, after)
        cpu.update({"bytes": nbytes, "busy_cores": None if cores is None else round(cores, 3),
                    "cpus": after[2] if after else None})
    del buf
    return seconds, correct, per_iter


def sweep(ctx: _Ctx, sizes: list[int], dtype_name: str, warmup: int,
          iters: int, cpu: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per size: the slowest rank's time, algbw, busbw, whether the sum was right, and
    the distribution of the iterations (each iteration's time is the slowest rank's in it).
    ``cpu`` gets this host's busy cores during the largest size's timed loop."""
    torch, dist = ctx.torch, ctx.dist
    elem = _DTYPES[dtype_name]
    dtype = getattr(torch, dtype_name)
    rows = []
    for nbytes in sizes:
        progress(f"all_reduce of {nbytes} bytes")
        seconds, correct, per_iter = _time_size(ctx, nbytes, dtype, elem, warmup, iters,
                                                check=True,
                                                cpu=cpu if nbytes == sizes[-1] else None)
        # The slowest rank's time is the collective's time; the mean is kept for comparison.
        stats = torch.tensor([seconds, seconds, 0.0 if correct else 1.0],
                             dtype=torch.float64, device=ctx.device)
        mx = stats.clone()
        dist.all_reduce(mx, op=dist.ReduceOp.MAX, group=ctx.group)
        dist.all_reduce(stats, op=dist.ReduceOp.SUM, group=ctx.group)
        each = torch.tensor(per_iter, dtype=torch.float64, device=ctx.device)
        dist.all_reduce(each, op=dist.ReduceOp.MAX, group=ctx.group)
        each_s = [float(x) for x in each.tolist()]
        t_max, t_avg = mx[0].item(), stats[1].item() / ctx.world
        algbw, busbw = rates(nbytes, t_max, ctx.world)
        rows.append({
            "bytes": nbytes,
            "count": nbytes // elem,
            "time_us": round(t_max * 1e6, 3),
            "time_us_avg": round(t_avg * 1e6, 3),
            # Significant digits, not decimals: a slow link (a lab, a throttled port) must
            # keep its relative precision.
            "algbw_GBps": float(f"{algbw:.6g}"),
            "busbw_GBps": float(f"{busbw:.6g}"),
            "correct": mx[2].item() == 0.0,
            # Every iteration (the slowest rank's time in it) and its p50/p99/max: a fabric
            # that pauses or retransmits shows here while its mean may pass.
            "iter_us": iteration_stats(each_s),
            "iters_us": [round(x * 1e6, 3) for x in each_s],
        })
    return rows


# --- pair rounds in the same processes ----------------------------------------------------------

def _rounds() -> Any:
    """rounds.py from beside this file: the package's own copy when run as a module, the copy
    the launch puts next to worker.py on a host."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import rounds  # type: ignore[import-not-found,unused-ignore]

    return rounds


def line_rate_bar(ranks: list[dict[str, Any]], backend: str, bw_fraction: float | None,
                  min_busbw: float | None) -> float | None:
    """The bar the workers plan with: --min-busbw, or bw_fraction x the slowest host's ACTIVE
    ports (nccl only; the control host's judge narrows to the HCAs NCCL named)."""
    if min_busbw:
        return min_busbw
    if backend != "nccl":
        return None
    if bw_fraction is None:
        return None
    rates: dict[str, float | None] = {}
    for r in ranks:
        ports = (r.get("preflight") or {}).get("ports") or []
        rates[str(r.get("node", r["hostname"]))] = sum(
            float(p.get("rate_gbps") or 0) for p in ports if p.get("state") == "ACTIVE") / 8
    slowest = _rounds().line_rate_bar(rates, bw_fraction)
    return slowest[1] if slowest else None


def want_pairs(mode: str, nhosts: int, peak: float | None, bar: float | None,
               unstable: bool = False) -> tuple[bool, str]:
    if nhosts < 3:
        return False, f"{nhosts} hosts: a pair is the whole fabric"
    slow = bar is not None and (peak is None or peak < bar)
    if mode == "always":
        return True, "asked for (always)"
    if mode in ("auto", "slow") and unstable:
        return True, "the fabric is unstable (p99/p50 of its iterations above the limit)"
    if mode == "auto" and (bar is None or slow):
        return True, "no bar known" if bar is None else "the fabric is below the bar"
    if mode == "slow" and slow:
        return True, "the fabric is below the bar"
    return False, f"not needed ({mode}: the fabric is at or above the bar)" if mode != "never" \
        else "not asked for"


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


def pair_rounds(ctx: _Ctx, args: argparse.Namespace, ranks: list[dict[str, Any]],
                sizes: list[int], warmup: int, iters: int, bar: float | None,
                ) -> list[dict[str, Any]]:
    """Rounds 1-2 on the ring, then confirm rounds while they settle something (at most 4):
    rounds.run_rounds drives them; each step's pairs run here at once."""
    R = _rounds()
    hosts, host_ranks, hostname = _hosts_of(ranks)
    me = f"node{_node_rank(ctx)}"
    out: list[dict[str, Any]] = []

    def measure(number: int, step_no: int, step: list[tuple[str, str]],
                ) -> dict[tuple[str, str], float | None]:
        progress(f"pair round {number} step {step_no}: {len(step)} pairs")
        groups = [host_ranks[a] + host_ranks[b] for a, b in step]
        mine, _ = ctx.dist.new_subgroups_by_enumeration(
            groups, timeout=_dt.timedelta(seconds=args.timeout))
        entry: dict[str, Any] = {}
        pair = next((p for p in step if me in p), None)
        if mine is not None and pair is not None:
            sub = ctx.sub(mine)
            try:
                rows = sweep(sub, sizes, args.dtype, warmup, iters)
                ok = all(r["correct"] for r in rows)
                bw = max(r["busbw_GBps"] for r in rows) if ok else None
                err = None if ok else "all_reduce returned a wrong sum"
            except Exception as exc:  # a pair that fails is a figure, not the end of the run
                rows, bw, err = [], None, one_line(exc)
            if sub.rank == 0 or err:
                entry = {"round": number, "step": step_no,
                         "hosts": [hostname[k] for k in pair],
                         "nodes": [int(k[4:]) for k in pair],
                         "busbw_GBps": bw, "error": err, "results": rows}
            ctx.dist.destroy_process_group(mine)
        figures: dict[tuple[str, str], float | None] = {}
        for e in _gather_json(ctx, entry):
            if not e:
                continue
            a, b = (f"node{n}" for n in e["nodes"])
            # Both ends report a pair that failed (either may hold the error): the error wins.
            if (a, b) not in figures or e.get("error"):
                figures[(a, b)] = e["busbw_GBps"]
                out[:] = [o for o in out if o["nodes"] != e["nodes"]] + [e]
        return figures

    R.run_rounds(hosts, measure,
                 lambda figures: R.slow_pairs(figures, bar, args.pair_fraction)[0])
    return sorted(out, key=lambda e: (e["round"], e["step"], e["nodes"]))


# --- the rail round: ib_write_bw per rail-aligned HCA port pair --------------------------------
# rounds.rail_plan decides who meets whom (the one plan); here the same processes run it. Each
# host's first rank takes part (one ib_write_bw per rail, not per GPU); every other rank only
# joins the collectives, so all ranks make the same calls in the same order. A round: the
# servers start and listen, a barrier, the clients run (all rails of a pair at once, each on its
# own TCP port), and the clients' outputs are gathered so that the server side keeps the same
# figure under its own HCA's name: a rail's ib_write_bw figure is the figure of both its ends.
# Each end keeps every figure it took part in, one file per rail and round (rounds.rail_file:
# <hca>.port<N>.round<R>.log); the summary names each round's two ends (hostnames and node
# ranks), so the judge weighs each end against all its partners (verdict.rail_blame).

_RAIL_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")  # what the judge reads back (judge._RAIL_FILE)
RAIL_START_S = 15.0  # a server not listening by then: its client fails, and its output says so
RAIL_GRACE_S = 30.0  # past -D: connection, memory registration, CUDA init (--use_cuda)
RAIL_EXIT = "rdmaprov: ib_write_bw exit status"  # the last line of a rail's output (the judge's)
RAIL_TEXT_MAX = 16000  # characters of one rail's output gathered (its table is at the end)


def _reach_addr(args: argparse.Namespace) -> str:
    """This host's address as its peers reach it: the source address of the route towards the
    rendezvous host (a UDP connect sends nothing). The rendezvous host gets its own address."""
    master = args.master_addr or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    port = args.master_port or int(os.environ.get("MASTER_PORT") or 29500)
    family = socket.AF_INET6 if ":" in master else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((master, port))
        return str(s.getsockname()[0])


def _listening(port: int) -> bool:
    """Is a TCP socket of this network namespace listening on ``port`` (/proc/net/tcp{,6})?"""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 3 and cols[3] == "0A" and cols[1].rsplit(":", 1)[-1] == f"{port:04X}":
                return True
    return False


def roce_gid_index(hca: str, port: int, root: str | None = None) -> int | None:
    """The GID index ib_write_bw needs (-x) on a RoCE port (rdma_ports.roce_gid_index)."""
    return _ports().roce_gid_index(root or _SYS_IB, hca, port)


def _start(argv: list[str], out: str) -> tuple[Any, Any] | None:
    """Start one ib_write_bw, its output in the file ``out``: (process, file), or None when it
    cannot start (the reason is then in the file)."""
    import subprocess

    f = open(out, "w")  # noqa: SIM115 (closed by _finish)
    f.write("rdmaprov: " + " ".join(argv) + "\n")
    f.flush()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        f.write(f"{RAIL_EXIT} not started: {one_line(exc)}\n")
        f.close()
        return None
    return proc, f


def _finish(started: tuple[Any, Any] | None, deadline: float) -> int | None:
    """Wait for a started ib_write_bw until ``deadline`` (monotonic), kill it past that. Its
    exit code; None when it never started or had to be killed (written into its output)."""
    import signal
    import subprocess

    if started is None:
        return None
    proc, f = started
    try:
        rc = int(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
        # The judge reads this line: a rail whose ib_write_bw failed is never a pass, whatever
        # its output holds.
        f.write(f"\n{RAIL_EXIT} {rc}\n")
        return rc
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        f.write(f"\n{RAIL_EXIT} killed: no end within its time (the peer never came, or hung)\n")
        return None
    finally:
        f.close()


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-RAIL_TEXT_MAX:]
    except OSError as exc:
        return f"rdmaprov: cannot read {path}: {one_line(exc)}\n"


def rail_round(ctx: _Ctx, args: argparse.Namespace, ranks: list[dict[str, Any]],
               rails_dir: str) -> dict[str, Any]:
    """Run rounds.rail_plan's rounds (<= 2) and leave, in ``rails_dir`` on each host, one
    ``<hca>.port<N>.round<R>.log`` per rail and round it took part in (rounds.rail_file: the
    client's ib_write_bw output on both ends, the judge's figure) or a ``skipped`` file with the
    plan's reason. Returns the summary for the document."""
    R = _rounds()
    hosts, host_ranks, hostname = _hosts_of(ranks)
    first = {h: min(rs) for h, rs in host_ranks.items()}
    by_rank = {int(r["rank"]): r for r in ranks}
    ports = {h: (by_rank[first[h]].get("preflight") or {}).get("ports") for h in hosts}
    plan = R.rail_plan(hosts, ports)
    me = f"node{_node_rank(ctx)}"
    lead = ctx.rank == first.get(me)
    if lead:
        os.makedirs(rails_dir, exist_ok=True)
        if me in plan.skipped:
            with open(os.path.join(rails_dir, "skipped"), "w") as f:
                f.write(plan.skipped[me] + "\n")
    summary: dict[str, Any] = {
        "ran": bool(plan.rounds), "rounds": len(plan.rounds), "rails": [],
        "skipped": {hostname[h]: why for h, why in plan.skipped.items()}}
    if not plan.rounds:
        return summary
    progress("rail round: addresses")
    mine, why = "", ""
    if lead:
        try:
            mine = _reach_addr(args)
        except (OSError, ValueError) as exc:  # no route: the clients of this server say so
            why = one_line(exc)
    known = _gather_json(ctx, {"node": me, "addr": mine, "why": why})
    addr = {e["node"]: e["addr"] for e in known if e.get("addr")}
    no_addr = {e["node"]: e["why"] for e in known if e.get("why")}
    cuda = ctx.local_rank if args.rail_cuda and ctx.backend == "nccl" else None
    for number, pairs in enumerate(plan.rounds, 1):
        progress(f"rail round {number}: {len(pairs)} host pairs")
        serve = next((p for p in pairs if p.server == me), None) if lead else None
        call = next((p for p in pairs if p.client == me), None) if lead else None
        servers = []
        if serve is not None:
            for k, (_, (hca, port)) in enumerate(serve.rails):
                if not _RAIL_NAME.match(hca):
                    continue
                argv = R.rail_argv(hca, port, k, cuda_device=cuda,
                                   gid_index=roce_gid_index(hca, port))
                out = os.path.join(rails_dir, f"{hca}.port{int(port)}.round{number}.server")
                servers.append((k, hca, port, _start(argv, out)))
            until = time.monotonic() + RAIL_START_S
            while time.monotonic() < until and not all(
                    s is None or s[0].poll() is not None or _listening(R.RAIL_BASE_PORT + k)
                    for k, _, _, s in servers):
                time.sleep(0.1)
        progress(f"rail round {number}: barrier")
        ctx.dist.barrier()  # every server of the round listens (or has failed) before a client
        done: list[dict[str, Any]] = []
        if call is not None:
            progress(f"rail round {number}: clients")
            clients: list[tuple[int, str, int, str, int, str, float, Any]] = []
            for k, ((hca, port), (peer_hca, peer_port)) in enumerate(call.rails):
                if not _RAIL_NAME.match(hca) or not _RAIL_NAME.match(peer_hca):
                    continue
                out = os.path.join(rails_dir, R.rail_file(hca, port, number))
                t0 = time.monotonic()
                server_addr = addr.get(call.server)
                if not server_addr:  # never a default address: it could reach a local server
                    with open(out, "w") as f:
                        f.write(f"{RAIL_EXIT} not started: no address for "
                                f"{hostname[call.server]} (its route to the rendezvous host: "
                                f"{no_addr.get(call.server) or 'unknown'})\n")
                    clients.append((k, hca, port, peer_hca, peer_port, out, t0, None))
                    continue
                argv = R.rail_argv(hca, port, k, server_addr=server_addr, cuda_device=cuda,
                                   gid_index=roce_gid_index(hca, port))
                clients.append((k, hca, port, peer_hca, peer_port, out, t0, _start(argv, out)))
            until = time.monotonic() + R.RAIL_SECONDS + RAIL_GRACE_S
            for k, hca, port, peer_hca, peer_port, out, t0, started in clients:
                rc = _finish(started, until)
                done.append({"round": number, "rail": k, "client": hostname[me],
                             "server": hostname[call.server], "node": me,
                             "server_node": call.server,
                             # node ranks (client, server): the judge's inventory names
                             "nodes": [int(me[4:]), int(call.server[4:])],
                             "client_port": f"{hca}:{port}",
                             "server_port": f"{peer_hca}:{peer_port}",
                             "rc": rc, "seconds": round(time.monotonic() - t0, 3),
                             "text": _tail(out)})
        progress(f"rail round {number}: servers end")
        # The server side: its own processes end with their client (or are killed), and it
        # keeps the client's output under its own HCA's name and the round's (a host is in one
        # pair a round, so this never meets a file of its own client's).
        until = time.monotonic() + R.RAIL_SECONDS + RAIL_GRACE_S
        for _, _, _, started in servers:
            _finish(started, until)
        got = [e for g in _gather_json(ctx, {"rails": done}) for e in g.get("rails", [])]
        if serve is not None:
            for k, hca, port, _ in servers:
                e = next((e for e in got if e["node"] == serve.client and e["rail"] == k), None)
                path = os.path.join(rails_dir, R.rail_file(hca, port, number))
                with open(path, "w") as f:
                    f.write(f"rdmaprov: server side of the rail {serve.rails[k][0][0]}:"
                            f"{serve.rails[k][0][1]} on {hostname[serve.client]} -> "
                            f"{hca}:{port} here; the client's output follows\n")
                    f.write(e["text"] if e else "rdmaprov: no output from the client\n")
        summary["rails"] += [{k: v for k, v in e.items() if k not in ("text", "node",
                                                                       "server_node")}
                             for e in got]
    return summary


def run(args: argparse.Namespace) -> dict[str, Any]:
    t_start = time.perf_counter()
    # timezone.utc, not datetime.UTC: images may carry a Python older than 3.11.
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")  # noqa: UP017
    checks = preflight()
    ctx = _init(args)
    defaults = _DEFAULTS[ctx.backend]
    min_b = args.min_bytes if args.min_bytes is not None else defaults["min_bytes"]
    max_b = args.max_bytes if args.max_bytes is not None else defaults["max_bytes"]
    warmup = args.warmup if args.warmup is not None else defaults["warmup"]
    iters = args.iters if args.iters is not None else defaults["iters"]
    try:
        if iters < 1 or warmup < 0:
            raise ValueError(f"need iters >= 1 and warmup >= 0, got {iters}, {warmup}")
        sizes = size_sweep(min_b, max_b, args.factor, _DTYPES[args.dtype])
        progress("exchange of rank info")
        ranks = _gather_json(ctx, {**_rank_info(ctx), "preflight": checks})
        cpu: dict[str, Any] = {}
        rows = sweep(ctx, sizes, args.dtype, warmup, iters, cpu)
        progress("exchange of CPU figures")
        cpus = _gather_json(ctx, {"hostname": socket.gethostname(),
                                  "local_rank": ctx.local_rank, "cpu": cpu})
        bar = line_rate_bar(ranks, ctx.backend, args.bw_fraction, args.min_busbw)
        peak = max((r["busbw_GBps"] for r in rows), default=None)
        nhosts = len({r["node"] for r in ranks})
        unstable = False
        if args.pairs in ("auto", "slow") and nhosts >= 3:  # rounds.py only when pairs may run
            R = _rounds()
            limit = R.DEFAULT_MAX_JITTER if args.max_jitter is None else args.max_jitter
            unstable = R.unstable(rows, limit)
        run_pairs, why = want_pairs(args.pairs, nhosts, peak, bar, unstable)
        pairs: list[dict[str, Any]] = []
        if run_pairs:
            pair_sizes = sizes[-max(1, args.pair_sizes):]
            pairs = pair_rounds(ctx, args, ranks, pair_sizes, warmup, iters, bar)
        rails: dict[str, Any] = {"ran": False, "why": "not asked for (no --rails-dir)"}
        if args.rails_dir:
            t_rails = time.perf_counter()
            rails = rail_round(ctx, args, ranks, args.rails_dir)
            rails["elapsed_s"] = round(time.perf_counter() - t_rails, 3)
        progress("barrier")
        ctx.dist.barrier()
    finally:
        progress("teardown")
        ctx.dist.destroy_process_group()

    doc = {
        "schema": SCHEMA,
        "ok": all(r["correct"] for r in rows),
        "error": None if all(r["correct"] for r in rows) else "all_reduce returned a wrong sum",
        "backend": ctx.backend,
        "world_size": ctx.world,
        "versions": _versions(ctx.torch),
        "ranks": ranks,
        "hosts": sorted({r["hostname"] for r in ranks}),
        # One pre-flight per host (its ranks share devices, limits and image).
        "preflight": {r["hostname"]: r.pop("preflight") for r in ranks},
        "sweep": {"min_bytes": min_b, "max_bytes": max_b, "factor": args.factor,
                  "warmup": warmup, "iters": iters, "dtype": args.dtype,
                  "timing": "cuda_events" if ctx.backend == "nccl" else "perf_counter"},
        "results": rows,
        # Per host: cores busy (every process, from /proc/stat) during the largest size's timed
        # loop: what a TCP transport costs in CPU next to RDMA.
        "cpu": {c["hostname"]: c["cpu"] for c in sorted(cpus, key=lambda c: -c["local_rank"])},
        # Pair rounds run in these processes (round, step, hosts, peak busbw or the error).
        "pair_plan": {"mode": args.pairs, "ran": run_pairs, "why": why, "bar_GBps": bar},
        "pairs": pairs,
        # The rail round (rounds.rail_plan): each rail's client, server, exit code and seconds;
        # the figures are the files in --rails-dir, which the judge reads.
        "rails": rails,
        "notes": (["1 rank: all_reduce moves no data between ranks, so algbw here is not a "
                   "link figure and busbw is 0 by its formula"] if ctx.world == 1 else []),
        "env": _env_snapshot(),
        "started_utc": started,
        "elapsed_s": None,
    }
    doc["elapsed_s"] = round(time.perf_counter() - t_start, 3)
    return doc


def _claim_stdout() -> Any:
    """Keep the real stdout for the JSON document alone; send fd 1 to stderr.

    NCCL writes its NCCL_DEBUG log to the C stdout unless NCCL_DEBUG_FILE is set (seen on
    NCCL 2.28.9: the log and the document came out interleaved), and so may any other
    library. After this, all of that lands on stderr, where the launcher keeps NCCL's log.
    """
    sys.stdout.flush()
    doc_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(doc_fd, "w")


def one_line(exc: BaseException) -> str:
    """The most telling line of an error: NCCL's 'Last error:' when torch wraps one."""
    text = str(exc).strip()
    if "Last error:" in text:
        text = text.split("Last error:", 1)[1].strip()
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    try:
        parser = _build_parser()
        args = parser.parse_args(argv)
        if args.pairs != "never" and args.pair_fraction is None:
            parser.error("--pairs needs --pair-fraction (the launch passes the setting's)")
        if not args.preflight:
            global _STEP_RANK
            _STEP_RANK = args.rank
            step("start")
    except SystemExit as exc:  # bad arguments: this host cannot start (argparse exits 2)
        _record_exit(exc.code if isinstance(exc.code, int) else RC_CANNOT_START)
        raise
    if args.preflight:
        print(json.dumps(preflight_document(args.backend), indent=1), flush=True)
        return 0
    code = _supervise(args) if not args.no_watchdog else _worker(args)
    _record_exit(code)
    return code


def _record_exit(code: int) -> None:
    """Leave this rank's exit code where the launch reads it (RDMAPROV_WORKER_RC_DIR): torchrun
    reports any failed worker as its own exit 1, which would hide a 2 or a 3."""
    where = os.environ.get("RDMAPROV_WORKER_RC_DIR")
    if where:
        with contextlib.suppress(OSError), open(
                os.path.join(where, f"worker-rc.{os.environ.get('RANK', '0')}"), "w") as f:
            f.write(f"{code}\n")
    step(f"exit {code}")


def _worker(args: argparse.Namespace) -> int:
    out = _claim_stdout()
    rank = _rank_of(args)
    try:
        doc = run(args)
    except Exception as exc:
        err = {"schema": SCHEMA, "ok": False, "rank": rank, "hostname": socket.gethostname(),
               "error": one_line(exc), "detail": str(exc), "preflight": _safe_preflight()}
        _destroy_quietly()
        print(json.dumps(err), file=sys.stderr, flush=True)
        if os.environ.get("RDMAPROV_WORKER_TRACEBACK"):
            traceback.print_exc()
        if rank == 0:
            print(json.dumps(err, indent=1), file=out, flush=True)
        return RC_CANNOT_START if isinstance(exc, CannotStart) else RC_FAILED
    if rank == 0:
        print(json.dumps(doc, indent=1), file=out, flush=True)
        progress("document printed")
    return 0 if doc["ok"] else RC_FAILED


def _rank_of(args: argparse.Namespace) -> int:
    return args.rank if args.rank is not None else int(os.environ.get("RANK", "0"))


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


def _supervise(args: argparse.Namespace) -> int:
    """Run the worker in a child process and kill its whole process group with SIGKILL when one
    phase (import, rendezvous, one size of the sweep) outlasts watchdog_limit: a hung NCCL or
    gloo collective, or a peer that never joins, cannot be ended from inside the Python that
    waits on it. This process imports no torch, so it stays responsive. Also ends the worker
    when this process is told to stop (SIGTERM from torchrun or the launch) or is orphaned."""
    import select
    import signal

    global _PROGRESS_FD
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
        _PROGRESS_FD = write_fd
        code = 1
        try:
            code = _worker(args)
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
            return RC_FAILED
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
    rank = _rank_of(args)
    err = {"schema": SCHEMA, "ok": False, "rank": rank, "hostname": socket.gethostname(),
           "error": f"watchdog: no progress for {current:.0f} s in {phase}; killed the worker "
                    "(a peer gone, or a collective hung)", "phase": phase}
    print(json.dumps(err), file=sys.stderr, flush=True)
    step(f"watchdog: killed after {current:.0f} s in {phase}")
    if printed:  # the document is out and whole: only the teardown hung
        return 0
    if rank == 0:
        print(json.dumps(err, indent=1), flush=True)
    return RC_WATCHDOG


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def preflight_document(backend: str) -> dict[str, Any]:
    """The image preflight (--preflight): preflight() plus what torch offers here. Run by the
    role in the very container (or host) the run will use, before anything is timed."""
    return {"schema": PREFLIGHT_SCHEMA, "hostname": socket.gethostname(), "backend": backend,
            "preflight": preflight(), "torch": _torch_facts(backend)}


def _torch_facts(backend: str) -> dict[str, Any]:
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install's OSError
        return {"error": one_line(exc), "version": None}
    out: dict[str, Any] = {"error": None, "version": torch.__version__, "libuv": _has_libuv()}
    if backend == "nccl":
        out["cuda_devices"] = torch.cuda.device_count()
        out.update({k: v for k, v in _versions(torch).items() if k in ("cuda", "nccl")})
    return out


def _has_libuv() -> bool | None:
    """Can this torch make a libuv TCPStore (what torchrun's rendezvous asks for)? Distribution
    builds without libuv (Debian 13's python3-torch) cannot. None when it cannot be told."""
    try:
        from torch.distributed import TCPStore

        TCPStore("127.0.0.1", 0, 1, True, timeout=_dt.timedelta(seconds=5),
                 wait_for_workers=False, use_libuv=True)
    except Exception as exc:
        return False if "libuv" in str(exc) else None
    return True


def _safe_preflight() -> dict[str, Any] | None:
    try:
        return preflight()
    except Exception:  # an error report must not fail on its own extras
        return None


def _destroy_quietly() -> None:
    """Tear down a process group left by a failed run, so exit does not hang or warn."""
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # already failing; the original error is the one to report
        pass


if __name__ == "__main__":
    sys.exit(main())
