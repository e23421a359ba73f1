"""Where `rdmaprov check`'s time goes on this host: each part of one check, timed in-process.

`bench/check_time.py` times whole `rdmaprov check` processes on a lab node; this one times the
parts a check runs (the start-up imports, each probe `probes.gather` calls, the counter
history, the judge) on the host it runs on (a real GPU host, a lab node), over `--runs` rounds,
and prints each part's median and maximum in ms, slowest first, with the whole check's wall
median for the same rounds (fresh processes: `--whole` runs of `python -m rdmaprov check`).

    python bench/check_parts_time.py [--runs 30] [--whole 30] [--sysroot /] [--json]

Read-only: the counter history goes to a temporary directory, not /var/lib/rdmaprov.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _timed(table: dict[str, list[float]], name: str, fn: Any) -> Any:
    def wrapper(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            table.setdefault(name, []).append(time.perf_counter() - t0)
    return wrapper


def parts(runs: int, root: str) -> dict[str, list[float]]:
    t0 = time.perf_counter()
    from rdmaprov.check import expect, history, judge, kernel, probes
    from rdmaprov.collection import rdma_sysfs
    imported = time.perf_counter() - t0
    table: dict[str, list[float]] = {"import rdmaprov.check (first, in this process)": [imported]}
    for name in ("rdma", "module_support", "modules", "gpus", "mtus", "_memlock_state", "qos"):
        setattr(probes, name, _timed(table, f"probes.{name}", getattr(probes, name)))
    for name in ("pcie_topology", "nvidia_module", "nvidia_userspace", "gpudirect", "aer_counts",
                 "hca_identity", "verbs_devices", "cards_without_rdma"):
        setattr(rdma_sysfs, name, _timed(table, f"rdma_sysfs.{name}", getattr(rdma_sysfs, name)))
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(runs):
            t0 = time.perf_counter()
            exp = expect.build(None, {"link_state": str(Path(tmp) / "links.json")}, root=root)
            table.setdefault("expect.build", []).append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            state = probes.gather(exp, root)
            table.setdefault("probes.gather (all probes)", []).append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            state["links"] = history.step(state["rdma"]["counters"], exp)
            state["aer"]["history"] = history.aer_step(state["aer"]["counts"], exp,
                                                       kernel.boot_id(root))
            table.setdefault("history (links, aer)", []).append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            judge.judge(state, exp)
            table.setdefault("judge.judge", []).append(time.perf_counter() - t0)
    return table


def whole(runs: int, root: str) -> dict[str, Any]:
    walls, codes = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "rdmaprov", "check", "--sysroot", root,
                "--link-state", str(Path(tmp) / "links.json")]
        for _ in range(runs):
            t0 = time.perf_counter()
            done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  check=False)
            walls.append(time.perf_counter() - t0)
            codes.add(done.returncode)
    return {"median_ms": round(statistics.median(walls) * 1000, 1),
            "min_ms": round(min(walls) * 1000, 1), "max_ms": round(max(walls) * 1000, 1),
            "runs": runs, "exit_codes": sorted(codes),
            "bytecode": "off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--whole", type=int, default=30)
    ap.add_argument("--sysroot", default="/")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    table = parts(args.runs, args.sysroot)
    rows = sorted(((statistics.median(v) * 1000, max(v) * 1000, len(v), k)
                   for k, v in table.items()), reverse=True)
    out = {"parts": [{"part": k, "median_ms": round(m, 2), "max_ms": round(x, 2), "calls": n}
                     for m, x, n, k in rows],
           "whole": whole(args.whole, args.sysroot) if args.whole else None}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    for r in out["parts"]:
        print(f"{r['median_ms']:9.2f} ms median {r['max_ms']:9.2f} max  "
              f"x{r['calls']:<3} {r['part']}")
    if out["whole"]:
        print(f"whole check: {json.dumps(out['whole'])}")


if __name__ == "__main__":
    main()
