"""Wall time of a failing lab validation: one node's worker frozen (SIGSTOP), its fabric link
cut, or the whole node killed, mid-run.

    python bench/validate_failfast.py --lab NAME [--node node4] [--fault freeze|cut|die]
                                      [--tree DIR] [-e KEY=VALUE] [--phases]

Runs `rdmaprov validate INVENTORY --pairwise never --json` with the host runtime (gloo over the
lab's torch) against a running lab; once the victim node's worker process is up (3 s later):
freeze: SIGSTOP to its worker (a hung peer: its sockets stay open, nothing answers); cut: its
fabric interface (eth1, which the lab's GLOO_SOCKET_IFNAME names) set down, SSH on eth0 stays;
die: the node's init killed (every process of the node gone at once, as a power loss; the lab
brings the node back afterwards). Reports the wall time until the command returned, its exit
code, when the fault struck and one reason line per host. --tree runs the rdmaprov of another
source tree (e.g. an export of an older commit) for a before/after figure. The frozen process
is killed and the link set up again at the end either way. --phases keeps ansible-runner's
events and adds when the worker was launched (the launch task's start), the wall time from
there, and per task when its first host started it and its last host ended it (seconds from
the command's start): where the wall time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
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


def phases(artifacts: Path, wall0: float) -> list[str]:
    """One line per task: first start and last end over the hosts, in seconds from wall0."""
    spans: dict[str, list[float]] = {}
    order: list[str] = []
    for path in artifacts.glob("**/job_events/*.json"):
        try:
            ev = json.loads(path.read_text())
        except ValueError:
            continue
        data = ev.get("event_data") or {}
        task = data.get("task")
        if not task or not ev.get("created"):
            continue
        when = datetime.fromisoformat(ev["created"])
        if when.tzinfo is None:  # ansible-runner writes UTC without a zone
            when = when.replace(tzinfo=UTC)
        at = when.timestamp() - wall0
        if task not in spans:
            spans[task] = [at, at]
            order.append(task)
        spans[task][0] = min(spans[task][0], at)
        spans[task][1] = max(spans[task][1], at)
    rows = sorted(order, key=lambda t: spans[t][0])
    return [f"{spans[t][0]:7.1f} {spans[t][1]:7.1f}  {t}" for t in rows]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", required=True)
    ap.add_argument("--node", default="node4")
    ap.add_argument("--fault", choices=("freeze", "cut", "die"), default="freeze")
    ap.add_argument("--tree", type=Path, help="source tree whose rdmaprov to run")
    ap.add_argument("-e", action="append", default=[], help="extra role variable KEY=VALUE")
    ap.add_argument("--phases", action="store_true",
                    help="keep the runner's events and print a per-task time line")
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
    if args.phases:
        env["RDMAPROV_KEEP_ARTIFACTS"] = str(tmp / "artifacts")
    stopped: list[str] = []
    frozen_at: list[float] = []
    done = threading.Event()

    def freeze() -> None:
        while not done.is_set():
            pids = lab.exec(args.node, ["sh", "-c", FIND], check=False).stdout.split()
            if pids:
                time.sleep(3)  # let the sweep start: a hang inside a collective
                # Again: a process just started may not have forked its worker yet.
                pids = lab.exec(args.node, ["sh", "-c", FIND], check=False).stdout.split()
                if args.fault == "freeze":
                    lab.exec(args.node, ["kill", "-STOP", *pids], check=False)
                    stopped.extend(pids)
                elif args.fault == "cut":
                    lab.exec(args.node, ["ip", "link", "set", "eth1", "down"], check=False)
                    stopped.append("eth1 down")
                else:
                    os.kill(lab.node_pid(args.node), signal.SIGKILL)
                    stopped.append("node killed")
                frozen_at.append(time.time())
                return
            time.sleep(0.3)

    t0 = time.monotonic()
    wall0 = time.time()
    # Not from this checkout's directory: `python -m` puts the working directory first on the
    # path, ahead of --tree's PYTHONPATH.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=tmp)
    thread = threading.Thread(target=freeze, daemon=True)
    thread.start()
    out, _ = proc.communicate()
    wall = time.monotonic() - t0
    done.set()
    if args.fault == "freeze" and stopped:
        lab.exec(args.node, ["kill", "-KILL", *stopped], check=False)
    elif args.fault == "cut":
        lab.exec(args.node, ["ip", "link", "set", "eth1", "up"], check=False)
    elif stopped:
        lab.up(nodes=len(lab.addresses), log=lambda m: None)
    try:
        report = json.loads(out)
    except ValueError:
        report = {"hosts": [], "raw": out[-2000:]}
    doc = {"wall_s": round(wall, 1), "exit": proc.returncode, "fault": args.fault,
           "stopped": stopped,
           "frozen_at_s": round(frozen_at[0] - wall0, 1) if frozen_at else None,
           "hosts": {h["host"]: h["reasons"] for h in report.get("hosts", [])},
           "fabric_error": report.get("fabric_error"), "results": str(tmp / "results")}
    if args.phases:
        doc["phases"] = phases(tmp / "artifacts", wall0)
        launch = [float(p.split()[0]) for p in doc["phases"] if "Start on every" in p]
        if launch:
            doc["launched_at_s"] = launch[0]
            doc["from_launch_s"] = round(wall - launch[0], 1)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
