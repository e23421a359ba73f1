"""`rdmaprov validate INVENTORY`: all_reduce on every host at once, then a verdict.

Runs playbooks/validate.yml (role nccl_validate) through the engine: the worker starts on every
host at once, in a container or on the host, and each host's JSON, NCCL log and port counters
come back to a results directory. The verdict comes from rdmaprov.validate.verdict (transport
from NCCL's own log, GDR, ports, busbw against a threshold). When the fabric is slow, or no
threshold is known, pairwise rounds (every pair of hosts once) name the host to blame.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaprov import inventory as inventory_mod
from rdmaprov import progress
from rdmaprov.cli import options
from rdmaprov.engine import RunnerSession, RunResult
from rdmaprov.errors import UserError
from rdmaprov.parsers.nccl_log import parse_nccl_log
from rdmaprov.resources import playbook as find_playbook
from rdmaprov.validate import report_html
from rdmaprov.validate import verdict as V

# Without a threshold, a pair slower than this fraction of the best pair is slow (lab gloo pairs
# on 2 busy cores spread to ~0.6 of the best; a 50 Mbit/s throttled host sits near 0.01).
DEFAULT_PAIR_FRACTION = 0.4
# auto: when the fabric is below its bar or no bar is known; slow: only when below the bar
# (bootstrap's last phase, where a healthy first run should not pay for every pair).
PAIRWISE = ("auto", "slow", "always", "never")

EPILOG = """\
exit codes:
  0  the fabric passed: every host ran, transport as required, bandwidth above the bar
  1  usage or input error: bad flag, inventory, variable; no host contacted
  2  the fabric failed: a host could not run (one line each), a check failed, or a host is
     slower than its peers (pairwise rounds name it)
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "validate",
        help="prove the fabric: all_reduce on every host at once, verdict per host",
        description="Start rdmaprov's all_reduce worker on every host at once (container or "
        "host runtime), fetch its JSON and NCCL_DEBUG=INFO log, and judge: the transport NCCL "
        "used (IB required for nccl unless told otherwise), GPUDirect RDMA if required, busbw "
        "against a fraction of the line rate or an explicit threshold. Pairwise rounds name "
        "the slow host. Flags override the inventory's nccl_validate_* variables.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inventory", type=Path, help="inventory file or directory (INI or YAML)")
    env = os.environ.get
    w = parser.add_argument_group("what runs (defaults: the inventory's nccl_validate_* values)")
    w.add_argument("--runtime", choices=("container", "host"),
                   default=env("RDMAPROV_VALIDATE_RUNTIME"),
                   help="container (an image per host) or host (the host's python3) "
                        "(env RDMAPROV_VALIDATE_RUNTIME)")
    w.add_argument("--image", default=env("RDMAPROV_VALIDATE_IMAGE"),
                   help="image with torch for the container runtime (env RDMAPROV_VALIDATE_IMAGE)")
    w.add_argument("--backend", choices=("nccl", "gloo"), default=env("RDMAPROV_VALIDATE_BACKEND"),
                   help="nccl on GPU hosts, gloo on CPU-only ones (env RDMAPROV_VALIDATE_BACKEND)")
    w.add_argument("--max-bytes", default=env("RDMAPROV_VALIDATE_MAX_BYTES"),
                   help="largest all_reduce size, e.g. 256M (env RDMAPROV_VALIDATE_MAX_BYTES)")
    w.add_argument("--timeout", type=int, default=env("RDMAPROV_VALIDATE_TIMEOUT"),
                   help="seconds a run may take on a host before it is killed and reported "
                        "(env RDMAPROV_VALIDATE_TIMEOUT; default 600)")
    j = parser.add_argument_group("verdict")
    j.add_argument("--transport", choices=("IB", "Socket"),
                   default=env("RDMAPROV_VALIDATE_TRANSPORT"),
                   help="required transport (env RDMAPROV_VALIDATE_TRANSPORT; default IB for "
                        "nccl, Socket for gloo)")
    j.add_argument("--allow-socket", action="store_true",
                   default=env("RDMAPROV_VALIDATE_ALLOW_SOCKET") == "1",
                   help="accept NCCL on Socket (env RDMAPROV_VALIDATE_ALLOW_SOCKET=1)")
    j.add_argument("--require-gdr", action="store_true",
                   default=env("RDMAPROV_VALIDATE_REQUIRE_GDR") == "1",
                   help="require GPUDirect RDMA (env RDMAPROV_VALIDATE_REQUIRE_GDR=1)")
    j.add_argument("--bw-fraction", type=float,
                   default=env("RDMAPROV_VALIDATE_BW_FRACTION", str(V.DEFAULT_BW_FRACTION)),
                   help="busbw must reach this fraction of the line rate (env "
                        f"RDMAPROV_VALIDATE_BW_FRACTION; default {V.DEFAULT_BW_FRACTION})")
    j.add_argument("--min-busbw", type=float, default=env("RDMAPROV_VALIDATE_MIN_BUSBW"),
                   metavar="GBPS", help="explicit busbw threshold in GB/s, instead of the "
                   "fraction of the line rate (env RDMAPROV_VALIDATE_MIN_BUSBW)")
    j.add_argument("--pairwise", choices=PAIRWISE,
                   default=env("RDMAPROV_VALIDATE_PAIRWISE", "auto"),
                   help="pairwise rounds (3+ hosts): auto when the fabric is too slow or no "
                        "threshold is known; slow only when it is too slow (env "
                        "RDMAPROV_VALIDATE_PAIRWISE; default auto)")
    j.add_argument("--pair-fraction", type=float,
                   default=env("RDMAPROV_VALIDATE_PAIR_FRACTION", str(DEFAULT_PAIR_FRACTION)),
                   help="with no threshold, a pair is slow below this fraction of the best "
                        "pair (env RDMAPROV_VALIDATE_PAIR_FRACTION; default "
                        f"{DEFAULT_PAIR_FRACTION})")
    o = parser.add_argument_group("output")
    o.add_argument("--junit", type=Path, metavar="FILE", default=env("RDMAPROV_VALIDATE_JUNIT"),
                   help="also write a JUnit XML report (env RDMAPROV_VALIDATE_JUNIT)")
    o.add_argument("--html", type=Path, metavar="FILE", default=env("RDMAPROV_VALIDATE_HTML"),
                   help="also write a self-contained HTML report: verdict, checks, hosts, "
                        "pairs, busbw against message size (env RDMAPROV_VALIDATE_HTML)")
    o.add_argument("--results", type=Path, metavar="DIR", default=env("RDMAPROV_VALIDATE_RESULTS"),
                   help="keep the fetched results (worker JSON, NCCL logs, counters) in DIR "
                        "(env RDMAPROV_VALIDATE_RESULTS; default: a temporary dir, removed)")
    options.add_run_options(parser)
    parser.set_defaults(func=run)


