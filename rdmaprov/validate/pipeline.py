"""The validation run: playbooks/validate.yml (role nccl_validate) through the engine, then the
judge over the results directory it wrote.

1. the fabric run: every host at once, one all_reduce sweep;
2. with ``--compare-socket``: the same sweep again with NCCL_IB_DISABLE=1 (label ``socket``);
3. pairwise rounds when the fabric is slow (or no bar is known, or when asked), to name a host;
4. rdmaprov.validate.judge turns the directory into a Report — the same code ``--judge DIR``
   runs on a directory copied from a cluster.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from rdmaprov import collection, progress
from rdmaprov import inventory as inventory_mod
from rdmaprov.cli import options
from rdmaprov.engine import RunnerSession, RunResult
from rdmaprov.errors import UserError
from rdmaprov.resources import playbook as find_playbook
from rdmaprov.validate import judge as J
from rdmaprov.validate import verdict as V
from rdmaprov.validate.report import Report, write_html, write_junit

# auto: when the fabric is below its bar or no bar is known; slow: only when below the bar
# (bootstrap's last phase, where a healthy first run should not pay for every pair).
PAIRWISE = ("auto", "slow", "always", "never")


def policy(args: argparse.Namespace) -> V.Policy:
    try:
        return V.Policy(transport=args.transport, allow_socket=args.allow_socket,
                        require_gdr=args.require_gdr, bw_fraction=float(args.bw_fraction),
                        min_busbw_GBps=(None if args.min_busbw in (None, "")
                                        else float(args.min_busbw)),
                        max_jitter=float(getattr(args, "max_jitter", None)
                                         or V.DEFAULT_MAX_JITTER),
                        rail_fraction=float(getattr(args, "rail_fraction", None)
                                            or V.DEFAULT_RAIL_FRACTION))
    except ValueError as exc:
        raise UserError(f"verdict options: {exc}") from None


# The run flags and how each is handed on once the table (ranges.FLAGS) has judged it.
_FLAG_TYPES = {"--image": str, "--max-bytes": str, "--timeout": int, "--bw-fraction": float,
               "--pair-fraction": float, "--min-busbw": float,
               "--max-jitter": float, "--rail-fraction": float}
_COUNTS = {"--plan": int, "--nodes": int}


def judge_flags(args: argparse.Namespace, flags: Iterable[str]) -> None:
    """``flags`` (given or through their environment variables) against the inputs table
    (ranges.FLAGS), every problem one line; each good value converted to its type."""
    table = collection.ranges
    problems = []
    for flag in flags:
        attr = flag.lstrip("-").replace("-", "_")
        value = getattr(args, attr, None)
        why = table.flag_problem(flag, value)
        if why:
            problems.append(why)
        elif value not in (None, ""):
            kind = {**_FLAG_TYPES, **_COUNTS}[flag]
            setattr(args, attr, int(float(value)) if kind is int else kind(value))
    if problems:
        raise UserError("\n".join(problems))


def check_flags(args: argparse.Namespace) -> V.Policy:
    """Every flag (also those given through the environment), before anything runs."""
    if args.pairwise not in PAIRWISE:
        raise UserError(f"--pairwise/RDMAPROV_VALIDATE_PAIRWISE: {args.pairwise!r} is not one "
                        f"of {', '.join(PAIRWISE)}")
    judge_flags(args, _FLAG_TYPES)
    return policy(args)


def write_outputs(report: Report, args: argparse.Namespace) -> None:
    junit, html = getattr(args, "junit", None), getattr(args, "html", None)
    doc = report.to_dict() if junit or html else None  # one document for both (10,000 hosts)
    if junit:
        write_junit(report, junit, doc)
    if html:
        write_html(report, html, doc)


def judge_dir(args: argparse.Namespace) -> Report:
    """``--judge DIR``: a results directory, judged with the flags' policy; nothing runs."""
    pol = check_flags(args)
    results = Path(args.judge)
    if not (results / "fabric" / "run.json").is_file():
        raise UserError(f"--judge {results}: not a validation results directory "
                        "(no fabric/run.json in it)")
    report = J.judge(results, pol, float(args.pair_fraction))
    write_outputs(report, args)
    return report


