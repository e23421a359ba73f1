"""Judge a validation results directory: the one place a run's files become a verdict.

A run of roles/nccl_validate leaves, on the control host::

    DIR/<label>/run.json                    label, hosts (inventory names), master, launcher, ...
    DIR/<label>/<host>/rc                   the host's exit status (124/137: killed at the timeout)
    DIR/<label>/<host>/result.json          the worker's JSON document (rank 0's is the run's)
    DIR/<label>/<host>/worker.log           the host's stderr: NCCL's NCCL_DEBUG=INFO log
    DIR/<label>/<host>/counters_before.json its RDMA ports (state, rate, link layer, netdev) and
                                            counters, read just before the run, where NCCL ran
    DIR/<label>/<host>/preflight.json       the worker's pre-flight in the image (when present)

with labels ``fabric`` (every host; its document also carries the pair rounds the workers ran
in the same processes) and ``socket`` (the same with NCCL_IB_DISABLE=1, for
``--compare-socket``). ``rdmaprov validate`` judges the
directory its run just wrote; ``rdmaprov validate --judge DIR`` judges one copied from a cluster,
with any policy flags, running nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaprov.parsers.nccl_log import parse_nccl_log
from rdmaprov.validate import rounds as R
from rdmaprov.validate import verdict as V
from rdmaprov.validate.report import CompareRow, HostResult, Pair, Pairwise, Report

# Without a bar from the line rate, a pair slower than this fraction of the best pair is slow;
# with one, a pair must pass both (lab gloo pairs on 2 busy cores spread to ~0.6 of the best; a
# 50 Mbit/s throttled host sits near 0.01).
DEFAULT_PAIR_FRACTION = 0.4
# Exit statuses of `timeout`: 124 its TERM, 137 the KILL after its grace.
KILLED = ("124", "137")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(errors="replace").strip() or "null")
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _rate_gbps(port: Mapping[str, Any]) -> float | None:
    if isinstance(port.get("rate_gbps"), int | float):
        return float(port["rate_gbps"])
    head = str(port.get("rate") or "").split(" ")[0]
    return float(head) if head.replace(".", "", 1).isdecimal() else None


def port_facts(ports: list[dict[str, Any]]) -> dict[str, Any]:
    """Ports as counters_before.json / the worker's pre-flight list them -> the rdma facts shape
    the verdict reads (devices with ports)."""
    devices: dict[str, list[dict[str, Any]]] = {}
    for p in ports:
        if not isinstance(p, dict) or not p.get("device"):
            continue
        devices.setdefault(str(p["device"]), []).append({
            "port": p.get("port"), "state": str(p.get("state") or ""),
            "rate_gbps": _rate_gbps(p), "link_layer": p.get("link_layer"),
            "netdev": p.get("netdev")})
    return {"rdma": {"devices": [{"name": n, "ports": ps} for n, ps in sorted(devices.items())]}}


def worker_outcome(rc: str | None, log: str | None) -> str | None:
    """Why a host's part of a run failed, in one line; None when it succeeded. The worker's and
    the launch's own one-line JSON errors come first: a ``watchdog:`` line (the worker hung and
    was killed) or a ``stopped:`` line (a peer could not run), then the last error line."""
    rc = (rc or "").strip()
    if rc == "0":
        return None
    lines = [ln.strip() for ln in (log or "").splitlines() if ln.strip()]
    errors = []
    for ln in lines:
        if ln.startswith("{") and '"error"' in ln:
            try:
                err = json.loads(ln).get("error")
            except (ValueError, AttributeError):
                continue
            if err:
                errors.append(str(err))
    why = next((e for e in errors if e.startswith(("watchdog:", "stopped:"))), None)
    if not rc:
        return "no exit status: the run did not finish on this host (connection lost?)"
    if rc in KILLED:
        return ("worker hung: killed at the run's timeout (a peer never joined, or NCCL/gloo "
                "hung)" + (f": {why}" if why else "") + ("" if lines else "; its log is empty"))
    if why:
        return f"{why} (rc {rc})"
    # The last line that is not NCCL's or torch's own chatter.
    chatter = ("NCCL INFO", "NCCL WARN", "[rank", "[W", "[I", "[E", "W0", "I0", "E0")
    last = next((ln for ln in reversed(lines)
                 if not any(c in ln[:40] for c in chatter) and not ln.startswith("{")), None)
    return f"worker failed (rc {rc}): {errors[-1] if errors else last or 'no message'}"


@dataclass
class HostFiles:
    rc: str | None
    outcome: str | None  # None: this host's part succeeded
    report: Any  # NcclLogReport | None (None: no NCCL lines in its log)
    facts: dict[str, Any] | None  # None: no port list came back
    doc: dict[str, Any] | None  # its result.json (rank 0's is the run's document)


@dataclass
class Run:
    """One run's fetched files."""

    label: str
    meta: dict[str, Any]
    hosts: list[str]  # inventory names, in rank order
    files: dict[str, HostFiles]
    doc: dict[str, Any] | None  # the rank-0 document
    name_of: dict[str, str] = field(default_factory=dict)  # worker hostname -> inventory host

    @property
    def ok(self) -> bool:
        return bool(self.doc and self.doc.get("ok"))

    def worker_name(self, host: str) -> str:
        return next((w for w, h in self.name_of.items() if h == host), host)


