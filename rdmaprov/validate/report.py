"""The validation report: one typed document, rendered as a table, JSON, JUnit XML and HTML.

`rdmaprov validate` (live) and `rdmaprov validate --judge DIR` (a results directory) both end
here: rdmaprov/validate/judge.py builds a :class:`Report`, and every output is a rendering of
``Report.to_dict()`` — the one place where text from hosts (NCCL's lines, worker errors) is
made safe: terminal escape sequences and control characters are removed, since they break a
terminal, XML 1.0 and CI log viewers alike.

JSON schema ``rdmaprov.validate.report/3`` (``SCHEMA``) (docs/validate.md lists every field).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TextIO

from rdmaprov import __version__
from rdmaprov.errors import UserError
from rdmaprov.textsafe import safe_text
from rdmaprov.validate.verdict import FAIL, PASS, SKIP, Bar, Check, gbps

SCHEMA = "rdmaprov.validate.report/3"

def clean(text: str) -> str:
    """Text from a host, safe to print, to put in XML, to show in HTML (before escaping)."""
    return safe_text(text)


_PLAIN = frozenset({int, float, bool, type(None)})  # copied as they are: nothing to clean


def _cleaned(value: Any) -> Any:
    """A plain copy of a report value with every string (dict keys too) through clean():
    dataclasses as dicts of their fields (what ``dataclasses.asdict`` gives), tuples as lists.
    One pass that builds the copy, no deepcopy: at 10,000 hosts the report holds millions of
    values (each pair's sweep rows), and asdict's deepcopy then a second cleaning pass cost
    seconds."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is dict:
        return {(safe_text(k) if type(k) is str else clean(str(k))):
                (v if type(v) in _PLAIN else _cleaned(v)) for k, v in value.items()}
    if t is list or t is tuple:
        return [v if type(v) in _PLAIN else _cleaned(v) for v in value]
    if isinstance(value, str):
        return clean(value)
    names = _FIELDS.get(t)
    if names is None and is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS[t] = tuple(f.name for f in fields(value))
    if names is not None:
        return {clean(n): _cleaned(getattr(value, n)) for n in names}
    if isinstance(value, dict):
        return {clean(str(k)): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cleaned(v) for v in value]
    return value


_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass
class HostResult:
    """One inventory host: did it run, what did NCCL use, what does it have."""

    host: str
    passed: bool = True
    transport: str = ""
    line_rate_GBps: float | None = None
    ports: str = ""  # "mlx5_0:1 200 Gb/s, ..." (the ports its line rate counts)
    pair_busbw_GBps: float | None = None  # its best pair, when pairwise rounds ran
    error: bool = False  # it never produced a result (unreachable, preflight, hung, crashed)
    # It only waited for another host that never joined the rendezvous (rendezvous.blame): not
    # passed, never blamed (error stays True, so it is not drained); its row says WAIT.
    waiting: bool = False
    reasons: list[str] = field(default_factory=list)
    hostname: str | None = None  # what its worker reported (gethostname); may be shared
    warnings: list[str] = field(default_factory=list)  # reported, not failing (counter classes)
    # What NCCL applied next to what nccl_env intended (validate/nccl_settings.py), one line each
    nccl_settings: list[str] = field(default_factory=list)
    # The NCCL settings its worker applied, as NCCL takes them: {NAME: {value, from}} ("from":
    # environment or the file it was read from; nccl_settings.worker_applied)
    nccl_applied: dict[str, dict[str, str]] = field(default_factory=dict)
    # Seconds its part of the run took, measured (validate/run_times.py): its launches (steps.log:
    # launch start to exit), or for a host that never launched, Ansible's time on its tasks;
    # None when nothing measured it.
    duration_s: float | None = None

    def fail(self, reason: str, error: bool = False) -> None:
        self.passed = False
        self.error = self.error or error
        if reason not in self.reasons:
            self.reasons.append(reason)


@dataclass
class Pair:
    hosts: tuple[str, str]
    busbw_GBps: float | None
    slow: bool = False
    error: str | None = None  # why the pair has no figure
    round: int | None = None
    results: list[dict[str, Any]] | None = None  # per-size rows, when kept


@dataclass
class Pairwise:
    bar_GBps: float
    bar_source: str
    pairs: list[Pair]
    blamed: dict[str, str]  # host -> why (the pairs that blame it)
    unexplained: list[str]  # slow pairs that no single host explains


@dataclass
class Stability:
    """The iterations' spread: p99/p50 at the large sizes for the fabric and each pair."""

    limit: float  # above this p99/p50 a fabric or pair is UNSTABLE
    fabric: dict[str, Any] | None  # the worst large size: ratio, bytes, p50_us, p99_us, max_us
    sizes: list[dict[str, Any]]  # per size: bytes, n, p50_us, p99_us, max_us
    pairs: list[dict[str, Any]]  # per pair: hosts, ratio (or None), unstable
    blamed: dict[str, str]  # host -> why (unstable with every partner)
    unexplained: list[str]  # unstable pairs no single host explains

    @property
    def unstable(self) -> bool:
        return bool((self.fabric and self.fabric["ratio"] > self.limit) or
                    any(p["unstable"] for p in self.pairs))


@dataclass
class CompareRow:
    """One sweep of --compare-socket: the fabric as run, and again with NCCL_IB_DISABLE=1."""

    label: str  # "as configured" / "NCCL_IB_DISABLE=1"
    transport: str
    busbw_GBps: float | None
    time_1GiB_us: float | None  # the time of the sweep's largest size, scaled to 1 GiB
    size_bytes: int | None  # the size that time was measured at
    cpu_busy_cores: float | None  # the busiest host's cores busy during that size
    note: str = ""
    jitter: float | None = None  # p99/p50 of the iterations at the large sizes


@dataclass
class RunInfo:
    """When and what: the run's start and duration as measured (validate/run_times.py), the
    inventory it ran on, and the rdmaprov that made the report."""

    started: str | None = None  # ISO 8601, UTC ("2026-12-08T00:03:01Z"); None: not measured
    duration_s: float | None = None
    clock: str = ""  # what measured both: "controller" (this run) or "steps.log" (the hosts')
    inventory: str | None = None  # None: not recorded (a results directory of another run)
    version: str = __version__
    # Seconds each pair round took on the rendezvous host (steps.log), by round number.
    rounds_s: dict[str, float] = field(default_factory=dict)
    fabric_s: float | None = None  # the fabric launch: first launch start to last exit


@dataclass
class Report:
    backend: str | None
    world_size: int | None
    busbw_GBps: float | None
    bar: Bar
    checks: list[Check]  # the fabric's checks
    hosts: list[HostResult]
    error: str | None = None  # why the fabric run gave no result at all
    pairwise: Pairwise | None = None
    results: list[dict[str, Any]] | None = None  # the fabric run's per-size rows
    compare: list[CompareRow] | None = None
    source: str = ""  # the results directory judged
    notes: list[str] = field(default_factory=list)  # facts of the run worth a line (shared names)
    stability: Stability | None = None
    run: RunInfo = field(default_factory=RunInfo)

    @property
    def passed(self) -> bool:
        blamed = bool(self.pairwise and (self.pairwise.blamed or self.pairwise.unexplained))
        return (self.error is None and all(c.status != FAIL for c in self.checks)
                and all(h.passed for h in self.hosts) and not blamed)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 2

    def to_dict(self) -> dict[str, Any]:
        doc = {"schema": SCHEMA, "passed": self.passed, "exit_code": self.exit_code,
               "backend": self.backend, "world_size": self.world_size,
               "busbw_GBps": self.busbw_GBps, "bar": self.bar, "checks": self.checks,
               "error": self.error, "hosts": self.hosts, "pairwise": self.pairwise,
               "results": self.results, "compare": self.compare or None,
               "source": self.source, "notes": self.notes, "stability": self.stability,
               "run": self.run}
        return _cleaned(doc)


# ----- table ----------------------------------------------------------------------------------

def _bw(value: float | None) -> str:
    return "-" if value is None else f"{gbps(value)} GB/s"


# Past this many hosts (pairs) the terminal table lists only those that failed or warn (the
# slow pairs) and counts the rest, as progress.py's fleet view does.
FLEET_ROWS = 50


def print_table(report: Report, out: TextIO) -> None:
    d = report.to_dict()
    bar = d["bar"]
    print(file=out)
    print(f"fabric: backend {d['backend'] or '-'}, {d['world_size'] or '-'} ranks, "
          f"peak busbw {_bw(d['busbw_GBps'])}", file=out)
    print(f"  bar: {_bw(bar['GBps']) if bar['GBps'] is not None else 'none'} "
          f"({bar['source']})", file=out)
    for c in d["checks"]:
        print(f"  {c['status']:5} {c['name']:10} {c['reason']}", file=out)
    if d["error"]:
        print(f"  fail  worker     {d['error']}", file=out)
    for note in d["notes"]:
        print(f"  note: {note}", file=out)
    pw = d["pairwise"]
    if pw:
        print(f"pairwise rounds (bar {_bw(pw['bar_GBps'])}: {pw['bar_source']}):", file=out)
        shown = [p for p in pw["pairs"] if len(pw["pairs"]) <= FLEET_ROWS or p["slow"]
                 or p["error"]]
        for p in shown:
            mark = "slow" if p["slow"] else "ok"
            rnd = f"round {p['round']}  " if p["round"] is not None else ""
            print(f"  {rnd}{'+'.join(p['hosts']):24} {_bw(p['busbw_GBps']):>12}  {mark}"
                  f"{'  ' + p['error'] if p['error'] else ''}", file=out)
        if len(shown) < len(pw["pairs"]):
            print(f"  {len(pw['pairs']) - len(shown)} more pairs ok (--json and --html list "
                  "every pair)", file=out)
        for u in pw["unexplained"]:
            print(f"  slow pair, no single host to blame: {u}", file=out)
    st = d["stability"]
    if st and st["sizes"]:
        check = next((c for c in d["checks"] if c["name"] == "stability"), None)
        if check is not None and check["status"] == SKIP:  # not judged: no alarm word
            print(f"iterations (stability check skipped: {check['reason']}):", file=out)
        else:
            print(f"iterations (UNSTABLE above p99/p50 {st['limit']:g} at the large sizes):",
                  file=out)
        print(f"  {'bytes':>12} {'p50':>11} {'p99':>11} {'max':>11} {'p99/p50':>8}", file=out)
        for z in st["sizes"]:
            ratio = z["p99_us"] / z["p50_us"] if z["p50_us"] else 0.0
            print(f"  {z['bytes']:>12} {z['p50_us'] / 1e3:>8.3f} ms {z['p99_us'] / 1e3:>8.3f} ms "
                  f"{z['max_us'] / 1e3:>8.3f} ms {ratio:>8.2f}", file=out)
        many = len(st["pairs"]) > FLEET_ROWS
        for p in st["pairs"]:
            if p["ratio"] is not None and (p["unstable"] or not many):
                print(f"  pair {'+'.join(p['hosts']):24} p99/p50 {p['ratio']:.2f}"
                      f"{'  UNSTABLE' if p['unstable'] else ''}", file=out)
        for u in st["unexplained"]:
            print(f"  unstable pair, no single host to blame: {u}", file=out)
    if d["compare"]:
        print("RDMA vs TCP (--compare-socket):", file=out)
        print(f"  {'run':20} {'transport':24} {'busbw':>12} {'1 GiB all_reduce':>17} "
              f"{'CPU cores busy':>15} {'p99/p50':>8}", file=out)
        for r in d["compare"]:
            t = "-" if r["time_1GiB_us"] is None else f"{r['time_1GiB_us'] / 1000:.1f} ms"
            cpu = "-" if r["cpu_busy_cores"] is None else f"{r['cpu_busy_cores']:.2f}"
            jit = "-" if r["jitter"] is None else f"{r['jitter']:.2f}"
            print(f"  {r['label']:20} {r['transport'][:24]:24} {_bw(r['busbw_GBps']):>12} "
                  f"{t:>17} {cpu:>15} {jit:>8}", file=out)
            if r["note"]:
                print(f"    {r['note']}", file=out)
    width = max([len(h["host"]) for h in d["hosts"]] + [4])
    print(f"\n{'host':{width}}  {'result':6}  {'line rate':>11}  {'pair busbw':>11}  reason",
          file=out)
    # A fleet's table: the hosts that failed or warn, then a count of the rest (every host is
    # in --json and --html); up to FLEET_ROWS hosts, one row each.
    rows = [h for h in d["hosts"] if len(d["hosts"]) <= FLEET_ROWS or not h["passed"]
            or h["warnings"]]
    for h in rows:
        reason = "; ".join(h["reasons"]) or h["transport"]
        if h["warnings"]:
            reason += "; warn: " + "; ".join(h["warnings"])
        result = "PASS" if h["passed"] else "WAIT" if h.get("waiting") else "FAIL"
        print(f"{h['host']:{width}}  {result:6}  "
              f"{_bw(h['line_rate_GBps']):>11}  {_bw(h['pair_busbw_GBps']):>11}  {reason}",
              file=out)
    if len(rows) < len(d["hosts"]):
        print(f"{len(d['hosts']) - len(rows)} more hosts passed, no warnings (--json and --html "
              "list every host)", file=out)
    print(f"\nverdict: {'PASS' if d['passed'] else 'FAIL'}", file=out)


# ----- JUnit ----------------------------------------------------------------------------------

def _seconds(value: Any) -> str | None:
    """A measured duration as JUnit's ``time`` (seconds, a decimal), None when none was."""
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        return None
    return f"{value:.3f}"


def junit_xml(report: Report, doc: dict[str, Any] | None = None) -> ET.Element:
    """<testsuites> with three suites: the fabric's checks, the hosts, the pairs. Failed checks
    and hosts are <failure>, hosts that never produced a result (unreachable, preflight, hung)
    <error>, skipped checks <skipped/> — the JUnit shape Jenkins' xunit schema and GitLab read.
    Every suite has the run's start as its ``timestamp``; every ``time`` is one the run measured
    (validate/run_times.py): a host's its launch (or Ansible's time on a host that never
    launched), a pair's its round, a fabric check's the fabric launch it judges; a case with no
    figure of its own has the run's, and without any the attribute is left out, never a 0.
    ``doc``: the report's to_dict() when the caller has it already (one pass at 10,000 hosts)."""
    d = doc if doc is not None else report.to_dict()
    run = d.get("run") or {}
    whole = run.get("duration_s")
    fabric_s = run.get("fabric_s") if run.get("fabric_s") is not None else whole
    root = ET.Element("testsuites", name="rdmaprov validate")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def suite(name: str, cases: list[tuple[str, str, str, str, Any]], took: Any) -> None:
        """cases: (name, status pass|fail|error|skip, message, text, seconds)."""
        s = ET.SubElement(root, "testsuite", name=name)
        counts = {"tests": len(cases), "failures": 0, "errors": 0, "skipped": 0}
        for case_name, status, message, text, seconds in cases:
            c = ET.SubElement(s, "testcase", classname=name, name=case_name)
            t = _seconds(seconds if seconds is not None else whole)
            if t is not None:
                c.set("time", t)
            if status == "fail":
                counts["failures"] += 1
                ET.SubElement(c, "failure", message=message, type="failure").text = text
            elif status == "error":
                counts["errors"] += 1
                ET.SubElement(c, "error", message=message, type="error").text = text
            elif status == "skip":
                counts["skipped"] += 1
                ET.SubElement(c, "skipped", message=message)
            elif text:
                ET.SubElement(c, "system-out").text = text
        for k, v in counts.items():
            s.set(k, str(v))
            totals[k] += v
        t = _seconds(took)
        if t is not None:
            s.set("time", t)
        if run.get("started"):
            s.set("timestamp", run["started"])

    fabric = [(c["name"], {PASS: "pass", FAIL: "fail", SKIP: "skip"}[c["status"]], c["reason"],
               c["reason"], fabric_s) for c in d["checks"]]
    if d["error"]:
        fabric.append(("worker", "error", d["error"], d["error"], fabric_s))
    bar = d["bar"]
    fabric.append(("bar", "pass", bar["source"],
                   f"bar {_bw(bar['GBps'])}: {bar['source']}" if bar["GBps"] is not None
                   else f"no bar: {bar['source']}", fabric_s))
    suite("rdmaprov.validate.fabric", fabric, fabric_s)
    hosts = []
    for h in d["hosts"]:
        first = h["reasons"][0] if h["reasons"] else "failed"
        status = "pass" if h["passed"] else ("error" if h["error"] else "fail")
        hosts.append((h["host"], status, first, "\n".join(h["reasons"]) or h["transport"],
                      h.get("duration_s")))
    suite("rdmaprov.validate.hosts", hosts, whole)
    if d["pairwise"]:
        rounds = run.get("rounds_s") or {}
        pairs = []
        for p in d["pairwise"]["pairs"]:
            name = "+".join(p["hosts"])
            took = rounds.get(str(p["round"])) if p["round"] is not None else None
            took = took if took is not None else fabric_s
            if p["error"]:
                pairs.append((name, "error", p["error"], p["error"], took))
            elif p["slow"]:
                text = (f"busbw {_bw(p['busbw_GBps'])} below the bar "
                        f"{_bw(d['pairwise']['bar_GBps'])}")
                pairs.append((name, "fail", text, text, took))
            else:
                pairs.append((name, "pass", "", f"busbw {_bw(p['busbw_GBps'])}", took))
        spent = sum(rounds.values()) if rounds else fabric_s
        suite("rdmaprov.validate.pairs", pairs, spent)
    # <testsuites> carries tests/failures/errors only (Jenkins' junit-10.xsd has no "skipped"
    # there; each <testsuite> has its own).
    for k in ("tests", "failures", "errors"):
        root.set(k, str(totals[k]))
    t = _seconds(whole)
    if t is not None:
        root.set("time", t)
    return root


def write_junit(report: Report, path: Path, doc: dict[str, Any] | None = None) -> None:
    try:
        ET.ElementTree(junit_xml(report, doc)).write(path, encoding="unicode", xml_declaration=True)
    except OSError as exc:
        raise UserError(f"--junit {path}: {exc.strerror or exc}") from None


def write_html(report: Report, path: Path, doc: dict[str, Any] | None = None) -> None:
    from rdmaprov.validate import report_html

    page = report_html.render(doc if doc is not None else report.to_dict())
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--html {path}: {exc.strerror or exc}") from None
