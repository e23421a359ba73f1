"""Wall time of a failing lab validation: one node's worker frozen (SIGSTOP) mid-run.

    python bench/validate_failfast.py --lab NAME [--node node4] [--tree DIR] [-e KEY=VALUE]

Runs `rdmaprov validate INVENTORY --pairwise never --json` with the host runtime (gloo over the
lab's torch) against a running lab; once the victim node's worker process is up, freezes it
with SIGSTOP (a hung peer: its sockets stay open, nothing answers), and reports the wall time
until the command returned, its exit code and one reason line per host. --tree runs the
rdmaprov of another source tree (e.g. an export of an older commit) for a before/after figure.
The frozen process is killed at the end either way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rdmaprov.lab import Lab

VARS = {"nccl_validate_runtime": "host", "nccl_validate_backend": "gloo",
        "nccl_validate_pythonpath": ["/opt/rdmaprov-torch"],
        "nccl_validate_worker_args": ["--max-bytes", "64M", "--iters", "20"]}

# Inside the node: the worker processes deepest in the tree (no worker.py child of their own),
# not torchrun's agent (its argv names worker.py too), not the image preflight.
FIND = r"""
for d in /proc/[0-9]*; do
  p=${d#/proc/}; cmd=$(tr '\0' ' ' <$d/cmdline 2>/dev/null)
  case "$cmd" in *torch.distributed.run*|*--preflight*) continue ;; *bin/worker.py*) ;;
    *) continue ;; esac
  kids=$(cat $d/task/*/children 2>/dev/null)
  deep=1
  for k in $kids; do grep -q bin/worker.py /proc/$k/cmdline 2>/dev/null && deep=0; done
  [ $deep = 1 ] && echo $p
done
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", required=True)
    ap.add_argument("--node", default="node4")
    ap.add_argument("--tree", type=Path, help="source tree whose rdmaprov to run")
    ap.add_argument("-e", action="append", default=[], help="extra role variable KEY=VALUE")
    args = ap.parse_args()
    lab = Lab(args.lab)
    variables = dict(VARS)
    for kv in args.e:
        k, _, v = kv.partition("=")
        variables[k] = json.loads(v) if v[:1] in "[{0123456789" else v
    env = dict(os.environ)
    if args.tree:
        env["PYTHONPATH"] = str(args.tree.resolve())
        # The role finds the worker through Ansible's Python, which does not see PYTHONPATH.
        variables["nccl_validate_worker_src"] = str(
            args.tree.resolve() / "rdmaprov" / "validate" / "worker.py")
    tmp = Path(tempfile.mkdtemp(prefix="failfast-"))
    (tmp / "vars.json").write_text(json.dumps(variables))
    cmd = [sys.executable, "-m", "rdmaprov", "validate", str(lab.inventory), "-e",
           f"@{tmp / 'vars.json'}", "--json", "--pairwise", "never", "--results",
           str(tmp / "results")]
    stopped: list[str] = []
    done = threading.Event()

    def freeze() -> None:
        while not done.is_set():
            pids = lab.exec(args.node, ["sh", "-c", FIND], check=False).stdout.split()
            if pids:
                time.sleep(3)  # let the sweep start: a hang inside a collective
                # Again: a process just started may not have forked its worker yet.
                pids = lab.exec(args.node, ["sh", "-c", FIND], check=False).stdout.split()
                lab.exec(args.node, ["kill", "-STOP", *pids], check=False)
                stopped.extend(pids)
                return
            time.sleep(0.3)

    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    thread = threading.Thread(target=freeze, daemon=True)
    thread.start()
    out, _ = proc.communicate()
    wall = time.monotonic() - t0
    done.set()
    if stopped:
        lab.exec(args.node, ["kill", "-KILL", *stopped], check=False)
    try:
        report = json.loads(out)
    except ValueError:
        report = {"hosts": [], "raw": out[-2000:]}
    print(json.dumps({"wall_s": round(wall, 1), "exit": proc.returncode, "stopped": stopped,
                      "hosts": {h["host"]: h["reasons"] for h in report.get("hosts", [])},
                      "fabric_error": report.get("fabric_error")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
