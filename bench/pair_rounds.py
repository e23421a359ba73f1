"""Pair rounds in the fabric run's own processes: what naming a slow host costs on top of the
fabric run, on real lab nodes with one node's fabric port throttled (tc tbf).

    python bench/pair_rounds.py --lab NAME [--slow node3,node4] [--reps 1] [--rate 200mbit]

Against a running lab (`rdmaprov lab up --name NAME --nodes N`), interleaved in one run: the
fabric run alone (`--pairwise never`) and the same with the rounds (`--pairwise always`), each
`rdmaprov validate --json` with the host runtime (gloo over the lab's torch). Prints the wall
times, their ratio, the rounds run and the hosts blamed. The throttle is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rdmaprov.lab import Lab

VARS = {"nccl_validate_runtime": "host", "nccl_validate_backend": "gloo",
        "nccl_validate_pythonpath": ["/opt/rdmaprov-torch"],
        "nccl_validate_worker_args": ["--max-bytes", "4M", "--iters", "5"]}


def validate(inventory: Path, pairwise: str, tmp: Path) -> tuple[float, int, dict]:
    vars_file = tmp / "vars.json"
    vars_file.write_text(json.dumps(VARS))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rdmaprov", "validate", str(inventory),
                           "-e", f"@{vars_file}", "--pairwise", pairwise, "--json"],
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    return wall, proc.returncode, json.loads(proc.stdout or "{}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", required=True)
    ap.add_argument("--slow", help="nodes whose eth1 is throttled, comma-separated "
                    "(default: the last)")
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args()
    lab = Lab(args.lab)
    nodes = list(lab.addresses)
    slow = (args.slow or nodes[-1]).split(",")
    for node in slow:
        lab.exec(node, ["tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", args.rate,
                        "burst", "16kb", "latency", "400ms"])
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.reps):
                for mode in ("never", "always"):
                    wall, rc, doc = validate(lab.inventory, mode, Path(tmp))
                    pw = doc.get("pairwise") or {}
                    rounds = sorted({p["round"] for p in pw.get("pairs") or []})
                    rows.append({"mode": mode, "wall_s": round(wall, 1), "rc": rc,
                                 "rounds": rounds, "pairs": len(pw.get("pairs") or []),
                                 "blamed": sorted(pw.get("blamed") or {}),
                                 "unexplained": pw.get("unexplained") or []})
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        for node in slow:
            lab.exec(node, ["tc", "qdisc", "del", "dev", "eth1", "root"], check=False)
    never = [r["wall_s"] for r in rows if r["mode"] == "never"]
    always = [r["wall_s"] for r in rows if r["mode"] == "always"]
    print(json.dumps({"nodes": len(nodes), "slow": slow, "rate": args.rate,
                      "fabric_only_s": never, "with_rounds_s": always,
                      "ratio": [round(a / n, 2) for a, n in zip(always, never, strict=True)]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
