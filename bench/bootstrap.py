"""Wall time of a no-change re-run of `rdmaprov bootstrap` on the lab, by Ansible settings.

Compares, in one run on the same converged lab, rdmaprov's tuned settings (pipelining,
ControlPersist, forks = hosts, explicit facts) against Ansible's own defaults for the same
playbook, and the mitogen strategy when the package is installed. Variants run interleaved,
`--rounds` times each, so machine noise hits them alike; ratios are of medians.

    sudo .venv/bin/python bench/bootstrap.py --nodes 4 16 [--rounds 2] [--write]

`--write` replaces the "bootstrap" section of bench/RESULTS.md with the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rdmaprov.lab import Lab

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"

VARIANTS = {
    "ansible defaults": ["--ansible-profile", "defaults"],
    "rdmaprov tuned": ["--ansible-profile", "tuned"],
    "tuned + mitogen": ["--ansible-profile", "tuned", "--strategy", "mitogen"],
}


def bootstrap(inventory: Path, extra: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rdmaprov", "bootstrap", str(inventory),
                           "--json", "--no-validate", *extra],
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode != 0:
        raise SystemExit(f"bootstrap {' '.join(extra)} failed (exit {proc.returncode}): "
                         f"{doc.get('failures') or proc.stderr[-1500:]}")
    return elapsed, doc


def measure(nodes: int, rounds: int, variants: dict[str, list[str]]) -> dict:
    lab = Lab(f"bench{nodes}")
    lab.up(nodes=nodes, log=lambda m: print(m, file=sys.stderr))
    try:
        first, _ = bootstrap(lab.inventory, VARIANTS["rdmaprov tuned"])
        print(f"{nodes} nodes: first run {first:.1f}s", file=sys.stderr)
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, extra in variants.items():
                elapsed, doc = bootstrap(lab.inventory, extra)
                changed = sum(h["changed"] for h in doc["hosts"].values())
                if changed:
                    raise SystemExit(
                        f"{name}: a re-run changed {changed} things: not a no-change run")
                times[name].append(elapsed)
                print(f"{nodes} nodes, {name}: {elapsed:.1f}s", file=sys.stderr)
        return {"nodes": nodes, "first_run_s": first,
                "median_s": {k: statistics.median(v) for k, v in times.items()},
                "runs_s": times}
    finally:
        lab.down(log=lambda m: None)


def table(results: list[dict], variants: list[str]) -> str:
    base = "ansible defaults"
    head = "| nodes | first run (tuned) | " + " | ".join(variants) + " |"
    lines = [head, "|" + "---|" * (len(variants) + 2)]
    for r in results:
        cells = []
        for name in variants:
            med = r["median_s"][name]
            ratio = r["median_s"][base] / med
            cells.append(f"{med:.1f} s" + ("" if name == base else f" ({ratio:.2f}x)"))
        lines.append(f"| {r['nodes']} | {r['first_run_s']:.1f} s | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_section(text: str) -> None:
    current = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    section = "## bootstrap: no-change re-run on the lab\n\n" + text + "\n"
    pattern = re.compile(r"## bootstrap: no-change re-run on the lab\n.*?(?=\n## |\Z)", re.S)
    new = pattern.sub(section.rstrip("\n"), current) if pattern.search(current) \
        else current.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(new)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/bootstrap.py needs root (it brings up a lab)", file=sys.stderr)
        return 1
    variants = dict(VARIANTS)
    if importlib.util.find_spec("ansible_mitogen") is None:
        del variants["tuned + mitogen"]
    results = [measure(n, args.rounds, variants) for n in args.nodes]
    names = list(variants)
    text = "\n".join([
        f"Measured {dt.date.today()} on {platform.node()} ({os.cpu_count()} CPUs), "
        f"{args.rounds} interleaved rounds per variant, median wall seconds of "
        "`rdmaprov bootstrap --json --no-validate` re-running site.yml on a converged lab "
        "(changed=0 checked on every run); ratio = Ansible defaults / variant.",
        "",
        table(results, names),
        "",
        "Reproduce: `sudo .venv/bin/python bench/bootstrap.py --nodes "
        + " ".join(map(str, args.nodes)) + f" --rounds {args.rounds} --write`",
        "",
        "Raw runs (s): " + json.dumps({r["nodes"]: r["runs_s"] for r in results}),
    ])
    print(text)
    if args.write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