def _host_files(run_dir: Path, host: str) -> HostFiles:
    d = run_dir / host
    rc = _read_text(d / "rc")
    log = _read_text(d / "worker.log")
    report = None
    if log is not None:
        report = parse_nccl_log(log.splitlines(keepends=True))
        if not report.nccl_lines:
            report = None
    facts = None
    for name in ("counters_before.json", "preflight.json"):
        doc = _read_json(d / name)
        if doc is not None and isinstance(doc.get("ports"), list):
            facts = port_facts(doc["ports"])
            break
    return HostFiles(rc.strip() if rc is not None else None, worker_outcome(rc, log), report,
                     facts, _read_json(d / "result.json"))


def load_run(run_dir: Path) -> Run | None:
    meta = _read_json(run_dir / "run.json")
    if meta is None:
        return None
    hosts = [str(h) for h in meta.get("hosts") or []]
    files = {h: _host_files(run_dir, h) for h in hosts}
    master = str(meta.get("master") or (hosts[0] if hosts else ""))
    doc = files[master].doc if master in files else None
    name_of: dict[str, str] = {}
    nproc = max(1, int(meta.get("nproc_per_node") or 1))
    for r in (doc or {}).get("ranks") or []:
        idx = int(r.get("rank", 0)) // nproc
        if idx < len(hosts) and r.get("hostname"):
            name_of.setdefault(str(r["hostname"]), hosts[idx])
    run = Run(str(meta.get("label") or run_dir.name), meta, hosts, files, doc, name_of)
    # Hosts whose document lacks its ports (an older worker) get them from rank 0's pre-flight.
    for worker, pre in ((doc or {}).get("preflight") or {}).items():
        host = name_of.get(worker)
        if host and files[host].facts is None and isinstance((pre or {}).get("ports"), list):
            files[host].facts = port_facts(pre["ports"])
    return run


def _transport_line(run: Run) -> str:
    backend = (run.doc or {}).get("backend") or run.meta.get("backend") or "?"
    if backend != "nccl":
        return f"{backend} (TCP)"
    nets: dict[str, int] = {}
    for h in run.hosts:
        rep = run.files[h].report
        if rep is not None:
            net = "Socket" if getattr(rep, "fallback_to_socket", False) else rep.network
            nets[str(net)] = nets.get(str(net), 0) + 1
    return ", ".join(sorted(nets)) or "not shown in NCCL's log"


# ----- pairs ----------------------------------------------------------------------------------

