"""Controller-side cost of naming a slow host at fleet size: the pair planner and the blame
rule (rdmaprov/validate/rounds.py) on paper, at 1,000 and 10,000 hosts.

    python bench/pair_plan.py [--sizes 1000,10000] [--reps 5]

For each size and fault (one slow host, two side by side, two one apart, a rack of 40, 25
anywhere), ``run_rounds`` drives rounds 1-2 and the confirm round with a measure() that answers
at once, so the time is the planning and judging alone (the measuring is the fabric's). Prints
one JSON row per case: rounds, steps, pairs, whether the blamed set is exactly the slow hosts,
and the best and median planning seconds over --reps, plus `validate --plan N`'s time and the
machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping

from rdmaprov.validate import rounds as R


def faults(hosts: list[str]) -> dict[str, set[str]]:
    n = len(hosts)
    return {"one": {hosts[n // 2]}, "two-side-by-side": {hosts[10], hosts[11]},
            "two-one-apart": {hosts[20], hosts[22]}, "rack-40": set(hosts[n // 3:n // 3 + 40]),
            "random-25": set(random.Random(29).sample(hosts, 25))}


def case(hosts: list[str], bad: set[str], reps: int) -> dict[str, object]:
    times = []
    for _ in range(reps):
        spent = 0.0  # in measure(), not planning

        def measure(number: int, step_no: int, step: R.Step) -> dict[R.Pair, float | None]:
            nonlocal spent
            t = time.perf_counter()
            out: dict[R.Pair, float | None] = {
                p: 4.0 if p[0] in bad or p[1] in bad else 40.0 for p in step}
            spent += time.perf_counter() - t
            return out

        def classify(figures: Mapping[R.Pair, float | None]) -> dict[R.Pair, bool]:
            return R.slow_pairs(figures, 20.0, 0.4)[0]  # the worker's rule, in the plan's time

        t0 = time.perf_counter()
        done, _, blame = R.run_rounds(hosts, measure, classify)
        times.append(time.perf_counter() - t0 - spent)
    return {"rounds": len(done), "steps": sum(len(r) for r in done),
            "pairs": sum(len(s) for r in done for s in r),
            "exact": set(blame.blamed) == bad and blame.settled,
            "plan_s_best": round(min(times), 3),
            "plan_s_median": round(statistics.median(times), 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print(json.dumps({"loadavg_before": os.getloadavg(), "cpus": os.cpu_count(),
                      "python": sys.version.split()[0]}))
    for n in (int(x) for x in args.sizes.split(",")):
        hosts = [f"gpu{i:05d}" for i in range(n)]
        for name, bad in faults(hosts).items():
            print(json.dumps({"hosts": n, "fault": name, "slow": len(bad),
                              **case(hosts, bad, args.reps)}), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "rdmaprov", "validate", "--plan", str(n)],
                              capture_output=True, text=True, check=False)
        print(json.dumps({"hosts": n, "cli": f"validate --plan {n}", "rc": proc.returncode,
                          "wall_s": round(time.perf_counter() - t0, 2),
                          "first_line": proc.stdout.splitlines()[0] if proc.stdout else ""}))
    # What of --plan's wall is the interpreter and the package's imports, not the planning.
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import rdmaprov.cli"], check=True)
    print(json.dumps({"cli": "python -c 'import rdmaprov.cli'",
                      "wall_s": round(time.perf_counter() - t0, 2)}))
    print(json.dumps({"loadavg_after": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
