"""The worker's timing: the size sweep, one size's all_reduce timed per iteration, the rates
(nccl-tests' algbw and busbw) and the iterations' percentiles, and the host's busy cores.

Standard library only (the torch it is handed); copied beside worker.py
(rdmaprov.validate.slurm.worker_files()).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # from the rdmaprov package (tests, python -m)
    from . import worker_base as base
else:  # a file beside worker.py on a host or in an image, where rdmaprov is not installed
    import worker_base as base

_DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4}


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


def rates(nbytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one all_reduce of nbytes that took seconds."""
    if seconds <= 0:
        raise ValueError(f"non-positive time {seconds} for {nbytes} bytes")
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * bus_factor(world_size)


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


def _time_size(ctx: base._Ctx, nbytes: int, dtype: Any, elem: int, warmup: int, iters: int,
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


def sweep(ctx: base._Ctx, sizes: list[int], dtype_name: str, warmup: int,
          iters: int, cpu: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per size: the slowest rank's time, algbw, busbw, whether the sum was right, and
    the distribution of the iterations (each iteration's time is the slowest rank's in it).
    ``cpu`` gets this host's busy cores during the largest size's timed loop."""
    torch, dist = ctx.torch, ctx.dist
    elem = _DTYPES[dtype_name]
    dtype = getattr(torch, dtype_name)
    rows = []
    for nbytes in sizes:
        base.progress(f"all_reduce of {nbytes} bytes")
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
