"""The validation run: playbooks/validate.yml (role nccl_validate) through the engine, then the
judge over the results directory it wrote.

1. the fabric run: every host at once, one all_reduce sweep;
2. with ``--compare-socket``: the same sweep again with NCCL_IB_DISABLE=1 (label ``socket``);
3. pairwise rounds when the fabric is slow (or no bar is known, or when asked), to name a host;
4. rdmaprov.validate.judge turns the directory into a Report — the same code ``--judge DIR``
   runs on a directory copied from a cluster.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from rdmaprov import inventory as inventory_mod
from rdmaprov import progress, run_options
from rdmaprov.engine import RunnerSession, RunResult
from rdmaprov.errors import UserError
from rdmaprov.hostreason import host_reason
from rdmaprov.resources import playbook as find_playbook
from rdmaprov.validate import judge as J
from rdmaprov.validate import record, run_times
from rdmaprov.validate import verdict as V
from rdmaprov.validate.report import Report, write_html, write_junit
from rdmaprov.validate.request import Request


def write_outputs(report: Report, req: Request) -> None:
    junit, html = req.junit, req.html
    doc = report.to_dict() if junit or html else None  # one document for both (10,000 hosts)
    if junit:
        write_junit(report, junit, doc)
    if html:
        write_html(report, html, doc)


def judge_dir(req: Request) -> Report:
    """``--judge DIR``: a results directory, judged with the flags' policy; nothing runs."""
    assert req.judge is not None
    pol = req.policy()
    results = Path(req.judge)
    if not (results / "fabric" / "run.json").is_file():
        raise UserError(f"--judge {results}: not a validation results directory "
                        "(no fabric/run.json in it)")
    report = J.judge(results, pol, req.pair_fraction)
    write_outputs(report, req)
    return report


# The shared run options that are ansible-playbook's and that a validation gives no meaning:
# it changes no host setting (nothing for a dry run or a diff to show; under --check its role
# launches nothing, so a verdict would be of a run that did not happen), its role is one proof
# (the preflight and the run: a part of it proves nothing), and it keeps no failed-host list.
UNMEANT = (
    ("check", "--check: validate has no dry run: it changes no host setting, and under "
              "--check its role launches nothing, so there would be no run to judge "
              "(--plan N sizes the rounds without running anything)"),
    ("diff", "--diff: validate changes no file or setting, so there is no change to show"),
    ("tags", "--tags: validate runs its role whole (the preflight and the run are one proof; "
             "a part of it proves nothing)"),
    ("skip_tags", "--skip-tags: validate runs its role whole (the preflight and the run are "
                  "one proof; a part of it proves nothing)"),
    ("retry_failed", "--retry-failed: validate keeps no list of failed hosts (that list is "
                     "bootstrap's and reconfigure's); --limit HOSTS validates some hosts"),
)


def unmeant(run: Any) -> list[str]:
    """One line for each run option given (``run``: RunOptions, or the parsed command line)
    that a validation would drop: the one rule, before anything runs."""
    return [why for name, why in UNMEANT if getattr(run, name, None)]


