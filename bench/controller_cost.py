"""Controller cost per host: CPU-seconds and memory of the control host per host and run.

Runs, on a converged lab, each command as a child of this process and takes what the kernel
accounted to the whole tree that ran it (issue 29, item 2):

- CPU = user + system of the child and every descendant reaped under it (``os.wait4``), plus
  the orphans this process adopts as a child subreaper (the ssh ControlMasters that
  ControlPersist keeps after a run: their CPU during the run is read from /proc before and
  after; those that exit are reaped and counted);
- peak RSS = ``ru_maxrss`` of that wait4: the largest resident set of any ONE process of the
  tree (the kernel keeps the max over the reaped descendants, not a sum);
- peak tree PSS = the most the whole tree held at once: the sum of every live descendant's
  proportional set size (/proc/PID/smaps_rollup, shared pages split between the forks that
  share them), sampled every 0.2 s.

Commands: ``rdmaprov status``, a no-change ``rdmaprov bootstrap --no-validate`` re-run with
``--strategy linear`` and with the default (``auto``: mitogen where installed), on the first
N hosts (``--limit``) of one lab, for each N; ``--commands`` adds both bootstraps with
``--forks 4`` (memory and CPU once the hosts outnumber the forks). Variants and sizes run
interleaved, ``--rounds`` times, medians. Then CPU = a + b*N by least squares per command,
extrapolated to 1,000 and 10,000 hosts (estimates).

    .venv/bin/python -m rdmaprov lab up --name hscale --nodes 16
    .venv/bin/python -m rdmaprov bootstrap /var/lib/rdmaprov/lab/hscale/inventory.ini --no-validate
    .venv/bin/python bench/controller_cost.py /var/lib/rdmaprov/lab/hscale/inventory.ini \\
        --nodes 4 8 16 [--rounds 2] [--commands NAME ...] [--write]
    .venv/bin/python -m rdmaprov lab down --name hscale

`--write` replaces the "Controller cost per host" subsection of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
PARENT = "## Fleet scale on one control host (issue 29)"
SECTION = "### Controller cost per host (item 2)"
METHOD = """\
How: each command runs as a child of the bench (`python -m rdmaprov <command> INVENTORY --limit
<first N lab hosts> --json`, bootstrap with `--no-validate` on a converged lab, changed=0
checked on every run). CPU = user + system from `os.wait4` of that child, which the kernel sums
over the child and every descendant reaped under it (ansible-playbook, its forked workers,
mitogen's multiplexers, ssh), plus the ssh ControlMasters that ControlPersist leaves running: the
bench is a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`), so they become its children and
their CPU during the run is read from /proc before and after. "Peak RSS, one process" is that
wait4's `ru_maxrss`: the largest resident set of any ONE process of the tree (the kernel keeps
the maximum over reaped descendants, never a sum). "Peak PSS, whole tree" is what the control host
needed: the sum of the proportional set size (/proc/PID/smaps_rollup; pages shared between forks
split between them) of every live process of the tree, sampled every 0.2 s. Not counted: the
lab nodes' own side (sshd and the modules run inside the nodes). The lab's nodes are network
namespaces on the same 2 cores, so the controller competed with them and with other sessions'
work: CPU-seconds are inflated by contention less than wall time, but not immune (same-run
ratios compare best)."""
PR_SET_CHILD_SUBREAPER = 36
CLK = os.sysconf("SC_CLK_TCK")

# name -> rdmaprov arguments after the inventory
COMMANDS: dict[str, list[str]] = {
    "status": ["status", "--json"],
    "bootstrap, linear": ["bootstrap", "--json", "--no-validate", "--strategy", "linear"],
    "bootstrap, default": ["bootstrap", "--json", "--no-validate"],
    # forks below the host count: what memory and CPU do when N grows past the forks
    "bootstrap, linear, -f 4": ["bootstrap", "--json", "--no-validate", "--strategy", "linear",
                                "--forks", "4"],
    "bootstrap, default, -f 4": ["bootstrap", "--json", "--no-validate", "--forks", "4"],
    # The validation over the SSH path: the nccl_validate play (its Ansible part) and the
    # judge; the workers run on the nodes, outside the measured tree.
    "validate": ["validate", "--json"],
}
DEFAULT_COMMANDS = ["status", "bootstrap, linear", "bootstrap, default"]


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b*x; (a, b). One point: the line through the origin."""
    if len(xs) != len(ys) or not xs:
        raise ValueError("fit needs as many x as y, at least one")
    if len(set(xs)) == 1:
        return 0.0, statistics.fmean(ys) / xs[0]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    b = sxy / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def children() -> dict[int, float]:
    """This process's live children (adopted orphans included): pid -> CPU seconds so far."""
    me, out = os.getpid(), {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == me:
            out[int(d.name)] = (int(fields[11]) + int(fields[12])) / CLK
    return out


def tree_pss(root: int) -> int:
    """Sum of the PSS (kB) of root and its live descendants."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parent[int(d.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    members, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        for c, pp in parent.items():
            if pp == p and c not in members:
                members.add(c)
                frontier.append(c)
    total = 0
    for pid in members:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        m = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
        total += int(m.group(1)) if m else 0
    return total


def run(argv: list[str]) -> dict:
    """One command as a child: its tree's CPU, peak RSS of one process, peak PSS of the tree."""
    before = children()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], tree_pss(os.getpid()) - tree_pss_self())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out_chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    err = proc.stderr.read()
    reader.join()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    cpu = ru.ru_utime + ru.ru_stime
    maxrss = ru.ru_maxrss
    # adopted orphans: those that exited are reaped here, those alive are read from /proc
    while True:
        try:
            pid, _, oru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        cpu += oru.ru_utime + oru.ru_stime - before.pop(pid, 0.0)
    after = children()
    cpu += sum(v - before.get(pid, 0.0) for pid, v in after.items())
    text = b"".join(out_chunks).decode()
    doc = json.loads(text) if text.strip() else {}
    # validate exits 2 when its verdict fails a host (on the lab's shared cores, a host judged
    # slow): its Ansible part and the judge ran whole, which is what is measured.
    verdict = argv[3] == "validate" and proc.returncode == 2 and doc.get("passed") is False
    if verdict:
        print(f"validate: verdict FAIL ({len(doc.get('hosts') or [])} hosts judged); its cost"
              " counts", file=sys.stderr)
    if proc.returncode != 0 and not verdict:
        raise SystemExit(f"{' '.join(argv[3:6])} failed (exit {proc.returncode}): "
                         f"{err.decode()[-1500:]}")
    return {"cpu_s": cpu, "wall_s": wall, "maxrss_mb": maxrss / 1024,
            "pss_mb": peak[0] / 1024, "doc": doc}


def tree_pss_self() -> int:
    try:
        text = Path(f"/proc/{os.getpid()}/smaps_rollup").read_text()
    except OSError:
        return 0
    m = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else 0


def strategy_of(doc: dict) -> str:
    return str(doc.get("strategy", "linear"))


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def measure(inventory: Path, hosts: list[str], sizes: list[int], rounds: int,
            commands: dict[str, list[str]]) -> tuple[dict, list[float], dict]:
    runs: dict[str, dict[int, list[dict]]] = {c: {n: [] for n in sizes} for c in commands}
    loads, strategies = [load()], {}
    for r in range(rounds):
        for n in sizes:
            limit = ",".join(hosts[:n])
            for name, args in commands.items():
                argv = [sys.executable, "-m", "rdmaprov", args[0], str(inventory),
                        "--limit", limit, *args[1:]]
                res = run(argv)
                if name.startswith("bootstrap"):
                    changed = sum(h.get("changed", 0) for h in res["doc"]["hosts"].values())
                    if changed:
                        raise SystemExit(f"{name} on {n}: changed {changed}: not a no-change run")
                    strategies[name] = strategy_of(res["doc"])
                res.pop("doc")
                runs[name][n].append(res)
                print(f"round {r + 1}, {n} hosts, {name}: cpu {res['cpu_s']:.2f} s, "
                      f"wall {res['wall_s']:.1f} s, maxrss {res['maxrss_mb']:.0f} MB, "
                      f"tree pss {res['pss_mb']:.0f} MB, load {load():.1f}", file=sys.stderr)
                loads.append(load())
    return runs, loads, strategies


def median(rs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rs)


def report(runs: dict, sizes: list[int], loads: list[float], strategies: dict, args) -> str:
    head = ("| command | hosts | CPU (user+sys) | per host | wall | peak RSS, one process "
            "| peak PSS, whole tree |")
    lines = [head, "|---|---|---|---|---|---|---|"]
    fits = []
    for name, per in runs.items():
        label = name if name not in strategies else f"{name} ({strategies[name]})"
        for n in sizes:
            cpu = median(per[n], "cpu_s")
            lines.append(f"| {label} | {n} | {cpu:.2f} s | {cpu / n:.2f} s | "
                         f"{median(per[n], 'wall_s'):.1f} s | {median(per[n], 'maxrss_mb'):.0f} MB"
                         f" | {median(per[n], 'pss_mb'):.0f} MB |")
        xs = [float(n) for n in sizes]
        a, b = fit(xs, [median(per[n], "cpu_s") for n in sizes])
        pa, pb = fit(xs, [median(per[n], "pss_mb") for n in sizes])
        fits.append((label, a, b, pa, pb))
    lines += ["", "Fit (least squares over the medians, N = hosts) and extrapolation; "
              f"**estimates**, far outside the measured {min(sizes)} to {max(sizes)} hosts:",
              "",
              "| command | CPU-s = a + b·N | CPU-s at 1,000 | at 10,000 "
              "| CPU floor of the wall at 10,000 on 2 / 16 / 64 cores "
              "| peak PSS MB = a + b·N | at 50 forks (the default cap) |",
              "|---|---|---|---|---|---|---|"]
    for label, a, b, pa, pb in fits:
        c1, c10 = a + b * 1000, a + b * 10000
        floors = " / ".join(_dur(c10 / k) for k in (2, 16, 64))
        at50 = f"{pa + pb * 50:.0f} MB" if "-f " not in label else "-"
        lines.append(f"| {label} | {a:.2f} + {b:.3f}·N | {c1:.0f} s ({_dur(c1)}) | "
                     f"{c10:.0f} s ({_dur(c10)}) | {floors} | {pa:.0f} + {pb:.1f}·N | {at50} |")
    return "\n".join(lines)


def _dur(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def write_section(text: str) -> None:
    current = RESULTS.read_text()
    section = SECTION + "\n" + text.rstrip("\n") + "\n"
    pattern = re.compile(re.escape(SECTION) + r"\n.*?(?=\n### |\n## |\Z)", re.S)
    if pattern.search(current):
        new = pattern.sub(lambda _: section, current)
    elif PARENT in current:
        new = current.replace(PARENT + "\n", PARENT + "\n\n" + section, 1)
    else:
        new = current.rstrip("\n") + "\n\n" + PARENT + "\n\n" + section
    RESULTS.write_text(new)


def lab_hosts(inventory: Path) -> list[str]:
    hosts = []
    for line in inventory.read_text().splitlines():
        m = re.match(r"^(node\d+)\s", line)
        if m:
            hosts.append(m.group(1))
    return hosts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inventory", type=Path, help="a converged lab's inventory")
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--commands", nargs="+", choices=list(COMMANDS), metavar="NAME",
                        help="run these (default: " + ", ".join(DEFAULT_COMMANDS) + "; all: "
                        + ", ".join(COMMANDS) + ")")
    parser.add_argument("--raw", type=Path, help="also write every run's figures here (JSON)")
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("prctl(PR_SET_CHILD_SUBREAPER) failed: orphans' CPU not counted", file=sys.stderr)
    hosts = lab_hosts(args.inventory)
    sizes = sorted(n for n in args.nodes if n <= len(hosts))
    chosen = args.commands or DEFAULT_COMMANDS
    commands = {k: v for k, v in COMMANDS.items() if k in chosen}
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ")
    runs, loads, strategies = measure(args.inventory, hosts, sizes, args.rounds, commands)
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    text = "\n".join([
        f"Measured {started} on {platform.node()} ({os.cpu_count()} CPUs, shared with other "
        f"work; 1-minute load average {min(loads):.1f} to {max(loads):.1f} over the runs), "
        f"commit {commit}, "
        f"lab {args.inventory.parent.name} (network-namespace nodes on this host), "
        f"{args.rounds} interleaved rounds, medians.",
        "",
        report(runs, sizes, loads, strategies, args),
        "",
        METHOD,
        "",
        "Reproduce: `python bench/controller_cost.py " + str(args.inventory) + " --nodes "
        + " ".join(map(str, sizes)) + f" --rounds {args.rounds}"
        + (" --commands " + " ".join(f"'{c}'" for c in args.commands) if args.commands else "")
        + " --write`",
        "",
        "Raw CPU-seconds per run: " + json.dumps(
            {name: {n: [round(r["cpu_s"], 2) for r in per[n]] for n in sizes}
             for name, per in runs.items()}),
    ])
    if args.raw:
        args.raw.write_text(json.dumps(runs, indent=1))
    print(text)
    if args.write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
