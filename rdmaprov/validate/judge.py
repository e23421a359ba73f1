"""Judge a validation results directory: the one place a run's files become a verdict.

A run of roles/nccl_validate leaves, on the control host::

    DIR/<label>/run.json                    label, hosts (inventory names), master, launcher, ...
    DIR/<label>/<host>/rc                   the host's exit status (124/137: killed at the timeout)
    DIR/<label>/<host>/result.json          the worker's JSON document (rank 0's is the run's)
    DIR/<label>/<host>/worker.log           the host's stderr: NCCL's NCCL_DEBUG=INFO log
    DIR/<label>/<host>/counters_before.json its RDMA ports (state, rate, link layer, netdev) and
                                            counters, read just before the run, where NCCL ran
    DIR/<label>/<host>/preflight.json       the worker's pre-flight in the image (when present)
    DIR/<label>/<host>/steps.log            the launch's start and exit and each rank's steps,
                                            timed (a failed host's reason says where it got to)

with labels ``fabric`` (every host; its document also carries the pair rounds the workers ran
in the same processes) and ``socket`` (the same with NCCL_IB_DISABLE=1, for
``--compare-socket``); a directory kept with ``--results DIR`` also holds
``DIR/rdmaprov-run.json``, the controller's record of the run (its start, duration and
inventory: validate/run_times.py). ``rdmaprov validate`` judges the
directory its run just wrote; ``rdmaprov validate --judge DIR`` judges one copied from a cluster,
with any policy flags, running nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rdmaprov import collection
from rdmaprov.errors import UserError
from rdmaprov.parsers.nccl_log import parse_nccl_log
from rdmaprov.validate import nccl_settings, rendezvous, run_times
from rdmaprov.validate import rounds as R
from rdmaprov.validate import verdict as V
from rdmaprov.validate.nics import read_log
from rdmaprov.validate.report import CompareRow, HostResult, Pair, Pairwise, Report, Stability

# rdmaprov validate's --pair-fraction (plugins/module_utils/ranges.py VALIDATE says why).
DEFAULT_PAIR_FRACTION: float = collection.ranges.SETTINGS["pair_fraction"].default
# Exit statuses of `timeout`: 124 its TERM, 137 the KILL after its grace.


class BadResults(UserError):
    """A results directory whose run.json cannot be judged: one line, exit 1."""


def _load_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(document, None), (None, None) when the file is absent or empty, or (None, why) when it
    has text that is not one JSON object (truncated, not JSON, not an object) or cannot be
    read."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path.name} unreadable: {exc.strerror or exc}"
    if not text.strip():  # a rank other than 0 prints no document: its result.json is empty
        return None, None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return None, f"{path.name} unreadable: not JSON ({exc})"
    if not isinstance(doc, dict):
        return None, f"{path.name} unreadable: a JSON {type(doc).__name__}, not an object"
    return doc, None


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
            "netdev": p.get("netdev"), "pci": p.get("pci"), "physfn": p.get("physfn"),
            "sys_image_guid": p.get("sys_image_guid"), "phys_port_id": p.get("phys_port_id")})
    return {"rdma": {"devices": [{"name": n, "ports": ps} for n, ps in sorted(devices.items())]}}


# Error kinds a host shows when another thing failed first (a peer gone, an abort, a timeout):
# never the start of a failed host's reason while its log has a cause.
_CONSEQUENCES = frozenset({"proxy", "nccl_error", "remote_error", "timeout", "system_error",
                           "comm_abort", "no_libibverbs"})
_WEAK = frozenset({"socket", "peer_lost"})  # a lost peer: a cause only when nothing else is


def _nccl_text(line: str) -> str:
    """An NCCL error as its own words: the text after ``NCCL WARN`` (or 2.2's ``WARN``), else
    the line without torch's ``[rank N]:`` tag."""
    for marker in ("NCCL WARN ", " WARN ", "NCCL INFO "):
        i = line.find(marker)
        if i >= 0:
            return line[i + len(marker):].strip()
    return re.sub(r"^\[[^\]]*\]:\s*", "", line.strip())


def first_nccl_error(report: Any) -> str | None:
    """A host's own first NCCL error from the parser's list (in order of appearance): the first
    cause, else the first lost peer; never a consequence of an earlier failure."""
    errors = list(getattr(report, "errors", None) or [])
    first = None
    for kinds in (lambda k: k not in _CONSEQUENCES and k not in _WEAK, lambda k: k in _WEAK):
        first = next((e for e in errors if kinds(e.kind)), None)
        if first is not None:
            break
    verbs = next((e for e in errors if e.kind == "no_libibverbs"), None)
    if verbs is not None and not getattr(report, "fallback_to_socket", False) and (
            first is None or re.search(r"NET plugin|ncclIbInit", first.line, re.I)):
        # libibverbs missing is a consequence where NCCL went on over Socket; where it could
        # not (a plugin or NCCL_NET forcing IB: "Failed to initialize any NET plugin" after
        # it) it is the cause, at whatever level NCCL logged it (INFO in ibvsymbols.cc).
        first = verbs
    return _nccl_text(first.line)[:300] if first is not None else None


def worker_outcome(rc: str | None, log: str | None, report: Any = None,
                   steps: str | None = None) -> str | None:
    """Why a host's part of a run failed, in one line; None when it succeeded: the rule the
    nccl_validate role's own failure line uses too (validate_launch.part_outcome), led by the
    host's own first NCCL error from its log (the parser's list) and with torch's watchdog as
    the parser read it."""
    from rdmaprov import collection

    return collection.validate_launch.part_outcome(
        rc, log, steps, first_nccl_error(report), getattr(report, "watchdog", None))


@dataclass
class HostFiles:
    rc: str | None
    outcome: str | None  # None: this host's part succeeded
    report: Any  # NcclLogReport | None (None: no NCCL lines in its log)
    facts: dict[str, Any] | None  # None: no port list came back
    doc: dict[str, Any] | None  # its result.json (rank 0's is the run's document)
    unreadable: list[str] = field(default_factory=list)  # "result.json unreadable: why"
    hostname: str | None = None  # what its worker's ranks call it (gethostname)
    ports_before: list[dict[str, Any]] | None = None  # counters_before.json's ports
    ports_after: list[dict[str, Any]] | None = None  # counters_after.json's ports
    intended: dict[str, Any] | None = None  # nccl_intended.json: the host's nccl.conf settings
    used: set[str] | None = None  # the NICs its NCCL channels ran on (nics.channel_devices)
    steps: str | None = None  # its steps.log (where each rank got to)
    channel_nics: int = 0  # how many NET/IB indices its channels ran on (nics.read_log)
    log_facts: dict[str, Any] | None = None  # the devices and speeds NCCL's own lines list
    # What its worker gave NCCL (worker_preflight.nccl_seen): the run's own record, else the
    # image preflight's in the same container and environment.
    nccl_seen: dict[str, Any] | None = None
    launch_env: list[str] | None = None  # the names argv.txt's --env passed in (container)


@dataclass
class Run:
    """One run's fetched files."""

    label: str
    meta: dict[str, Any]
    hosts: list[str]  # inventory names, in rank order
    files: dict[str, HostFiles]
    doc: dict[str, Any] | None  # the rank-0 document
    name_of: dict[str, str] = field(default_factory=dict)  # worker hostname -> inventory host
    shared: dict[str, list[str]] = field(default_factory=dict)  # hostname -> hosts sharing it
    _worker_of: dict[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return bool(self.doc and self.doc.get("ok"))

    def worker_name(self, host: str) -> str:
        f = self.files.get(host)
        if f and f.hostname:
            return f.hostname
        if self._worker_of is None:  # one reverse map, not a scan per host (10,000 hosts)
            self._worker_of = {}
            for w, h in self.name_of.items():
                self._worker_of.setdefault(h, w)
        return self._worker_of.get(host, host)

    def inventory_name(self, worker: str) -> str | None:
        """The inventory host of a worker hostname; None when two hosts share that name."""
        return None if worker in self.shared else self.name_of.get(worker)


def _host_files(run_dir: Path, host: str) -> HostFiles:
    d = run_dir / host
    unreadable = []
    rc = _read_text(d / "rc")
    log = _read_text(d / "worker.log")
    steps = _read_text(d / "steps.log")
    report = parsed = None
    used = None
    channel_nics = 0
    nics = None
    if log is not None:
        lines = log.splitlines(keepends=True)
        parsed = parse_nccl_log(lines)
        nics = read_log(lines) if log else None  # the same lines, read once
        used = nics.channels if nics else None
        channel_nics = len(nics.indices) if nics else 0
        # NCCL's own text can reach a log without an INFO/WARN line (torch's "Last error:"):
        # its errors still name the failure; its network needs NCCL's lines.
        report = parsed if parsed.nccl_lines else None
    facts = None
    ports: dict[str, list[dict[str, Any]] | None] = {}
    seen = None
    for name in ("counters_before.json", "counters_after.json", "preflight.json"):
        doc, bad = _load_json(d / name)
        if bad:
            unreadable.append(bad)
        ports[name] = doc["ports"] if doc is not None and isinstance(doc.get("ports"),
                                                                     list) else None
        if name == "preflight.json" and doc is not None:
            seen = (doc.get("preflight") or {}).get("nccl") if isinstance(
                doc.get("preflight"), dict) else None
    argv = _read_text(d / "argv.txt")
    launch_env = None if argv is None else [
        line[6:] for line in argv.splitlines() if line.startswith("--env=")]
    for name in ("counters_before.json", "preflight.json"):
        if ports[name] is not None:
            facts = port_facts(ports[name] or [])
            break
    result, bad = _load_json(d / "result.json")
    if bad:
        unreadable.append(bad)
    intended, bad = _load_json(d / "nccl_intended.json")
    if bad:
        unreadable.append(bad)
    return HostFiles(rc.strip() if rc is not None else None,
                     worker_outcome(rc, log, parsed, steps),
                     report, facts, result, unreadable,
                     ports_before=ports["counters_before.json"],
                     ports_after=ports["counters_after.json"],
                     intended={str(k): str(v) for k, v in intended.items()}
                     if intended is not None else None, used=used, channel_nics=channel_nics,
                     log_facts=nics.facts() if nics else None,
                     nccl_seen=seen if isinstance(seen, dict) else None, launch_env=launch_env,
                     steps=steps)


def _sample(ports: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """counters_*.json's ports as a link_counters sample: {"dev/port": {state, counters}}."""
    out = {}
    for p in ports:
        if isinstance(p, dict) and p.get("device") and isinstance(p.get("port"), int):
            counters = {k: v for k, v in (p.get("counters") or {}).items()
                        if isinstance(v, int) and not isinstance(v, bool)}
            out[f"{p['device']}/{p['port']}"] = {"state": str(p.get("state") or ""),
                                                 "counters": counters}
    return out


def counters_during_run(before: list[dict[str, Any]] | None,
                        after: list[dict[str, Any]] | None) -> list[Any]:
    """The ports whose error counters rose during the run, by the pre-job check's rule and
    classes (plugins/module_utils/link_counters.py, judge_deltas: one rule, one place)."""
    if before is None or after is None:
        return []
    from rdmaprov import collection

    return list(collection.link_counters.judge_deltas(_sample(before), _sample(after)))


def _meta(run_dir: Path) -> dict[str, Any] | None:
    """run.json, checked: None when absent, BadResults (one line, exit 1) when it cannot say
    which hosts ran."""
    meta, bad = _load_json(run_dir / "run.json")
    if bad:
        raise BadResults(f"{run_dir / 'run.json'}: {bad.split(': ', 1)[1]}")
    if meta is None:
        return None
    hosts = meta.get("hosts")
    where = run_dir / "run.json"
    if not isinstance(hosts, list) or not hosts:
        raise BadResults(f"{where}: 'hosts' must be a non-empty list of inventory names, not "
                         f"{type(hosts).__name__} {str(hosts)[:40]!r}")
    for h in hosts:
        if (not isinstance(h, str) or not h or h in (".", "..") or "/" in h or "\0" in h):
            raise BadResults(f"{where}: host {str(h)[:40]!r} is not an inventory name")
    if len(set(hosts)) != len(hosts):
        raise BadResults(f"{where}: a host is listed twice in 'hosts'")
    nproc = meta.get("nproc_per_node", 1)
    if nproc is None:
        nproc = 1
    if isinstance(nproc, bool) or not isinstance(nproc, int | str) or \
            not str(nproc).isdecimal() or int(nproc) < 1:
        raise BadResults(f"{where}: 'nproc_per_node' must be a positive integer, not {nproc!r}")
    master = meta.get("master")
    if master not in (None, "") and master not in hosts:
        raise BadResults(f"{where}: 'master' {str(master)[:40]!r} is not one of its hosts")
    return {**meta, "nproc_per_node": int(nproc)}


def rank_host(rank: Mapping[str, Any], hosts: list[str], nproc: int) -> str | None:
    """The inventory host of one of the document's ranks: by its node rank (the launch gives
    host i node rank i), never by the hostname it reports (fresh nodes all say localhost)."""
    node = rank.get("node")
    if not isinstance(node, int) or isinstance(node, bool):
        r = rank.get("rank")
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            return None
        node = r // nproc
    return hosts[node] if 0 <= node < len(hosts) else None


def load_run(run_dir: Path) -> Run | None:
    meta = _meta(run_dir)
    if meta is None:
        return None
    hosts = [str(h) for h in meta["hosts"]]
    files = {h: _host_files(run_dir, h) for h in hosts}
    master = str(meta.get("master") or hosts[0])
    doc = files[master].doc
    name_of: dict[str, str] = {}
    names: dict[str, set[str]] = {}
    ranks = (doc or {}).get("ranks")
    for r in ranks if isinstance(ranks, list) else []:
        if not isinstance(r, dict):
            continue
        host = rank_host(r, hosts, meta["nproc_per_node"])
        if host is None or not r.get("hostname"):
            continue
        w = str(r["hostname"])
        name_of.setdefault(w, host)
        names.setdefault(w, set()).add(host)
        if files[host].hostname is None:
            files[host].hostname = w
    shared = {w: [h for h in hosts if h in hs] for w, hs in names.items() if len(hs) > 1}
    run = Run(str(meta.get("label") or run_dir.name), meta, hosts, files, doc, name_of, shared)
    # Hosts whose document lacks its ports (an older worker) get them from rank 0's pre-flight,
    # when their hostname is their own.
    pre_all = (doc or {}).get("preflight")
    for worker, pre in (pre_all.items() if isinstance(pre_all, dict) else ()):
        host = run.inventory_name(str(worker))
        if host and files[host].facts is None and isinstance((pre or {}).get("ports"), list):
            files[host].facts = port_facts(pre["ports"])
        if host and isinstance((pre or {}).get("nccl"), dict):
            files[host].nccl_seen = pre["nccl"]  # the run's own, over the image preflight's
    for f in files.values():  # no port list at all: the devices NCCL listed, at its speeds
        if f.facts is None:
            f.facts = f.log_facts
    return run


def judge_job_path(run: Run, rows: dict[str, HostResult]) -> V.Check | None:
    """The proof runs the job's path: each host's worker gave NCCL the settings a job's
    container gets there (the host's nccl.conf, nccl_intended.json) and no other
    (nccl_settings.off_job_path); each host's row gets what its worker applied. None where no
    host has both records (an older worker, a container without the RDMA CDI device)."""
    compared, off = 0, []
    container = run.meta.get("runtime") == "container"
    for h in run.hosts:
        f = run.files[h]
        if f.nccl_seen is None:
            continue
        applied = nccl_settings.worker_applied(f.nccl_seen)
        rows[h].nccl_applied = applied
        if f.intended is None:
            continue
        compared += 1
        found = nccl_settings.off_job_path(applied, f.intended,
                                           f.launch_env if container else None)
        if found:
            off.append(f"{h}: " + "; ".join(found))
    if not compared:
        return None
    if off:
        return V.Check("job_path", V.FAIL, "not the job's path: " + " | ".join(off))
    return V.Check("job_path", V.PASS,
                   f"the workers gave NCCL the settings a job's container gets (the host's "
                   f"nccl.conf; {compared} of {len(run.hosts)} hosts compared)")


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
    nodes_known = fabric.hosts
    for p in (fabric.doc or {}).get("pairs") or []:
        if not isinstance(p, dict):
            continue
        nodes = p.get("nodes")
        if isinstance(nodes, list) and all(isinstance(n, int) and 0 <= n < len(nodes_known)
                                           for n in nodes):
            names = [nodes_known[n] for n in nodes]
        else:
            names = [fabric.inventory_name(str(h)) or str(h) for h in p.get("hosts") or []]
        if len(names) != 2 or len(set(names)) != 2:
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
    best: dict[str, float] = {}  # each host's best pair, in one pass over the pairs
    for pair_hosts, bw in figures.items():
        if bw is not None:
            for h in pair_hosts:
                best[h] = max(bw, best.get(h, bw))
    for h, row in rows.items():
        row.pair_busbw_GBps = best.get(h)
    return Pairwise(round(eff, 6), source, pairs, blamed, unexplained)


# ----- stability -----------------------------------------------------------------------------

def judge_stability(rows_doc: list[dict[str, Any]] | None, pairs: list[Pair], limit: float,
                    hosts: dict[str, HostResult]) -> tuple[V.Check, Stability]:
    """UNSTABLE: the fabric's or a pair's p99/p50 at the large sizes above ``limit`` (rounds.py:
    jitter, the rule the worker plans its pair rounds with). Hosts unstable with two good
    partners are named by the pair rounds' blame rule; other unstable pairs are links."""
    sizes = [{"bytes": r["bytes"], **r["iter_us"]} for r in rows_doc or []
             if isinstance(r, dict) and isinstance(r.get("iter_us"), dict)]
    fj = R.jitter(rows_doc)
    pair_rows: list[dict[str, Any]] = []
    texts: dict[tuple[str, str], str | None] = {}
    flags: dict[tuple[str, str], bool] = {}
    for p in pairs:
        pj = R.jitter(p.results)
        bad = pj is not None and pj.ratio > limit
        pair_rows.append({"hosts": list(p.hosts), "ratio": round(pj.ratio, 3) if pj else None,
                          "unstable": bad, "text": pj.text() if pj else None})
        texts[p.hosts] = texts[(p.hosts[1], p.hosts[0])] = pj.text() if pj else None
        if pj is not None:
            flags[p.hosts] = bad
    blamed: dict[str, str] = {}
    unexplained: list[str] = []
    if any(flags.values()):
        names = sorted({h for pr in flags for h in pr})
        b = R.blame(names, flags) if len(names) > 2 else None
        for h, mine in (b.blamed.items() if b else ()):
            blamed[h] = ("UNSTABLE with every partner: " + "; ".join(
                f"{'+'.join(pr)} {texts.get(pr)}" for pr in mine)
                + f" (limit p99/p50 {limit:g})")
        bad_links = b.bad_links if b else [pr for pr, bad in flags.items() if bad]
        unexplained = [f"{'+'.join(pr)} {texts.get(pr)}" for pr in bad_links]
        unexplained += [f"{h}: inconclusive: {why}" for h, why in
                        sorted((b.inconclusive if b else {}).items())
                        if any(flags.get(pr) for pr in flags if h in pr)]
    for h, why in blamed.items():
        if h in hosts:
            hosts[h].fail(why)
    st = Stability(limit, (dict(asdict(fj), ratio=round(fj.ratio, 3)) if fj else None), sizes,
                   pair_rows, blamed, unexplained)
    if fj is None and not flags:
        why = (f"fewer than {R.MIN_ITERS} iterations per size (raise the sweep's iterations to "
               "judge p99)" if sizes else "no per-iteration times in the results (a worker "
               "older than the stability check)")
        return V.Check("stability", V.SKIP, why), st
    unstable = []
    if fj is not None and fj.ratio > limit:
        unstable.append(f"fabric {fj.text()}")
    unstable += [f"{h}: {why}" for h, why in blamed.items()]
    unstable += [f"pair {u}" for u in unexplained]
    if unstable:
        return V.Check("stability", V.FAIL, "UNSTABLE: " + "; ".join(unstable)
                       + f" above the limit p99/p50 {limit:g}"), st
    shown = f"fabric {fj.text()}" if fj else "pairs only"
    return V.Check("stability", V.PASS, f"{shown} within p99/p50 {limit:g}"), st


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
    j = R.jitter(rows)
    return CompareRow(label, _transport_line(run), V.peak_busbw(run.doc), t, size,
                      _cpu_busy(run.doc), note, round(j.ratio, 3) if j else None)


# ----- per rail: ib_write_bw per HCA port (rdmaprov.parsers.perftest), judged once -----------
# DIR/rails/<host>/<hca>.port<N>.round<R>.log  ib_write_bw's output of that rail's pair in round
#                                             R, on both ends (rounds.rail_file; the fabric
#                                             document's "rails" names each round's two ends)
# DIR/rails/<host>/<hca>.port<N>.log           the layout before: one file per rail, judged alone
# DIR/rails/<host>/skipped                     why <host> has no rail round (one HCA, or none)
# Keep in sync with rounds.rail_file (what the worker writes).
_RAIL_FILE = re.compile(r"^(?P<hca>[A-Za-z0-9_]{1,64})\.port(?P<port>[0-9]{1,3})"
                        r"(?:\.round(?P<round>[0-9]{1,3}))?\.log$")


def _port_rate(ports: list[dict[str, Any]] | None, hca: str, port: int) -> float | None:
    for p in ports or []:
        if str(p.get("device")) == hca and str(p.get("port")) == str(port):
            return _rate_gbps(p) if str(p.get("state", "ACTIVE")).upper().endswith(
                "ACTIVE") else None
    return None


# The worker's last line of a rail's output (worker_rails.RAIL_EXIT): ib_write_bw's exit status, or
# why there is none (killed, not started). Absent in outputs saved by hand.
_RAIL_EXIT = re.compile(r"^rdmaprov: ib_write_bw exit status (?P<what>.{1,200})$")


def _rail_exit(lines: list[str]) -> str | None:
    """Why this rail's ib_write_bw did not end well ('exit status 1', 'killed: ...'), or None
    (it exited 0, or the output carries no such line)."""
    for line in reversed(lines):
        m = _RAIL_EXIT.match(line.strip())
        if m:
            what = " ".join(m["what"].split())
            return None if what == "0" else (f"exit status {what}" if what.isdecimal()
                                              else what)
    return None


def _rail_partners(fabric: Run) -> dict[tuple[str, int, str], tuple[str, str]]:
    """(host, round, "hca:port") -> (the other end's host, its "hca:port"), from the fabric
    document's rail summary (worker_rails.rail_round: each round's client and server, by node rank;
    by hostname in a document without them, where that name is no other host's)."""
    out: dict[tuple[str, int, str], tuple[str, str]] = {}
    rails = ((fabric.doc or {}).get("rails") or {}).get("rails") or []
    known = fabric.hosts
    for e in rails if isinstance(rails, list) else []:
        if not isinstance(e, dict) or not isinstance(e.get("round"), int):
            continue
        nodes = e.get("nodes")
        client: str | None
        server: str | None
        if (isinstance(nodes, list) and len(nodes) == 2
                and all(isinstance(n, int) and 0 <= n < len(known) for n in nodes)):
            client, server = (known[n] for n in nodes)
        else:
            client, server = (fabric.inventory_name(str(e.get(k))) for k in ("client", "server"))
        cp, sp = e.get("client_port"), e.get("server_port")
        if not (client and server and isinstance(cp, str) and isinstance(sp, str)):
            continue
        out[(client, e["round"], cp)] = (server, sp)
        out[(server, e["round"], sp)] = (client, cp)
    return out


def judge_rails(rails_dir: Path, fabric: Run, rows: dict[str, HostResult],
                policy: V.Policy) -> V.Check | None:
    """The rail round's check (None when the run had none): each rail's ib_write_bw figure
    against its own port's rate (verdict.rail_check), each end weighed against all its partners
    (verdict.rail_blame, the one rule): a bad rail fails its host and is named by host, HCA and
    port, even when the fabric's mean passes; its healthy partner gets a note, not a failure."""
    if not rails_dir.is_dir():
        return None
    from rdmaprov.parsers.perftest import parse_perftest

    missing: list[str] = []
    figures: list[V.RailFigure] = []
    skipped: list[str] = []
    partners = _rail_partners(fabric)
    for h in fabric.hosts:
        d = rails_dir / h
        why = _read_text(d / "skipped")
        if why is not None:
            skipped.append(f"{h}: {' '.join(why.split())[:200] or 'no reason given'}")
            continue
        files = sorted(d.iterdir()) if d.is_dir() else []
        logs = [(f, m) for f in files if (m := _RAIL_FILE.match(f.name)) is not None]
        if not logs:
            rows[h].fail("rail round: no ib_write_bw output and no reason it was skipped")
            missing.append(f"{h}: no rail output")
            continue
        ports = fabric.files[h].ports_before
        for f, m in logs:
            hca, port = m["hca"], int(m["port"])
            rnd = int(m["round"]) if m["round"] is not None else None
            partner, partner_rail = (partners.get((h, rnd, f"{hca}:{port}"), (None, None))
                                     if rnd is not None else (None, None))
            lines = (_read_text(f) or "").splitlines()
            rep = parse_perftest(lines)
            figures.append(V.rail_figure(
                h, hca, port, rep.bw_avg_gbps, _port_rate(ports, hca, port),
                policy.rail_fraction, "Bidirectional" in (rep.test or ""), _rail_exit(lines),
                partner, partner_rail, rnd))
    blame = V.rail_blame(figures)
    bad = list(missing)
    for h, reasons in blame.failed.items():
        for reason in reasons:
            rows[h].fail(reason)
            bad.append(reason)
    for h, notes in blame.notes.items():
        for note in notes:
            if note not in rows[h].warnings:
                rows[h].warnings.append(note)
    if bad or blame.unexplained:
        parts = []
        if bad:
            parts.append(f"{blame.bad + len(missing)} of {blame.rails} rails below "
                         f"{policy.rail_fraction:g} x their port's rate: " + "; ".join(bad))
        if blame.unexplained:
            parts.append("low rail pairs no single end is failed for: "
                         + "; ".join(blame.unexplained))
        return V.Check("rails", V.FAIL, "; ".join(parts))
    if blame.rails:
        extra = f" ({len(skipped)} hosts without a rail round)" if skipped else ""
        return V.Check("rails", V.PASS, f"{blame.rails} rails >= {policy.rail_fraction:g} x "
                       f"their port's rate{extra}")
    return V.Check("rails", V.SKIP, "no rail round: " + "; ".join(skipped)
                   if skipped else "no rail output")


def judge(results: Path, policy: V.Policy, pair_fraction: float = DEFAULT_PAIR_FRACTION,
          hosts: list[str] | None = None, failures: Mapping[str, str] | None = None,
          ansible_s: Mapping[str, float] | None = None) -> Report:
    """The report of a results directory. ``hosts``: the inventory hosts that were asked to run
    (default: the fabric run's); ``failures``: hosts that failed before the run (unreachable,
    preflight), with Ansible's reason; ``ansible_s``: Ansible's time on such a host's tasks
    (run_times.measure).

    Every host is its inventory name: the document's ranks map to hosts by rank, never by the
    hostname a worker reports (fresh nodes all say localhost, containers share the host's)."""
    fabric = load_run(results / "fabric")
    names = list(hosts or (fabric.hosts if fabric else []))
    rows = {h: HostResult(h) for h in names}
    for h, why in (failures or {}).items():
        rows.setdefault(h, HostResult(h)).fail(why, error=True)
    if fabric is None:
        why = (f"not launched: {len(failures)} of {len(rows)} hosts failed before the run "
               "(each host's line says why)" if failures
               else f"no fabric run in {results} (no fabric/run.json)")
        report = Report(None, None, None, V.Bar(None, "no fabric run"), [],
                        list(rows.values()), error=why, source=str(results))
        run_times.measure(report, [], results, ansible_s)
        return report
    notes = []
    # A rendezvous that never completed: who never joined (or is cut off the fabric), from each
    # host's own worker record; the hosts that only waited are named so, never blamed.
    rdzv = rendezvous.blame(fabric.hosts, {h: fabric.files[h].doc for h in fabric.hosts},
                            int(fabric.meta.get("nproc_per_node") or 1),
                            {h: fabric.files[h].steps for h in fabric.hosts})
    for h in fabric.hosts:
        row = rows.setdefault(h, HostResult(h))
        f = fabric.files[h]
        row.hostname = f.hostname
        for bad in f.unreadable:
            row.fail(bad, error=True)
        if h in (failures or {}):
            continue
        v = rdzv.get(h)
        if v is not None:
            # Drained only when the verdict names this host's own path (Verdict.drain).
            row.fail(v.line, error=not v.drain)
            row.waiting = v.status == "wait"
        elif f.outcome:
            row.fail(f.outcome, error=True)
    for worker, shared in sorted(fabric.shared.items()):
        notes.append(f"{', '.join(shared)} report the same hostname {worker!r}: judged as "
                     f"{len(shared)} hosts by rank")

    doc = fabric.doc
    error = None
    checks: list[V.Check] = []
    bar = V.Bar(None, "the worker gave no result")
    busbw = None
    reports = {h: fabric.files[h].report for h in fabric.hosts}
    facts: dict[str, dict[str, Any]] = {}
    for h in fabric.hosts:
        hf = fabric.files[h].facts
        if hf is not None:
            facts[h] = hf
    used = {h: fabric.files[h].used for h in fabric.hosts}  # from the log _host_files read
    nics = {h: fabric.files[h].channel_nics for h in fabric.hosts}
    backend = str((doc or {}).get("backend") or fabric.meta.get("backend") or "nccl")
    if doc is None:
        master = str(fabric.meta.get("master") or fabric.hosts[0])
        bad = "; ".join(fabric.files[master].unreadable)
        error = ("no result: " + (bad if bad else
                 "no document from the rendezvous host's worker"))
    else:
        pre_doc = doc.get("preflight")
        pre_doc = pre_doc if isinstance(pre_doc, dict) else {}
        preflight = {h: pre_doc.get(fabric.worker_name(h)) for h in fabric.hosts
                     if fabric.worker_name(h) not in fabric.shared}
        fv = V.fabric_verdict(doc, reports, facts, policy, hosts=list(fabric.hosts),
                              preflight=preflight, used=used, channel_nics=nics)
        checks, bar, busbw = fv.checks, fv.bar, fv.busbw_GBps
        if not doc.get("ok"):
            error = f"worker failed: {doc.get('error') or 'unknown'}"
            if rdzv:
                named = [f"{h}: {v.line}" for h, v in rdzv.items() if v.status != "wait"]
                error = "the rendezvous did not complete: " + "; ".join(named)
            checks = [c for c in checks if c.name != "worker"]
        for hv in fv.hosts:
            found = rows.get(hv.host)
            if found is None:
                continue
            for c in hv.checks:
                if c.name == "transport":
                    found.transport = c.reason
                if c.status == V.FAIL:
                    found.fail(c.reason)
    if doc is None or not doc.get("ok"):
        # A failed or hung run: each host's own log still says which transport NCCL chose
        # (the host that fell back to Socket is the usual cause of the hang).
        for h in fabric.hosts:
            rep = reports[h]
            # Only what the log shows: a log cut before NCCL chose a network says nothing.
            if rep is None or (rep.network is None and not rep.fallback_to_socket):
                continue
            c = V.check_transport(backend, rep, policy)
            rows[h].transport = c.reason
            if c.status == V.FAIL:
                rows[h].fail(c.reason)
                listed = rows[h].reasons
                if first_nccl_error(rep) is None and listed[-1] == c.reason:
                    listed.insert(0, listed.pop())  # no NCCL error of its own: the cause
    for h, (line, odd) in V.net_plugin_differences(reports).items():
        if (doc is None or not doc.get("ok")) and odd and line not in rows[h].reasons:
            rows[h].fail(line)
            if first_nccl_error(reports[h]) is None:  # no error of its own: the likely cause
                rows[h].reasons.insert(0, rows[h].reasons.pop())
        elif line not in rows[h].reasons + rows[h].warnings:
            rows[h].warnings.append(line)
    for h in fabric.hosts:
        f = fabric.files[h]
        for found in counters_during_run(f.ports_before, f.ports_after):
            text = f"during the run: {found.text} ({found.klass}: {found.remedy})"
            if found.severity == "fail":
                rows[h].fail(text)
            elif text not in rows[h].warnings:
                rows[h].warnings.append(text)
        if f.intended is not None and f.report is not None:
            # The proof runs the job's path (the CDI device mounts the host's nccl.conf): what
            # NCCL applied next to what nccl_env intended; a mismatch is named (the image or
            # the job's env won), not failed: the fabric result still stands.
            settings = nccl_settings.compare(f.intended, f.report.env)
            rows[h].nccl_settings = [c.line() for c in settings]
            for line in nccl_settings.mismatches(settings):
                if f"NCCL setting {line}" not in rows[h].warnings:
                    rows[h].warnings.append(f"NCCL setting {line}")
        rows[h].line_rate_GBps = V.line_rate_GBps(f.facts, f.report, used[h], nics[h])
        rows[h].ports = V.ports_text(f.facts, f.report, used[h], nics[h])

    job_path = judge_job_path(fabric, rows)
    if job_path is not None:
        checks.append(job_path)
    rails = judge_rails(results / "rails", fabric, rows, policy)
    if rails is not None:
        checks.append(rails)
    pairwise = judge_pairs(bar.GBps, pair_fraction, rows, fabric)
    stability = None
    if doc is not None and doc.get("ok"):
        # A 1-rank or 1-host run times no link: its p99/p50 is not the fabric's (a real H100
        # host's 1-rank run had 4.6 at 256 MB, 0.025 ms a call: a no-op's noise).
        alone = V.no_fabric_measured(int(doc.get("world_size") or 1), len(fabric.hosts))
        if alone:
            checks.append(V.Check("stability", V.SKIP, alone))
        else:
            chk, stability = judge_stability(doc.get("results"), _in_process_pairs(fabric),
                                             policy.max_jitter, rows)
            checks.append(chk)
    compare = None
    socket = load_run(results / "socket")
    if socket is not None:
        compare = [compare_row("as configured", fabric), compare_row("NCCL_IB_DISABLE=1", socket)]
        if (doc or {}).get("backend", "nccl") != "nccl":
            for r in compare:
                r.note = (r.note + "; " if r.note else "") + (
                    f"backend {(doc or {}).get('backend')}: both runs are TCP, no RDMA to compare")
    report = Report(
        backend=(doc or {}).get("backend") or fabric.meta.get("backend"),
        world_size=(doc or {}).get("world_size"), busbw_GBps=busbw, bar=bar, checks=checks,
        hosts=[rows[h] for h in rows], error=error, pairwise=pairwise,
        results=(doc or {}).get("results") if fabric.ok else None, compare=compare,
        source=str(results), notes=notes, stability=stability)
    run_times.measure(report, [fabric] + ([socket] if socket is not None else []), results,
                      ansible_s)
    return report
