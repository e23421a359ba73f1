"""Wall time and task results of a no-change re-run of `rdmaprov bootstrap` on the lab.

Compares, in one run on the same converged lab, rdmaprov's default (tuned settings, the probe-once
roles, mitogen when installed) against Ansible's own defaults (same roles, linear), the tuned
settings with the linear strategy, and optionally the rdmaprov of an older source tree (--before,
e.g. an export of the commit before the probe-once roles) with Ansible's defaults: today's playbook
as it was. Variants run interleaved, `--rounds` times each, so machine noise hits them alike;
ratios are of medians. Task results per host (ok + skipped + failed) come from each run's JSON.

    sudo .venv/bin/python bench/bootstrap.py --nodes 4 16 [--rounds 2] [--before DIR] [--write]

`--write` replaces the "bootstrap: probe once" section of bench/RESULTS.md with the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rdmaprov import settings
from rdmaprov.lab import Lab

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
SECTION = "## bootstrap: probe once, act only on drift (no-change re-run on the lab)"
BASE = "ansible defaults"
DEFAULT = "rdmaprov default"

# name -> (extra arguments, use the --before tree)
VARIANTS: dict[str, tuple[list[str], bool]] = {
    "before, ansible defaults": (["--ansible-profile", "defaults", "--strategy", "linear"], True),
    BASE: (["--ansible-profile", "defaults", "--strategy", "linear"], False),
    "tuned, linear": (["--ansible-profile", "tuned", "--strategy", "linear"], False),
    DEFAULT: ([], False),
}


def bootstrap(inventory: Path, extra: list[str], tree: Path | None) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RDMAPROV_STRATEGY", "RDMAPROV_ANSIBLE_PROFILE")}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rdmaprov", "bootstrap", str(inventory),
                           "--json", "--no-validate", *extra],
                          capture_output=True, text=True, check=False, env=env,
                          cwd=str(tree) if tree else None)
    elapsed = time.perf_counter() - start
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode != 0:
        raise SystemExit(f"bootstrap {' '.join(extra)} failed (exit {proc.returncode}): "
                         f"{doc.get('failures') or proc.stderr[-1500:]}")
    return elapsed, doc


def tasks_per_host(doc: dict) -> int:
    counts = {sum(h.get(k, 0) for k in ("ok", "skipped", "failed"))
              for h in doc["hosts"].values()}
    return max(counts)


def measure(nodes: int, rounds: int, variants: dict, before: Path | None) -> dict:
    """Each tree on a lab of its own, converged by it: the older roles may want other content
    (another nccl.conf, another module list), so one lab shared by both trees would change on
    every run and never be a no-change run. The runs still interleave, so the two labs see the
    same machine."""
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    labs = {False: Lab(f"hfb{nodes}")}
    if any(old for _, old in variants.values()):
        labs[True] = Lab(f"hfb{nodes}o")
    try:
        first = {}
        for old, lab in labs.items():
            lab.up(nodes=nodes, log=log)
            try:
                first[old], doc = bootstrap(lab.inventory, [], before if old else None)
            except SystemExit as exc:  # the first run is setup, not a figure: one more try
                log(f"first run failed, once more: {exc}")
                first[old], doc = bootstrap(lab.inventory, [], before if old else None)
            print(f"{nodes} nodes: first run {first[old]:.1f}s ({doc.get('strategy')}"
                  f"{', older tree' if old else ''})", file=sys.stderr)
        times: dict[str, list[float]] = {name: [] for name in variants}
        tasks: dict[str, int] = {}
        for _ in range(rounds):
            for name, (extra, old) in variants.items():
                elapsed, doc = bootstrap(labs[old].inventory, extra, before if old else None)
                changed = sum(h["changed"] for h in doc["hosts"].values())
                if changed:
                    raise SystemExit(
                        f"{name}: a re-run changed {changed} things: not a no-change run")
                times[name].append(elapsed)
                tasks[name] = tasks_per_host(doc)
                print(f"{nodes} nodes, {name}: {elapsed:.1f}s, {tasks[name]} task results/host",
                      file=sys.stderr)
        return {"nodes": nodes, "first_run_s": first[False], "tasks": tasks,
                "median_s": {k: statistics.median(v) for k, v in times.items()},
                "runs_s": times}
    finally:
        for lab in labs.values():
            lab.down(log=lambda m: None)


def table(results: list[dict], variants: list[str]) -> str:
    base = "before, ansible defaults" if "before, ansible defaults" in variants else BASE
    head = "| nodes | first run (default) | " + " | ".join(variants) + " |"
    lines = [head, "|" + "---|" * (len(variants) + 2)]
    for r in results:
        cells = []
        for name in variants:
            med = r["median_s"][name]
            ratio = r["median_s"][base] / med
            cells.append(f"{med:.1f} s" + ("" if name == base else f" ({ratio:.2f}x)"))
        lines.append(f"| {r['nodes']} | {r['first_run_s']:.1f} s | " + " | ".join(cells) + " |")
    lines.append("| task results per host | | "
                 + " | ".join(str(results[0]["tasks"][n]) for n in variants) + " |")
    if len(results) > 1:
        lo, hi = results[0], results[-1]
        lines.append(f"| growth {lo['nodes']}->{hi['nodes']} | "
                     f"{hi['first_run_s'] / lo['first_run_s']:.2f}x | "
                     + " | ".join(f"{hi['median_s'][n] / lo['median_s'][n]:.2f}x"
                                  for n in variants) + " |")
    return "\n".join(lines)


def write_section(text: str) -> None:
    current = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    section = SECTION + "\n\n" + text + "\n"
    pattern = re.compile(re.escape(SECTION) + r"\n.*?(?=\n## |\Z)", re.S)
    new = pattern.sub(lambda _: section.rstrip("\n"), current) if pattern.search(current) \
        else current.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(new)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", type=Path,
                        help="source tree of an older rdmaprov (a `git archive` export) to run "
                        "with Ansible's defaults as the 'before' figure")
    parser.add_argument("--variants", nargs="+", action="extend", choices=list(VARIANTS),
                        metavar="NAME",
                        help="run only these variants (default: all; "
                        + ", ".join(repr(v) for v in VARIANTS) + ")")
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/bootstrap.py needs root (it brings up a lab)", file=sys.stderr)
        return 1
    variants = dict(VARIANTS)
    if args.variants:
        variants = {k: v for k, v in variants.items() if k in args.variants}
    if args.before is None:
        variants.pop("before, ansible defaults", None)
    before = args.before.resolve() if args.before else None
    results = [measure(n, args.rounds, variants, before) for n in args.nodes]
    names = list(variants)
    text = "\n".join([
        f"Measured {dt.date.today()} on {platform.node()} ({os.cpu_count()} CPUs, shared with "
        "other work: noisy, so compare the ratios within one run), "
        f"{args.rounds} interleaved rounds per variant, median wall seconds of "
        "`rdmaprov bootstrap --json --no-validate` re-running site.yml on a converged lab "
        "(changed=0 checked on every run); ratio = the first column / variant. rdmaprov "
        f"default = `--strategy auto`, here {settings.resolve_strategy('auto')}.",
        "",
        table(results, names),
        "",
        "Reproduce: `sudo .venv/bin/python bench/bootstrap.py --nodes "
        + " ".join(map(str, args.nodes)) + f" --rounds {args.rounds}"
        + (" --before DIR" if before else "")
        + (" --variants " + " ".join(f"'{v}'" for v in args.variants) if args.variants else "")
        + " --write`",
        "",
        "Raw runs (s): " + json.dumps({r["nodes"]: r["runs_s"] for r in results}),
    ])
    print(text)
    if args.write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