# ----- pure parts -----------------------------------------------------------------------------

@dataclass
class HostRow:
    host: str
    status: str = "pass"  # pass | fail
    transport: str = ""
    busbw: float | None = None  # pairwise: this host's best pair
    reasons: list[str] = field(default_factory=list)

    def fail(self, reason: str) -> None:
        self.status = "fail"
        if reason not in self.reasons:
            self.reasons.append(reason)

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "passed": self.status == "pass", "transport": self.transport,
                "busbw_GBps": self.busbw, "reasons": self.reasons}


def blame_pairs(pairs: dict[tuple[str, str], float | None], threshold: float | None,
                fraction: float = DEFAULT_PAIR_FRACTION,
                ) -> tuple[float, dict[str, str], list[str]]:
    """Which hosts make the fabric slow, from each pair's peak busbw.

    A pair is slow below ``threshold`` (GB/s) or, without one, below ``fraction`` x the best
    pair (not the median: with 3 hosts one slow host makes 2 of the 3 pairs slow). A host is
    to blame when every pair it is in is slow (with 3+ hosts, a host whose partner is the slow
    one still has a fast pair). Returns (bar, {host: reason}, slow pairs
    that no single host explains).
    """
    measured = {p: bw for p, bw in pairs.items() if bw is not None}
    if not measured:  # no pair finished: nothing to compare, but every pair is a failure
        return 0.0, {}, [f"{'+'.join(p)} no result" for p in sorted(pairs)]
    bar = threshold if threshold is not None else fraction * max(measured.values())
    slow = {p for p, bw in pairs.items() if bw is None or bw < bar}
    hosts = sorted({h for p in pairs for h in p})
    blamed: dict[str, str] = {}
    for h in hosts:
        mine = {p: pairs[p] for p in pairs if h in p}
        if len(hosts) >= 3 and mine and all(p in slow for p in mine):
            figures = ", ".join(f"{'+'.join(p)} {_fmt(bw)}" for p, bw in sorted(mine.items()))
            blamed[h] = f"slow in every pair it is in ({figures}; bar {bar:.3f} GB/s)"
    unexplained = [f"{'+'.join(p)} {_fmt(pairs[p])}" for p in sorted(slow)
                   if not any(h in blamed for h in p)]
    if len(hosts) == 2 and slow:
        unexplained = [f"{'+'.join(p)} {_fmt(pairs[p])} (2 hosts: cannot tell which is slow)"
                       for p in sorted(slow)]
    return bar, blamed, unexplained