def blame_pairs(pairs: Mapping[tuple[str, str], float | None], bar: float | None,
                fraction: float = DEFAULT_PAIR_FRACTION,
                ) -> tuple[float, str, dict[str, str], list[str]]:
    """Which hosts make the fabric slow, from each pair's peak busbw: the slow rule and the blame
    rule of rdmaprov/validate/rounds.py (the worker plans its rounds with the same two).

    Returns (effective bar, where it came from, {host: why}, slow pairs no host explains: bad
    links between good hosts, and hosts left inconclusive).
    """
    slow, eff, source = R.slow_pairs(pairs, bar, fraction)
    hosts = sorted({h for p in pairs for h in p})
    if not any(bw is not None for bw in pairs.values()):
        return eff, source, {}, [f"{'+'.join(p)} no result" for p in sorted(pairs)]
    if len(hosts) == 2:
        return eff, source, {}, [f"{'+'.join(p)} {_fmt(pairs[p])} (2 hosts: cannot tell which "
                                 "is slow)" for p in sorted(pairs) if slow[p]]
    b = R.blame(hosts, slow)
    blamed = {}
    for h, mine in b.blamed.items():
        figures = ", ".join(f"{'+'.join(p)} {_fmt(_figure(pairs, p))}" for p in mine)
        blamed[h] = f"slow with every partner ({figures}; bar {V.gbps(eff)} GB/s)"
    unexplained = [f"{'+'.join(p)} {_fmt(_figure(pairs, p))}" for p in b.bad_links]
    unexplained += [f"{h}: inconclusive: {why}" for h, why in sorted(b.inconclusive.items())]
    return eff, source, blamed, unexplained


def _figure(pairs: Mapping[tuple[str, str], float | None], p: tuple[str, str]) -> float | None:
    return pairs[p] if p in pairs else pairs.get((p[1], p[0]))


def _fmt(bw: float | None) -> str:
    return "no result" if bw is None else f"{V.gbps(bw)} GB/s"


def _in_process_pairs(fabric: Run | None) -> list[Pair]:
    """The pair rounds the workers ran in the fabric run's processes (the document's ``pairs``:
    round, step, worker hostnames, peak busbw or the error), with inventory names."""
    out: list[Pair] = []
    if fabric is None:
        return out
    for p in (fabric.doc or {}).get("pairs") or []:
        names = [fabric.name_of.get(str(h), str(h)) for h in p.get("hosts") or []]
        if len(names) != 2:
            continue
        bw = p.get("busbw_GBps")
        rnd = p.get("round")
        out.append(Pair((names[0], names[1]), float(bw) if isinstance(bw, int | float) else None,
                        error=p.get("error") or (None if bw is not None else "no result"),
                        round=rnd if isinstance(rnd, int) else None,
                        results=p.get("results")))
    return out


def judge_pairs(bar: float | None, fraction: float, rows: dict[str, HostResult],
                fabric: Run | None) -> Pairwise | None:
    pairs = _in_process_pairs(fabric)
    if not pairs:
        return None
    figures: dict[tuple[str, str], float | None] = {p.hosts: p.busbw_GBps for p in pairs}
    eff, source, blamed, unexplained = blame_pairs(figures, bar, fraction)
    for p in pairs:
        p.slow = p.busbw_GBps is None or p.busbw_GBps < eff
    for h, why in blamed.items():
        if h in rows:
            rows[h].fail(why)
    for h, row in rows.items():
        mine = [bw for p, bw in figures.items() if h in p and bw is not None]
        row.pair_busbw_GBps = max(mine) if mine else None
    return Pairwise(round(eff, 6), source, pairs, blamed, unexplained)


# ----- RDMA vs TCP ----------------------------------------------------------------------------

def _cpu_busy(doc: Mapping[str, Any]) -> float | None:
    """The busiest host's CPU cores busy during the largest size (the worker's ``cpu``:
    hostname -> {bytes, busy_cores, cpus})."""
    values = []
    for v in (doc.get("cpu") or {}).values():
        v = v.get("busy_cores") if isinstance(v, dict) else None
        if isinstance(v, int | float):
            values.append(float(v))
    return max(values) if values else None


