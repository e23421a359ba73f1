"""Wall time of `rdmaprov check` (no --nccl) on a lab node, as a Slurm prolog runs it.

Runs rdmaprov `--runs` times inside the node, each a fresh process timed from inside the node
(no nsenter or SSH in the figure), and reports the median and spread, the CPU time, and whether
the start-up imported Ansible. The node's installed rdmaprov (the node_tool role's launcher,
/usr/local/bin/rdmaprov, over its venv /opt/rdmaprov/venv) runs `check --nhc` as the prolog
calls it; `--with-parts` also runs bench/check_parts_time.py in the node with the venv's
python. With `--before REF`, the same venv's python also runs `-m rdmaprov check --nhc` from
two source trees copied into the node, REF's and `--after` (default HEAD), interleaved run by
run, and the ratio of their medians is printed.

    sudo .venv/bin/python bench/check_time.py --lab NAME [--node node1] [--runs 20]
                                              [--before REF [--after REF]]

The lab must have rdmaprov installed on the node: `rdmaprov lab up --name NAME`, then
`rdmaprov bootstrap` (site.yml installs it with the node_tool role) or
`ansible-playbook playbooks/node_tool.yml` on the lab's inventory.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
from pathlib import Path

from rdmaprov.lab import Lab

ROOT = Path(__file__).resolve().parents[1]
TREES = "/var/tmp/rdmaprov-bench"

# Inside the node: variants [name, argv, PYTHONPATH or ""], run interleaved.
PROBE = r"""
import json, os, resource, subprocess, sys, time
variants, runs = json.loads(sys.argv[1]), int(sys.argv[2])
def used():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
out = {name: {"times": [], "cpu": [], "codes": set()} for name, _, _ in variants}
def env_of(path):
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path
    return env
for _ in range(runs):
    for name, argv, path in variants:
        c0, t0 = used(), time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, env=env_of(path))
        out[name]["times"].append(time.perf_counter() - t0)
        out[name]["cpu"].append(used() - c0)
        out[name]["codes"].add(p.returncode)
for name, argv, path in variants:
    py = [sys.argv[3], "-X", "importtime"] + (argv[1:] if argv[1] == "-m" else
                                              ["-m", "rdmaprov"] + argv[1:])
    imp = subprocess.run(py, capture_output=True, text=True, env=env_of(path)).stderr
    mods = [ln.split("|")[-1].strip() for ln in imp.splitlines() if ln.startswith("import time:")]
    out[name]["codes"] = sorted(out[name]["codes"])
    out[name]["ansible"] = sorted({m for m in mods if m.split(".")[0] == "ansible"})[:5]
    out[name]["modules"] = len(mods)
print(json.dumps(out))
"""


def _copy_tree(lab: Lab, node: str, ref: str, dest: str) -> str:
    """REF's rdmaprov package and collection (what `check` reads) into the node; its commit."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref],
                            capture_output=True, text=True, check=True).stdout.strip()
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar.gz", commit,
                          "rdmaprov", "plugins", "galaxy.yml"],
                         capture_output=True, check=True).stdout
    lab.exec(node, ["sh", "-c", f"rm -rf {dest} && mkdir -p {dest} && base64 -d | "
                    f"tar -xz -C {dest}"], input=base64.b64encode(tar).decode())
    return commit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", default="vslurm")
    ap.add_argument("--node", default="node1")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--venv", default="/opt/rdmaprov/venv")
    ap.add_argument("--launcher", default="/usr/local/bin/rdmaprov")
    ap.add_argument("--with-parts", action="store_true",
                    help="also time each part of one check in the node (check_parts_time.py)")
    ap.add_argument("--before", metavar="REF", help="also time this commit's check")
    ap.add_argument("--after", metavar="REF", default="HEAD",
                    help="the commit --before is compared with (default HEAD)")
    args = ap.parse_args()
    lab = Lab(args.lab)
    py = f"{args.venv}/bin/python"
    variants = [["installed", [args.launcher, "check", "--nhc"], ""]]
    labels = {"installed": f"{args.launcher} check --nhc"}
    if args.before:
        for name, ref in (("before", args.before), ("after", args.after)):
            commit = _copy_tree(lab, args.node, ref, f"{TREES}/{name}")
            variants.append([name, [py, "-m", "rdmaprov", "check", "--nhc"],
                             f"{TREES}/{name}"])
            labels[name] = f"python -m rdmaprov check --nhc at {commit}"
    out = lab.exec(args.node, ["python3", "-c", PROBE, json.dumps(variants), str(args.runs),
                               py], timeout=900).stdout
    doc = json.loads(out)
    med = {}
    for name, _, _ in variants:
        d = doc[name]
        times, cpu = sorted(d["times"]), d["cpu"]
        med[name] = statistics.median(times)
        print(f"{labels[name]} on {args.lab}/{args.node}: {len(times)} runs, wall median "
              f"{med[name]:.3f} s (min {times[0]:.3f}, max {times[-1]:.3f}), CPU (user+sys) "
              f"median {statistics.median(cpu):.3f} s; exit codes {d['codes']}; "
              f"{d['modules']} modules imported, Ansible ones: "
              f"{', '.join(d['ansible']) or 'none'}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.with_parts:
        parts = (ROOT / "bench" / "check_parts_time.py").read_text()
        print(lab.exec(args.node, [py, "-c", parts, "--runs", str(args.runs), "--whole",
                                   str(args.runs)], timeout=900).stdout, end="")
    if args.before:
        cpu_b = statistics.median(doc["before"]["cpu"])
        cpu_a = statistics.median(doc["after"]["cpu"])
        print(f"before/after: wall {med['before'] / med['after']:.2f}x, CPU "
              f"{cpu_b / cpu_a:.2f}x (medians, runs interleaved)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