def _fmt(bw: float | None) -> str:
    return "no result" if bw is None else f"{bw:.3f} GB/s"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    text = text.strip()
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


@dataclass
class RunData:
    """One run's fetched files: the rank-0 document and each inventory host's NCCL report."""

    label: str
    hosts: list[str]
    doc: dict[str, Any] | None
    reports: dict[str, Any]  # inventory host -> NcclLogReport | None
    name_of: dict[str, str]  # worker hostname -> inventory host


def load_run(run_dir: Path) -> RunData | None:
    meta = _read_json(run_dir / "run.json")
    if meta is None:
        return None
    hosts = list(meta.get("hosts") or [])
    master = meta.get("master") or (hosts[0] if hosts else "")
    doc = _read_json(run_dir / master / "result.json")
    reports: dict[str, Any] = {}
    for h in hosts:
        log = run_dir / h / "worker.log"
        report = None
        if log.is_file():
            with log.open(errors="replace") as fh:
                report = parse_nccl_log(fh)
            if not report.nccl_lines:
                report = None
        reports[h] = report
    name_of: dict[str, str] = {}
    nproc = max(1, int(meta.get("nproc_per_node") or 1))
    for r in (doc or {}).get("ranks") or []:
        idx = int(r.get("rank", 0)) // nproc
        if idx < len(hosts) and r.get("hostname"):
            name_of.setdefault(str(r["hostname"]), hosts[idx])
    return RunData(str(meta.get("label") or run_dir.name), hosts, doc, reports, name_of)


def judge_fabric(run: RunData, policy: V.Policy,
                 rows: dict[str, HostRow]) -> V.FabricVerdict | None:
    if run.doc is None:
        return None
    ours = {worker: inv for worker, inv in run.name_of.items()}
    reports = {worker: run.reports.get(inv) for worker, inv in ours.items()}
    fv = V.fabric_verdict(run.doc, reports, {}, policy)
    for hv in fv.hosts:
        row = rows.get(ours.get(hv.host, hv.host))
        if row is None:
            continue
        for c in hv.checks:
            if c.name == "transport":
                row.transport = c.reason
            if c.status == V.FAIL:
                row.fail(c.reason)
    return fv


# ----- the command ----------------------------------------------------------------------------

def _extra_vars(args: argparse.Namespace, results: Path) -> dict[str, Any]:
    ev: dict[str, Any] = {"nccl_validate_results_dir": str(results)}
    if args.runtime:
        ev["nccl_validate_runtime"] = args.runtime
    if args.image:
        ev["nccl_validate_image"] = args.image
    if args.backend:
        ev["nccl_validate_backend"] = args.backend
    if args.timeout:
        ev["nccl_validate_timeout"] = int(args.timeout)
    if args.max_bytes:
        ev["nccl_validate_worker_args"] = ["--max-bytes", str(args.max_bytes)]
    return ev


def _policy(args: argparse.Namespace) -> V.Policy:
    try:
        return V.Policy(transport=args.transport, allow_socket=args.allow_socket,
                        require_gdr=args.require_gdr, bw_fraction=float(args.bw_fraction),
                        min_busbw_GBps=(None if args.min_busbw in (None, "")
                                        else float(args.min_busbw)))
    except ValueError as exc:
        raise UserError(f"verdict options: {exc}") from None


def _run_play(args: argparse.Namespace, inv: Any, extra: dict[str, Any], human: Any) -> RunResult:
    spec = options.run_spec(args, find_playbook("validate.yml"), inv)
    spec.extravars = {**spec.extravars, **extra}
    with progress.Progress(human, hosts=inv.selected) as view:
        return RunnerSession(spec, on_event=view).run()


def run(args: argparse.Namespace) -> int:
    report = execute(args)
    human = sys.stderr if args.json else sys.stdout
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_table(report, human)
    return int(report["exit_code"])


def defaults(inventory: Path) -> argparse.Namespace:
    """validate's options at their defaults (what `bootstrap` runs as its last phase)."""
    parser = argparse.ArgumentParser(add_help=False)
    register(parser.add_subparsers())
    return parser.parse_args(["validate", str(inventory)])