def execute(req: Request, human: TextIO) -> Report:
    """Run the validation on the inventory's hosts and return its report (also written as
    JUnit / HTML when asked). Only a run recorded here is a completed one: a refused option
    (``unmeant``) stops it before any host, and an interrupted run raises."""
    assert req.inventory is not None
    problems = unmeant(req.run)
    if problems:
        raise UserError("\n".join(problems))
    run_options.check(req.run)
    pol = req.policy()
    started = time.time()
    keep = req.results is not None
    results = (req.results.resolve() if req.results is not None
               else Path(tempfile.mkdtemp(prefix="rdmaprov-validate-")))
    try:
        if keep:
            results.mkdir(parents=True, exist_ok=True)
            for old in results.iterdir():  # runs of an earlier call would be judged again
                if old.is_dir() and ((old / "run.json").is_file() or old.name == "rails"):
                    shutil.rmtree(old)
            (results / run_times.RECORD).unlink(missing_ok=True)  # an earlier run's
        extra = {"nccl_validate_results_dir": str(results), **req.role_vars("run")}
        # First, so that a user's own -e nccl_validate_worker_src still wins.
        run = replace(req.run, extra_vars=(json.dumps(worker_source()), *req.run.extra_vars,
                                           json.dumps(extra)))
        inv = inventory_mod.load(req.inventory, limit=run.limit,
                                 extra_vars=list(run.extra_vars))
        report = _live(req, run, inv, pol, results, human)
        run_times.controller(report, started, req.inventory)
        if keep:
            run_times.save_record(report, results)
        # The fleet record (what `status` shows) takes a completed validation only: a fabric
        # run that the judge read, or hosts that failed before it with their own reason.
        if (results / "fabric" / "run.json").is_file() or any(h.error for h in report.hosts):
            record.save(report, req.inventory)
    finally:
        if not keep:
            shutil.rmtree(results, ignore_errors=True)
    write_outputs(report, req)
    return report


def worker_source() -> dict[str, str]:
    """The worker this very rdmaprov runs, for the role to copy to the hosts. The role's own
    fallback (the nccl_validate_probe action) imports rdmaprov in Ansible's Python, which the
    engine starts without the caller's PYTHONPATH: a checkout run with
    ``PYTHONPATH=. python -m rdmaprov`` would not find it."""
    spec = importlib.util.find_spec("rdmaprov.validate.worker")
    assert spec is not None and spec.origin is not None
    return {"nccl_validate_worker_src": spec.origin}


def _play(run: run_options.RunOptions, inv: Any, extra: dict[str, Any], human: TextIO,
          hosts: list[str] | None = None) -> RunResult:
    spec = run_options.run_spec(run, find_playbook("validate.yml"), inv)
    spec.extravars = {**spec.extravars, **extra}
    if hosts is not None:
        spec.limit = ",".join(hosts)
    with progress.Progress(human, hosts=hosts or inv.selected, verbose=run.verbose) as view:
        return RunnerSession(spec, on_event=view).run()


def _failed_before_run(result: RunResult, run_dirs: list[Path]) -> dict[str, str]:
    """Hosts Ansible failed (or could not reach) that left no exit status in any of these runs:
    their reason is Ansible's. A host with an rc file is judged from its files."""
    out = {}
    for name, hr in result.hosts.items():
        if not hr.healthy and not any((d / name / "rc").is_file() for d in run_dirs):
            out[name] = host_reason(hr, "failed", failed_word=False)
    return out


def _live(req: Request, run: run_options.RunOptions, inv: Any, pol: V.Policy, results: Path,
          human: TextIO) -> Report:
    hosts = list(inv.selected)
    # The pair rounds run in the fabric run's own processes (the worker plans them with
    # rdmaprov/validate/rounds.py), so one launch names a slow host at any fleet size.
    pairs = req.role_vars("plan")
    if pol.allow_socket or pol.transport == "Socket":
        # The image preflight then does not fail a host for a missing RDMA userspace.
        pairs["nccl_validate_require_ib"] = "never"
    fabric = _play(run, inv, pairs, human)
    if fabric.error and not fabric.hosts:
        raise UserError(fabric.error)
    failures = _failed_before_run(fabric, [results / "fabric"])
    # A host that never launched has no steps.log: Ansible's time on its tasks is its figure.
    seconds = {h: fabric.hosts[h].seconds for h in failures if h in fabric.hosts}
    report = J.judge(results, pol, req.pair_fraction, hosts, failures, ansible_s=seconds)
    ran = [h for h in hosts if h not in failures]
    if req.compare_socket and ran and report.error is None:
        _play(run, inv, {"nccl_validate_run_label": "socket",
                         "nccl_validate_env_override": {"NCCL_IB_DISABLE": "1"},
                         "nccl_validate_rails": "never"}, human, ran)
        report = J.judge(results, pol, req.pair_fraction, hosts, failures, ansible_s=seconds)
    return report
