"""Benchmark: `rdmaprov explain` on a large interleaved NCCL_DEBUG=INFO log of many ranks.

    python bench/explain.py [--size-mb 1024] [--ranks 1024] [--keep PATH]

Generates the log from line shapes seen in real NCCL 2.2x logs (tests/fixtures/explain/ and
tests/fixtures/nccl/): 8 ranks per host, every rank's init lines (bootstrap, NET/IB device
list, network choice, channels via NET/IB/N/GDRDMA and P2P, trees, Init COMPLETE), repeated
for successive communicators and interleaved across ranks in small bursts, as a shared log file
of a big job looks. One rank per host logs a completion error, so the error path runs too.
Then runs `python -m rdmaprov explain --json` on it in a child process and records wall time,
the child's peak RSS, and `grep -c 'NCCL INFO'` on the same file for scale. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# {h} host, {p} pid, {t} tid, {d} local device, {r} rank, {n} nranks, {c} channel, {x} peer
SHAPES = [
    "{h}:{p}:{p} [{d}] NCCL INFO Bootstrap: Using ib0:10.{hi}.{lo}.1<0>",
    "{h}:{p}:{p} [{d}] NCCL INFO cudaDriverVersion 12080",
    "{h}:{p}:{t} [{d}] NCCL INFO NET/Plugin: Could not find: libnccl-net.so",
    "{h}:{p}:{t} [{d}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
    "[3]mlx5_3:1/IB [4]mlx5_4:1/IB [5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB [RO]; "
    "OOB ib0:10.{hi}.{lo}.1<0>",
    "{h}:{p}:{t} [{d}] NCCL INFO Using network IB",
    "{h}:{p}:{t} [{d}] NCCL INFO ncclCommInitRank comm 0x55d9607ee240 rank {r} nranks {n} "
    "cudaDev {d} nvmlDev {d} busId 61000 commId 0x65e0bd6ee7449db4 - Init START",
    "{h}:{p}:{t} [{d}] NCCL INFO Setting affinity for GPU {d} to ffff,ffffffff",
    "{h}:{p}:{t} [{d}] NCCL INFO NVLS multicast support is not available on dev {d}",
    "{h}:{p}:{t} [{d}] NCCL INFO Trees [0] {x}/-1/-1->{r}->{x} [1] {x}/-1/-1->{r}->{x}",
    "{h}:{p}:{t} [{d}] NCCL INFO P2P Chunksize set to 131072",
    "{h}:{p}:{t} [{d}] NCCL INFO Channel {c:02d}/0 : {x}[{d}] -> {r}[{d}] [receive] via "
    "NET/IB/{d}/GDRDMA",
    "{h}:{p}:{t} [{d}] NCCL INFO Channel {c:02d}/0 : {r}[{d}] -> {x}[{d}] [send] via "
    "NET/IB/{d}/GDRDMA",
    "{h}:{p}:{t} [{d}] NCCL INFO Channel {c:02d}/0 : {r}[{d}] -> {x}[{d}] via P2P/CUMEM/read",
    "{h}:{p}:{t} [{d}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "{h}:{p}:{t} [{d}] NCCL INFO Connected all trees",
    "{h}:{p}:{t} [{d}] NCCL INFO threadThresholds 8/8/64 | 8192/8/64 | 512 | 512",
    "{h}:{p}:{t} [{d}] NCCL INFO 32 coll channels, 32 collnet channels, 0 nvls channels, "
    "32 p2p channels, 32 p2p channels per peer",
    "{h}:{p}:{t} [{d}] NCCL INFO ncclCommInitRank comm 0x55d9607ee240 rank {r} nranks {n} "
    "cudaDev {d} nvmlDev {d} busId 61000 commId 0x65e0bd6ee7449db4 - Init COMPLETE",
]
ERROR = ("{h}:{p}:{t} [{d}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from "
         "peer 10.{hi}.{lo}.9<41233> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
         "localGid ::ffff:10.{hi}.{lo}.1 remoteGids::ffff:10.{hi}.{lo}.9")


def generate(path: Path, size_mb: int, ranks: int) -> int:
    target = size_mb * 1024 * 1024
    written = lines = 0
    per_host = 8
    with open(path, "w", buffering=8 << 20) as out:
        out.write(" NCCL version 2.21.5+cuda12.4\n")
        comm = 0
        while written < target:
            comm += 1
            burst = []
            for r in range(ranks):
                host, d = divmod(r, per_host)
                v = {"h": f"gpu-node-{host:04d}", "p": 40000 + r, "t": 41000 + r + comm,
                     "d": d, "r": r, "n": ranks, "x": (r + 1) % ranks,
                     "hi": host // 256, "lo": host % 256}
                for i, shape in enumerate(SHAPES):
                    if "{c" in shape:
                        for c in range(4):
                            burst.append(shape.format(c=c + 4 * (comm % 8), **v))
                    elif comm == 1 or i >= 5:
                        burst.append(shape.format(**v))
                if comm == 3 and d == 0:
                    burst.append(ERROR.format(**v))
                # Flush in bursts of a few ranks so lines of different ranks interleave.
                if r % 4 == 3:
                    text = "\n".join(burst) + "\n"
                    out.write(text)
                    written += len(text)
                    lines += len(burst)
                    burst = []
                    if written >= target:
                        break
    return lines


def timed(argv: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    return time.perf_counter() - t, p.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--keep", type=Path, help="write the log here and keep it")
    a = ap.parse_args()
    tmp = None
    if a.keep:
        path = a.keep
    else:
        # Only the name is wanted: close the handle now, generate() opens the path itself.
        with tempfile.NamedTemporaryFile(suffix=".log", delete=False) as tmp:
            path = Path(tmp.name)
    try:
        t0 = time.perf_counter()
        nlines = generate(path, a.size_mb, a.ranks)
        gen_s = time.perf_counter() - t0
        grep_s, grep_out = timed(["grep", "-c", "NCCL INFO", str(path)])
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        explain_s, out = timed([sys.executable, "-m", "rdmaprov", "explain", "--json",
                                str(path)])
        rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        report = json.loads(out)
        result = {
            "file_mb": round(path.stat().st_size / 2**20, 1), "lines": nlines,
            "ranks": a.ranks, "generate_s": round(gen_s, 1),
            "grep_c_nccl_info_s": round(grep_s, 2), "grep_count": int(grep_out.strip() or 0),
            "explain_s": round(explain_s, 2),
            "explain_peak_rss_mb": round(rss_kb / 1024, 1) if rss_kb > before else None,
            "ratio_to_grep": round(explain_s / grep_s, 1),
            "lines_per_s": int(nlines / explain_s),
            "report": {k: report[k] for k in ("network", "gdr", "ranks", "hosts", "lines")}
            | {"errors": [(e["kind"], e.get("status"), e["count"]) for e in report["errors"]]},
        }
        print(json.dumps(result, indent=2))
    finally:
        if tmp is not None:
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