def execute(args: argparse.Namespace) -> dict[str, Any]:
    """Run the validation and return its report (also written as JUnit / HTML when asked)."""
    options.check_choices(args)
    options.forks(args)
    if args.pairwise not in PAIRWISE:
        raise UserError(f"--pairwise/RDMAPROV_VALIDATE_PAIRWISE: {args.pairwise!r} is not one "
                        f"of {', '.join(PAIRWISE)}")
    if not 0 < float(args.pair_fraction) <= 1:
        raise UserError(f"--pair-fraction: {args.pair_fraction} must be in (0, 1]")
    policy = _policy(args)
    keep = args.results is not None
    results = (args.results.resolve() if keep
               else Path(tempfile.mkdtemp(prefix="rdmaprov-validate-")))
    try:
        if keep:
            results.mkdir(parents=True, exist_ok=True)
            for old in results.iterdir():  # runs of an earlier call would be judged again
                if old.is_dir() and (old / "run.json").is_file():
                    shutil.rmtree(old)
        extra = _extra_vars(args, results)
        args.extra_vars = [*args.extra_vars, json.dumps(extra)]
        inv = inventory_mod.load(args.inventory, limit=args.limit, extra_vars=args.extra_vars)
        human = sys.stderr if args.json else sys.stdout
        report = validate(args, inv, policy, results, human)
    finally:
        if not keep:
            shutil.rmtree(results, ignore_errors=True)
    if args.junit:
        write_junit(report, args.junit)
    if getattr(args, "html", None):
        write_html(report, args.html)
    return report


def validate(args: argparse.Namespace, inv: Any, policy: V.Policy, results: Path,
             human: Any) -> dict[str, Any]:
    hosts = list(inv.selected)
    rows = {h: HostRow(h) for h in hosts}
    fabric = _run_play(args, inv, {"nccl_validate_mode": "fabric"}, human)
    if fabric.error and not fabric.hosts:
        raise UserError(fabric.error)
    for name, hr in fabric.hosts.items():
        if not hr.healthy and name in rows:
            rows[name].fail(hr.failure.message if hr.failure else "failed")
    run = load_run(results / "fabric")
    fv = judge_fabric(run, policy, rows) if run else None
    fabric_checks = [c.__dict__ for c in fv.checks] if fv else []

    slow_fabric = bool(fv and any(c.name == "bandwidth" and c.status == V.FAIL for c in fv.checks))
    no_bar = bool(fv and fv.threshold_GBps is None)
    all_ran = bool((fv and fv.passed) or slow_fabric)
    want_pairs = len(hosts) >= 3 and not args.check and (
        args.pairwise == "always"
        or (args.pairwise == "auto" and all_ran and (slow_fabric or no_bar))
        or (args.pairwise == "slow" and all_ran and slow_fabric))
    pairwise: dict[str, Any] | None = None
    if want_pairs:
        pairwise = run_pairwise(args, inv, policy, results, rows, human, fv)
    fabric_ok = fv is not None and all(c.status != V.FAIL for c in fv.checks)
    blamed = bool(pairwise and (pairwise["blamed"] or pairwise["unexplained"]))
    passed = fabric_ok and all(r.status == "pass" for r in rows.values()) and not blamed
    return {
        "schema": "rdmaprov.validate.report/1",
        "passed": passed,
        "exit_code": 0 if passed else 2,
        "backend": (run.doc or {}).get("backend") if run else None,
        "world_size": (run.doc or {}).get("world_size") if run else None,
        "busbw_GBps": fv.busbw_GBps if fv else None,
        "threshold_GBps": fv.threshold_GBps if fv else None,
        "fabric_checks": fabric_checks,
        "fabric_error": (None if fv else _no_result_reason(run, fabric)),
        "pairwise": pairwise,
        "hosts": [rows[h].to_dict() for h in hosts],
        "results": (run.doc or {}).get("results") if run else None,
    }


def _no_result_reason(run: RunData | None, result: RunResult) -> str:
    if result.failed_hosts:
        return f"no result: {len(result.failed_hosts)} host(s) failed (see each host)"
    return "no result from the worker (no JSON document from rank 0)"