def compare_row(label: str, run: Run | None) -> CompareRow:
    if run is None or not run.ok or not run.doc:
        why = (run.doc or {}).get("error") if run else "no such run in the results"
        return CompareRow(label, "-", None, None, None, None, f"no result: {why or 'failed'}")
    rows = run.doc.get("results") or []
    big = max(rows, key=lambda r: r.get("bytes", 0), default=None)
    t = size = None
    if big and big.get("time_us"):
        size = int(big["bytes"])
        t = float(big["time_us"]) * (1 << 30) / size
    note = "" if size in (None, 1 << 30) else (
        f"largest size {size} bytes; its time scaled to 1 GiB")
    if int(run.doc.get("world_size") or 1) < 2:
        note = "1 rank: no data crossed a link, so these figures say nothing of a transport"
    return CompareRow(label, _transport_line(run), V.peak_busbw(run.doc), t, size,
                      _cpu_busy(run.doc), note)


# ----- the whole directory --------------------------------------------------------------------

def judge(results: Path, policy: V.Policy, pair_fraction: float = DEFAULT_PAIR_FRACTION,
          hosts: list[str] | None = None, failures: Mapping[str, str] | None = None) -> Report:
    """The report of a results directory. ``hosts``: the inventory hosts that were asked to run
    (default: the fabric run's); ``failures``: hosts that failed before the run (unreachable,
    preflight), with Ansible's reason."""
    fabric = load_run(results / "fabric")
    names = list(hosts or (fabric.hosts if fabric else []))
    rows = {h: HostResult(h) for h in names}
    for h, why in (failures or {}).items():
        rows.setdefault(h, HostResult(h)).fail(why, error=True)
    if fabric is None:
        why = (f"not launched: {len(failures)} of {len(rows)} hosts failed before the run "
               "(each host's line says why)" if failures
               else f"no fabric run in {results} (no fabric/run.json)")
        return Report(None, None, None, V.Bar(None, "no fabric run"), [], list(rows.values()),
                      error=why, source=str(results))
    for h in fabric.hosts:
        row = rows.setdefault(h, HostResult(h))
        if fabric.files[h].outcome and h not in (failures or {}):
            row.fail(fabric.files[h].outcome or "", error=True)

    doc = fabric.doc
    error = None
    checks: list[V.Check] = []
    bar = V.Bar(None, "the worker gave no result")
    busbw = None
    if doc is None:
        error = "no result: no document from the rendezvous host's worker"
    else:
        worker_of = {h: fabric.worker_name(h) for h in fabric.hosts}
        reports = {worker_of[h]: fabric.files[h].report for h in fabric.hosts}
        facts: dict[str, dict[str, Any]] = {}
        for h in fabric.hosts:
            hf = fabric.files[h].facts
            if hf is not None:
                facts[worker_of[h]] = hf
        fv = V.fabric_verdict(doc, reports, facts, policy)
        checks, bar, busbw = fv.checks, fv.bar, fv.busbw_GBps
        if not doc.get("ok"):
            error = f"worker failed: {doc.get('error') or 'unknown'}"
            checks = [c for c in checks if c.name != "worker"]
        inv_of = {w: h for h, w in worker_of.items()}
        for hv in fv.hosts:
            found = rows.get(inv_of.get(hv.host, hv.host))
            if found is None:
                continue
            for c in hv.checks:
                if c.name == "transport":
                    found.transport = c.reason
                if c.status == V.FAIL:
                    found.fail(c.reason)
        for h in fabric.hosts:
            f = fabric.files[h]
            row = rows[h]
            row.line_rate_GBps = V.line_rate_GBps(f.facts, f.report)
            row.ports = V.ports_text(f.facts, f.report)

    pairwise = judge_pairs(bar.GBps, pair_fraction, rows, fabric)
    compare = None
    socket = load_run(results / "socket")
    if socket is not None:
        compare = [compare_row("as configured", fabric), compare_row("NCCL_IB_DISABLE=1", socket)]
        if (doc or {}).get("backend", "nccl") != "nccl":
            for r in compare:
                r.note = (r.note + "; " if r.note else "") + (
                    f"backend {(doc or {}).get('backend')}: both runs are TCP, no RDMA to compare")
    return Report(
        backend=(doc or {}).get("backend") or fabric.meta.get("backend"),
        world_size=(doc or {}).get("world_size"), busbw_GBps=busbw, bar=bar, checks=checks,
        hosts=[rows[h] for h in rows], error=error, pairwise=pairwise,
        results=(doc or {}).get("results") if fabric.ok else None, compare=compare,
        source=str(results))
