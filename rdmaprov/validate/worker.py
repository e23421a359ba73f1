"""All-reduce bandwidth worker: runs under torchrun on every host, prints one JSON document.

Runs as ``python -m rdmaprov.validate.worker`` or as a plain file mounted into a container
(``python /rdmaprov/worker.py``): it imports nothing from rdmaprov, only the standard library,
torch, and its parts copied beside it (rdmaprov.validate.slurm.worker_files(), standard library
only): worker_base.py (what the parts share), worker_preflight.py (the node preflight),
worker_timing.py (the sweep), worker_rails.py (the rail round), worker_watchdog.py (the
supervisor), rounds.py (the pair planner) and rdma_ports.py (the port reader), because the
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
import datetime as _dt
import json
import os
import socket
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

# The worker's parts, each a file beside this one wherever it runs (the files
# rdmaprov.validate.slurm.worker_files() names; the nccl_validate role copies the same).
if TYPE_CHECKING or __package__:  # from the rdmaprov package (tests, python -m)
    from . import worker_base as base
    from . import worker_join, worker_preflight, worker_rails, worker_timing, worker_watchdog
else:  # python worker.py on a host or in an image, where rdmaprov is not installed
    _HERE = os.path.dirname(os.path.abspath(__file__))
    if _HERE not in sys.path:  # python -I, or runpy: the script's folder is not on the path
        sys.path.insert(0, _HERE)
    import worker_base as base
    import worker_join
    import worker_preflight
    import worker_rails
    import worker_timing
    import worker_watchdog

# Environment variables worth recording: they decide which transport NCCL or gloo picks.
_ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "CUDA_VISIBLE_DEVICES", "MASTER_", "UCX_")

# Per-backend defaults: gloo on a lab node moves ~1 GB/s, so its sweep stops earlier.
_DEFAULTS = {
    "nccl": {"min_bytes": 1 << 20, "max_bytes": 1 << 30, "warmup": 5, "iters": 20},
    "gloo": {"min_bytes": 1 << 16, "max_bytes": 64 << 20, "warmup": 2, "iters": 5},
}


def parse_bytes(text: str) -> int:
    """'64M', '1G', '4096', '512K' -> bytes (binary units, as nccl-tests' -b/-e)."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if mult != 1 else text
    try:
        return int(float(number) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None


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
    p.add_argument("--dtype", choices=sorted(worker_timing._DTYPES), default="float32")
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


class CannotStart(RuntimeError):
    """This host cannot run the worker at all (exit RC_CANNOT_START): not a peer's fault."""

    def __init__(self, message: str, record: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.record = record


def _init(args: argparse.Namespace) -> base._Ctx:
    base.progress("import torch")
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
    if args.master_addr:
        master, port = args.master_addr, args.master_port or int(env.get("MASTER_PORT", "29500"))
    else:
        master, port = env.get("MASTER_ADDR", "127.0.0.1"), int(env.get("MASTER_PORT", "29500"))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    node = base.node_rank_of(rank)
    # The rendezvous in recorded phases (worker_join): a rank that never joins, or a node cut off
    # the fabric, is named by every rank that did, within join_limit, not after a hung bootstrap.
    record: dict[str, Any] = {"rank": rank, "node": node}
    try:
        store = worker_join.connect_store(
            torch, record, rank, world, master, port, args.timeout,
            env.get("TORCHELASTIC_USE_AGENT_STORE") == "True", base.progress)
        joined = worker_join.join(store, record, rank, world, node, socket.gethostname(),
                                  args.timeout, base.progress)
        worker_join.fabric_path(store, record, backend, master, port, node, rank, joined,
                                args.timeout, base.progress)
    except worker_join.RendezvousFailed as exc:
        if "Network is unreachable" in str(exc):
            raise CannotStart(f"{exc} ({own_network_failure(str(exc))})", record) from None
        raise
    except RuntimeError as exc:
        if "without libuv" in str(exc):
            raise CannotStart(f"{base.one_line(exc)} (set USE_LIBUV=0, or use the direct "
                              "launcher)", record) from None
        raise worker_join.RendezvousFailed(base.one_line(exc), record) from exc
    kwargs: dict[str, Any] = {"backend": backend, "rank": rank, "world_size": world,
                              "timeout": timeout, "store": store}
    if backend == "nccl":
        # device_id makes NCCL set up its communicator now, so a transport failure shows here
        # and not inside the first timed collective.
        kwargs["device_id"] = torch.device("cuda", local_rank)
    record["phase"] = "backend bootstrap"
    via = record.get("path", {}).get("interface") or "?"
    base.progress(f"backend bootstrap: {backend} over {via}")
    try:
        dist.init_process_group(**kwargs)
    except RuntimeError as exc:
        why = own_network_failure(str(exc))
        if why:
            raise CannotStart(f"{base.one_line(exc)} ({why})", record) from None
        raise worker_join.RendezvousFailed(base.one_line(exc), record) from exc
    record["phase"] = "first collective"
    ctx = base._Ctx(torch, dist, backend, rank, world, local_rank)
    ctx.rendezvous = record
    return ctx


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


def _rank_info(ctx: base._Ctx) -> dict[str, Any]:
    info: dict[str, Any] = {
        "rank": ctx.rank,
        "local_rank": ctx.local_rank,
        "hostname": socket.gethostname(),
        # The node (launch host) this rank runs on: torchrun's GROUP_RANK (its --node-rank),
        # else rank // local world size. Hosts are told apart by it, never by hostname: fresh
        # nodes all say localhost, and containers share their host's name.
        "node": base._node_rank(ctx),
        "pid": os.getpid(),
    }
    if ctx.backend == "nccl":
        info["device"] = ctx.torch.cuda.get_device_name(ctx.device)
    return info


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
    slowest = base._rounds().line_rate_bar(rates, bw_fraction)
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


def pair_rounds(ctx: base._Ctx, args: argparse.Namespace, ranks: list[dict[str, Any]],
                sizes: list[int], warmup: int, iters: int, bar: float | None,
                ) -> list[dict[str, Any]]:
    """Rounds 1-2 on the ring, then confirm rounds while they settle something (at most 4):
    rounds.run_rounds drives them; each step's pairs run here at once."""
    R = base._rounds()
    hosts, host_ranks, hostname = base._hosts_of(ranks)
    me = f"node{base._node_rank(ctx)}"
    out: list[dict[str, Any]] = []

    def measure(number: int, step_no: int, step: list[tuple[str, str]],
                ) -> dict[tuple[str, str], float | None]:
        base.progress(f"pair round {number} step {step_no}: {len(step)} pairs")
        groups = [host_ranks[a] + host_ranks[b] for a, b in step]
        mine, _ = ctx.dist.new_subgroups_by_enumeration(
            groups, timeout=_dt.timedelta(seconds=args.timeout))
        entry: dict[str, Any] = {}
        pair = next((p for p in step if me in p), None)
        if mine is not None and pair is not None:
            sub = ctx.sub(mine)
            try:
                rows = worker_timing.sweep(sub, sizes, args.dtype, warmup, iters)
                ok = all(r["correct"] for r in rows)
                bw = max(r["busbw_GBps"] for r in rows) if ok else None
                err = None if ok else "all_reduce returned a wrong sum"
            except Exception as exc:  # a pair that fails is a figure, not the end of the run
                rows, bw, err = [], None, base.one_line(exc)
            if sub.rank == 0 or err:
                entry = {"round": number, "step": step_no,
                         "hosts": [hostname[k] for k in pair],
                         "nodes": [int(k[4:]) for k in pair],
                         "busbw_GBps": bw, "error": err, "results": rows}
            ctx.dist.destroy_process_group(mine)
        figures: dict[tuple[str, str], float | None] = {}
        for e in base._gather_json(ctx, entry):
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


def run(args: argparse.Namespace) -> dict[str, Any]:
    t_start = time.perf_counter()
    # timezone.utc, not datetime.UTC: images may carry a Python older than 3.11.
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")  # noqa: UP017
    checks = worker_preflight.preflight()
    ctx = _init(args)
    defaults = _DEFAULTS[ctx.backend]
    min_b = args.min_bytes if args.min_bytes is not None else defaults["min_bytes"]
    max_b = args.max_bytes if args.max_bytes is not None else defaults["max_bytes"]
    warmup = args.warmup if args.warmup is not None else defaults["warmup"]
    iters = args.iters if args.iters is not None else defaults["iters"]
    try:
        if iters < 1 or warmup < 0:
            raise ValueError(f"need iters >= 1 and warmup >= 0, got {iters}, {warmup}")
        sizes = worker_timing.size_sweep(min_b, max_b, args.factor,
                                         worker_timing._DTYPES[args.dtype])
        base.progress("first collective: exchange of rank info")
        ranks = base._gather_json(ctx, {**_rank_info(ctx), "preflight": checks})
        if ctx.rendezvous is not None:
            ctx.rendezvous["phase"] = "done"
        cpu: dict[str, Any] = {}
        rows = worker_timing.sweep(ctx, sizes, args.dtype, warmup, iters, cpu)
        base.progress("exchange of CPU figures")
        cpus = base._gather_json(ctx, {"hostname": socket.gethostname(),
                                  "local_rank": ctx.local_rank, "cpu": cpu})
        bar = line_rate_bar(ranks, ctx.backend, args.bw_fraction, args.min_busbw)
        peak = max((r["busbw_GBps"] for r in rows), default=None)
        nhosts = len({r["node"] for r in ranks})
        unstable = False
        if args.pairs in ("auto", "slow") and nhosts >= 3:  # rounds.py only when pairs may run
            R = base._rounds()
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
            rails = worker_rails.rail_round(ctx, args, ranks, args.rails_dir)
            rails["elapsed_s"] = round(time.perf_counter() - t_rails, 3)
        base.progress("barrier")
        ctx.dist.barrier()
    finally:
        base.progress("teardown")
        ctx.dist.destroy_process_group()

    doc = {
        "schema": base.SCHEMA,
        "ok": all(r["correct"] for r in rows),
        "error": None if all(r["correct"] for r in rows) else "all_reduce returned a wrong sum",
        "backend": ctx.backend,
        "world_size": ctx.world,
        "versions": worker_preflight._versions(ctx.torch),
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
        # Rank 0's record of the rendezvous phases (worker_join): the store, who joined from
        # where, each node's fabric path and the matrix of its probe.
        "rendezvous": ctx.rendezvous,
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


def main(argv: list[str] | None = None) -> int:
    try:
        parser = _build_parser()
        args = parser.parse_args(argv)
        if args.pairs != "never" and args.pair_fraction is None:
            parser.error("--pairs needs --pair-fraction (the launch passes the setting's)")
        if not args.preflight:
            base._STEP_RANK = args.rank
            base.step("start")
    except SystemExit as exc:  # bad arguments: this host cannot start (argparse exits 2)
        worker_watchdog._record_exit(exc.code if isinstance(exc.code, int)
                                     else base.RC_CANNOT_START)
        raise
    if args.preflight:
        print(json.dumps(worker_preflight.preflight_document(args.backend), indent=1), flush=True)
        return 0
    code = worker_watchdog._supervise(args, _worker) if not args.no_watchdog else _worker(args)
    worker_watchdog._record_exit(code)
    return code


def _worker(args: argparse.Namespace) -> int:
    out = _claim_stdout()
    rank = base._rank_of(args)
    try:
        doc = run(args)
    except Exception as exc:
        err = {"schema": base.SCHEMA, "ok": False, "rank": rank, "hostname": socket.gethostname(),
               "error": base.one_line(exc), "detail": str(exc),
               "preflight": worker_preflight._safe_preflight()}
        record = getattr(exc, "record", None)
        if record is not None:
            err["phase"] = record.get("phase")
            err["rendezvous"] = record
        _destroy_quietly()
        print(json.dumps(err), file=sys.stderr, flush=True)
        if os.environ.get("RDMAPROV_WORKER_TRACEBACK"):
            traceback.print_exc()
        # Rank 0's is the run's document; a rendezvous that failed leaves each node's own as
        # well (its first rank's, on its host's stdout): where it tried to connect, and how.
        if rank == 0 or (record is not None and _local_rank(args) == 0):
            print(json.dumps(err, indent=1), file=out, flush=True)
        return base.RC_CANNOT_START if isinstance(exc, CannotStart) else base.RC_FAILED
    if rank == 0:
        print(json.dumps(doc, indent=1), file=out, flush=True)
        base.progress("document printed")
    return 0 if doc["ok"] else base.RC_FAILED


def _local_rank(args: argparse.Namespace) -> int:
    if args.local_rank is not None:
        return int(args.local_rank)
    v = os.environ.get("LOCAL_RANK", "0")
    return int(v) if v.isdecimal() else 0


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