def run_pairwise(args: argparse.Namespace, inv: Any, policy: V.Policy, results: Path,
                 rows: dict[str, HostRow], human: Any,
                 fv: V.FabricVerdict | None) -> dict[str, Any]:
    res = _run_play(args, inv, {"nccl_validate_mode": "pairwise"}, human)
    pairs: dict[tuple[str, str], float | None] = {}
    for d in sorted(results.glob("pair-*")):
        pr = load_run(d)
        if pr is None or len(pr.hosts) != 2:
            continue
        ok = pr.doc is not None and pr.doc.get("ok")
        pairs[(pr.hosts[0], pr.hosts[1])] = V.peak_busbw(pr.doc) if ok and pr.doc else None
    for name, hr in res.hosts.items():
        if not hr.healthy and name in rows and hr.failure:
            rows[name].fail(f"pairwise: {hr.failure.message}")
    bar, blamed, unexplained = blame_pairs(pairs, fv.threshold_GBps if fv else None,
                                           float(args.pair_fraction))
    if not pairs:
        unexplained.append("the pairwise rounds produced no result at all")
    for h, why in blamed.items():
        if h in rows:
            rows[h].fail(why)
    for row in rows.values():
        mine = [bw for p, bw in pairs.items() if row.host in p and bw is not None]
        row.busbw = max(mine) if mine else None
    return {"bar_GBps": round(bar, 4), "pairs": [
        {"hosts": list(p), "busbw_GBps": bw} for p, bw in sorted(pairs.items())],
        "blamed": blamed, "unexplained": unexplained}


def print_table(report: dict[str, Any], out: Any) -> None:
    print(file=out)
    bw = report.get("busbw_GBps")
    thr = report.get("threshold_GBps")
    print(f"fabric: backend {report.get('backend')}, {report.get('world_size')} ranks, "
          f"peak busbw {'-' if bw is None else f'{bw:.3f} GB/s'}"
          f"{'' if thr is None else f' (bar {thr:.3f} GB/s)'}", file=out)
    for c in report.get("fabric_checks") or []:
        print(f"  {c['status']:5} {c['name']:10} {c['reason']}", file=out)
    if report.get("fabric_error"):
        print(f"  fail  worker     {report['fabric_error']}", file=out)
    pw = report.get("pairwise")
    if pw:
        print(f"pairwise rounds (bar {pw['bar_GBps']:.3f} GB/s):", file=out)
        for p in pw["pairs"]:
            print(f"  {'+'.join(p['hosts']):24} {_fmt(p['busbw_GBps'])}", file=out)
        for u in pw["unexplained"]:
            print(f"  slow pair, no single host to blame: {u}", file=out)
    width = max([len(h["host"]) for h in report["hosts"]] + [4])
    print(f"\n{'host':{width}}  {'result':6}  {'pair busbw':>11}  reason", file=out)
    for h in report["hosts"]:
        b = "-" if h["busbw_GBps"] is None else f"{h['busbw_GBps']:.3f} GB/s"
        reason = "; ".join(h["reasons"]) or h["transport"]
        print(f"{h['host']:{width}}  {'PASS' if h['passed'] else 'FAIL':6}  {b:>11}  {reason}",
              file=out)
    print(f"\nverdict: {'PASS' if report['passed'] else 'FAIL'}", file=out)


def write_junit(report: dict[str, Any], path: Path) -> None:
    suite = ET.Element("testsuite", name="rdmaprov.validate",
                       tests=str(len(report["hosts"]) + 1))
    failures = 0
    fabric = ET.SubElement(suite, "testcase", classname="rdmaprov.validate", name="fabric")
    fabric_reasons = [c["reason"] for c in report.get("fabric_checks") or []
                      if c["status"] == V.FAIL]
    if report.get("fabric_error"):
        fabric_reasons.append(report["fabric_error"])
    if fabric_reasons:
        failures += 1
        ET.SubElement(fabric, "failure", message=fabric_reasons[0]).text = "\n".join(fabric_reasons)
    for h in report["hosts"]:
        case = ET.SubElement(suite, "testcase", classname="rdmaprov.validate.host", name=h["host"])
        if not h["passed"]:
            failures += 1
            ET.SubElement(case, "failure", message=h["reasons"][0] if h["reasons"] else "failed"
                          ).text = "\n".join(h["reasons"])
    suite.set("failures", str(failures))
    try:
        ET.ElementTree(suite).write(path, encoding="unicode", xml_declaration=True)
    except OSError as exc:
        raise UserError(f"--junit {path}: {exc.strerror or exc}") from None


def write_html(report: dict[str, Any], path: Path) -> None:
    try:
        path.write_text(report_html.render(report), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--html {path}: {exc.strerror or exc}") from None
