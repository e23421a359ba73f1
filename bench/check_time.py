"""Wall time of `rdmaprov check` (no --nccl) on a lab node, as a Slurm prolog runs it.

Runs the node's installed rdmaprov (the slurm_health role's venv, /opt/rdmaprov) `--runs` times
inside the node, each a fresh process timed from inside the node (no nsenter or SSH in the
figure), and reports the median and spread, plus whether the start-up imported Ansible.

    sudo .venv/bin/python bench/check_time.py --lab vslurm [--node node1] [--runs 20]

The lab must have rdmaprov installed on the node: `rdmaprov lab up --name vslurm --slurm`, then
the slurm_health role (tests/integration/test_slurm_lab.py with RDMAPROV_KEEP_LAB=1 does both).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

from rdmaprov.lab import Lab

PROBE = r"""
import json, resource, subprocess, sys, time
cmd, runs = sys.argv[1], int(sys.argv[2])
argv = [cmd, "check", "--nhc"]
times, cpu, codes = [], [], set()
def used():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
for _ in range(runs):
    c0, t0 = used(), time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    times.append(time.perf_counter() - t0)
    cpu.append(used() - c0)
    codes.add(p.returncode)
imp = subprocess.run([sys.argv[3], "-X", "importtime", "-m", "rdmaprov", "check", "--nhc"],
                     capture_output=True, text=True).stderr
mods = [ln.split("|")[-1].strip() for ln in imp.splitlines() if ln.startswith("import time:")]
print(json.dumps({"times": times, "cpu": cpu, "codes": sorted(codes),
                  "ansible": sorted({m for m in mods if m.split(".")[0] == "ansible"})[:5],
                  "modules": len(mods)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", default="vslurm")
    ap.add_argument("--node", default="node1")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--venv", default="/opt/rdmaprov")
    args = ap.parse_args()
    lab = Lab(args.lab)
    out = lab.exec(args.node, ["python3", "-c", PROBE, f"{args.venv}/bin/rdmaprov",
                               str(args.runs), f"{args.venv}/bin/python"], timeout=600).stdout
    doc = json.loads(out)
    times, cpu = sorted(doc["times"]), doc["cpu"]
    print(f"rdmaprov check --nhc on {args.lab}/{args.node}: {len(times)} runs, wall median "
          f"{statistics.median(times):.3f} s (min {times[0]:.3f}, max {times[-1]:.3f}), CPU "
          f"(user+sys) median {statistics.median(cpu):.3f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; exit codes "
          f"{doc['codes']}; {doc['modules']} modules imported, Ansible ones: "
          f"{', '.join(doc['ansible']) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