def execute(args: argparse.Namespace, human: TextIO) -> Report:
    """Run the validation on the inventory's hosts and return its report (also written as
    JUnit / HTML when asked)."""
    options.check_choices(args)
    options.forks(args)
    pol = check_flags(args)
    keep = args.results is not None
    results = (args.results.resolve() if keep
               else Path(tempfile.mkdtemp(prefix="rdmaprov-validate-")))
    try:
        if keep:
            results.mkdir(parents=True, exist_ok=True)
            for old in results.iterdir():  # runs of an earlier call would be judged again
                if old.is_dir() and ((old / "run.json").is_file() or old.name == "rails"):
                    shutil.rmtree(old)
        extra = _extra_vars(args, results)
        args.extra_vars = [*args.extra_vars, json.dumps(extra)]
        inv = inventory_mod.load(args.inventory, limit=args.limit, extra_vars=args.extra_vars)
        report = _live(args, inv, pol, results, human)
    finally:
        if not keep:
            shutil.rmtree(results, ignore_errors=True)
    write_outputs(report, args)
    return report


def _extra_vars(args: argparse.Namespace, results: Path) -> dict[str, Any]:
    ev: dict[str, Any] = {"nccl_validate_results_dir": str(results)}
    for flag, var in (("runtime", "nccl_validate_runtime"), ("image", "nccl_validate_image"),
                      ("backend", "nccl_validate_backend")):
        if getattr(args, flag, None):
            ev[var] = getattr(args, flag)
    if args.timeout:
        ev["nccl_validate_timeout"] = int(args.timeout)
    if args.max_bytes:
        ev["nccl_validate_worker_args"] = ["--max-bytes", str(args.max_bytes)]
    return ev


def _play(args: argparse.Namespace, inv: Any, extra: dict[str, Any], human: TextIO,
          hosts: list[str] | None = None) -> RunResult:
    spec = options.run_spec(args, find_playbook("validate.yml"), inv)
    spec.extravars = {**spec.extravars, **extra}
    if hosts is not None:
        spec.limit = ",".join(hosts)
    with progress.Progress(human, hosts=hosts or inv.selected,
                           verbose=getattr(args, "verbose", 0)) as view:
        return RunnerSession(spec, on_event=view).run()


def _failed_before_run(result: RunResult, run_dirs: list[Path]) -> dict[str, str]:
    """Hosts Ansible failed (or could not reach) that left no exit status in any of these runs:
    their reason is Ansible's. A host with an rc file is judged from its files."""
    out = {}
    for name, hr in result.hosts.items():
        if not hr.healthy and not any((d / name / "rc").is_file() for d in run_dirs):
            out[name] = hr.failure.message if hr.failure else "failed"
    return out


def _live(args: argparse.Namespace, inv: Any, pol: V.Policy, results: Path,
          human: TextIO) -> Report:
    hosts = list(inv.selected)
    # The pair rounds run in the fabric run's own processes (the worker plans them with
    # rdmaprov/validate/rounds.py), so one launch names a slow host at any fleet size.
    pairs = {"nccl_validate_pairs": args.pairwise,
             "nccl_validate_pair_fraction": float(args.pair_fraction),
             "nccl_validate_bw_fraction": pol.bw_fraction,
             "nccl_validate_min_busbw": pol.min_busbw_GBps or 0.0,
             "nccl_validate_max_jitter": pol.max_jitter}
    if pol.allow_socket or pol.transport == "Socket":
        # The image preflight then does not fail a host for a missing RDMA userspace.
        pairs["nccl_validate_require_ib"] = "never"
    fabric = _play(args, inv, pairs, human)
    if fabric.error and not fabric.hosts:
        raise UserError(fabric.error)
    failures = _failed_before_run(fabric, [results / "fabric"])
    report = J.judge(results, pol, float(args.pair_fraction), hosts, failures)
    if args.check:
        return report
    ran = [h for h in hosts if h not in failures]
    if getattr(args, "compare_socket", False) and ran and report.error is None:
        _play(args, inv, {"nccl_validate_run_label": "socket",
                          "nccl_validate_env_override": {"NCCL_IB_DISABLE": "1"},
                          "nccl_validate_rails": "never"}, human, ran)
        report = J.judge(results, pol, float(args.pair_fraction), hosts, failures)
    return report
