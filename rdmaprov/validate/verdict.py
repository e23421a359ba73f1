"""Verdicts: did each host, and the fabric, get the transport and bandwidth it should?

Pure functions over three inputs, all already parsed:
- the worker's JSON document (rdmaprov/validate/worker.py),
- per host, the report of NCCL's own ``NCCL_DEBUG=INFO`` log (rdmaprov/parsers/nccl_log.py's
  NcclLogReport): ``network``, ``fallback_to_socket``, ``fallback_cause``, ``hcas``, ``gdr``
  ("enabled" / "disabled" / "unknown"), ``gdr_reason``; read by attribute or by key, so the
  report or its ``to_dict()`` both work,
- per host, its ports in the ``rdma`` facts shape (devices with ports, rates): the judge builds
  them from the run's own counters_before.json (rdmaprov/validate/judge.py, port_facts).

Bandwidth threshold. busbw must reach ``bw_fraction`` (default 0.8) of the line rate of the
ports NCCL can use, unless an explicit ``min_busbw_GBps`` is given. Why 0.8: a healthy HDR
(200 Gb/s = 25 GB/s) NIC gives about 24 GB/s of NCCL all_reduce busbw and NDR (400 Gb/s =
50 GB/s) about 48 GB/s, i.e. ~96% of line rate, and published cluster health checks fail NCCL
below ~72-80% (ib_write_bw below ~90%). 0.8 passes every healthy link with room for run-to-run
noise, and fails the usual faults: a link trained down one speed (half the rate), GPUDirect
RDMA off on a busy PCIe path, traffic on the wrong NIC or on TCP.

A host's rate is the sum of its ACTIVE ports (those NCCL names, when its log names any):
NCCL spreads an all_reduce over all the NICs it uses. The fabric's threshold is set by its
slowest host, since every ring passes through every host.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rdmaprov import collection
from rdmaprov.validate.nics import port_keys, typical_rate
from rdmaprov.validate.rounds import DEFAULT_MAX_JITTER, line_rate_bar

PASS, FAIL, SKIP = "pass", "fail", "skip"

# The defaults are rdmaprov validate's (plugins/module_utils/ranges.py VALIDATE says why each).
DEFAULT_BW_FRACTION: float = collection.ranges.SETTINGS["bw_fraction"].default
DEFAULT_RAIL_FRACTION: float = collection.ranges.SETTINGS["rail_fraction"].default


@dataclass(frozen=True)
class Policy:
    """What a run must show. ``transport`` None means: IB for nccl, Socket for gloo."""

    transport: str | None = None  # "IB" (verbs: InfiniBand or RoCE) or "Socket"
    allow_socket: bool = False  # accept NCCL on Socket even when IB is the requirement
    require_gdr: bool = False
    bw_fraction: float = DEFAULT_BW_FRACTION
    min_busbw_GBps: float | None = None  # explicit threshold; replaces fraction x line rate
    max_jitter: float = DEFAULT_MAX_JITTER  # p99/p50 at the large sizes (rounds.py says why)
    rail_fraction: float = DEFAULT_RAIL_FRACTION  # each rail vs its own port's rate

    def __post_init__(self) -> None:
        if self.transport not in (None, "IB", "Socket"):
            raise ValueError(f"transport must be IB or Socket, not {self.transport!r}")
        if not 0 < self.bw_fraction <= 1:
            raise ValueError(f"bw_fraction must be in (0, 1], not {self.bw_fraction}")
        if not 0 < self.rail_fraction <= 1:
            raise ValueError(f"rail_fraction must be in (0, 1], not {self.rail_fraction}")
        if not self.max_jitter >= 1:
            raise ValueError(f"max_jitter must be 1 or more (a ratio p99/p50), not "
                             f"{self.max_jitter}")
        if self.min_busbw_GBps is not None and self.min_busbw_GBps <= 0:
            raise ValueError(f"min_busbw_GBps must be positive, not {self.min_busbw_GBps}")

    def required_transport(self, backend: str) -> str:
        if self.transport:
            return self.transport
        return "IB" if backend == "nccl" else "Socket"

    def requires_ib(self, backend: str) -> bool:
        """Whether a host must show IB: --allow-socket and --transport Socket mean the same
        for every check (transport, ports, the relative line-rate rule)."""
        return self.required_transport(backend) == "IB" and not self.allow_socket


@dataclass
class Check:
    name: str
    status: str  # pass | fail | skip
    reason: str


@dataclass
class HostVerdict:
    host: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    @property
    def reasons(self) -> list[str]:
        """Why the host failed, one line each: fit for a Slurm drain reason."""
        return [c.reason for c in self.checks if c.status == FAIL]

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "passed": self.passed, "reasons": self.reasons,
                "checks": [asdict(c) for c in self.checks]}


@dataclass
class FabricVerdict:
    hosts: list[HostVerdict]
    checks: list[Check]
    busbw_GBps: float | None
    bar: Bar

    @property
    def threshold_GBps(self) -> float | None:
        return self.bar.GBps

    @property
    def passed(self) -> bool:
        return all(c.status != FAIL for c in self.checks) and all(h.passed for h in self.hosts)

    @property
    def reasons(self) -> list[str]:
        out = [c.reason for c in self.checks if c.status == FAIL]
        out += [f"{h.host}: {r}" for h in self.hosts for r in h.reasons]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "reasons": self.reasons,
                "busbw_GBps": self.busbw_GBps, "bar": asdict(self.bar),
                "checks": [asdict(c) for c in self.checks],
                "hosts": [h.to_dict() for h in self.hosts]}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def is_ib_network(network: str | None) -> bool:
    """NCCL's verbs transports: the built-in "IB" (InfiniBand and RoCE) and plugins on it
    such as the SHARP plugin's "IBext" / "IBext_v8"."""
    return network is not None and network.upper().startswith("IB")


def _hca_label(hca: Any) -> str:
    if isinstance(hca, str):
        return hca
    name = _get(hca, "name") or _get(hca, "device") or "?"
    port = _get(hca, "port")
    layer = _get(hca, "link_layer")
    label = f"{name}:{port}" if port is not None else str(name)
    return f"{label}/{layer}" if layer else label


def _hca_names(report: Any) -> set[str]:
    names = set()
    for hca in _get(report, "hcas") or ():
        names.add(hca if isinstance(hca, str) else str(_get(hca, "name") or _get(hca, "device")))
    return {n.split(":")[0] for n in names}


def _ports(facts: Mapping[str, Any] | None, only_devices: Iterable[str] = (),
           any_state: bool = False) -> list[dict[str, Any]]:
    if not facts:
        return []
    rdma = facts.get("rdma", facts)
    wanted = set(only_devices)
    out = []
    for dev in rdma.get("devices") or ():
        if wanted and dev.get("name") not in wanted:
            continue
        for port in dev.get("ports") or ():
            if any_state or str(port.get("state", "")).upper().endswith("ACTIVE"):
                out.append({**port, "name": dev.get("name")})
    return out


def active_ports(facts: Mapping[str, Any] | None,
                 only_devices: Iterable[str] = ()) -> list[tuple[str, Any, float]]:
    """(device, port, rate_gbps) for each ACTIVE port in rdma facts, optionally only the named
    devices (those NCCL said it uses)."""
    return [(str(p["name"]), p.get("port"), float(p.get("rate_gbps") or 0))
            for p in _ports(facts, only_devices)]


def counted_ports(facts: Mapping[str, Any] | None, report: Any = None,
                  used: Iterable[str] | None = None,
                  channel_nics: int = 0) -> list[tuple[str, Any, float]]:
    """The ACTIVE ports a host's line rate counts: only NICs its own NCCL log shows. Those of the
    devices its channels ran on (``used``, rdmaprov/validate/nics.py), else those of NCCL's
    ``Using`` list; when the log names none that the facts know, but its channels ran on
    ``channel_nics`` distinct NET/IB indices (the ``Using`` line folded into another host's
    output), that many ports at the rate most of its ports have. No evidence: no port (the line
    rate is unknown; never every ACTIVE port, a front-end Ethernet port included). One entry per
    physical port (nics.port_keys: SR-IOV and multi-host functions of one wire once)."""
    everything = _ports(facts)
    layout = _ports(facts, any_state=True)  # a card's functions, cabled or not
    keys = dict(zip(((str(p["name"]), p.get("port")) for p in layout), port_keys(layout),
                    strict=True))
    ports: list[dict[str, Any]] = []
    named: list[str] = []
    for names in (set(used or ()), _hca_names(report)):
        if names:
            ports = _ports(facts, names)
            named = named or sorted(names)
            if ports:
                break
    out: list[tuple[str, Any, float]] = []
    seen: set[tuple[Any, ...]] = set()
    for p in ports:
        key = keys.get((str(p["name"]), p.get("port")), (p["name"], p.get("port")))
        if key in seen:
            continue
        seen.add(key)
        out.append((str(p["name"]), p.get("port"), float(p.get("rate_gbps") or 0)))
    if out:
        return out
    labels = [f"{n} (not in the port list)" for n in named] or [
        f"NET/IB/{i} of the channels" for i in range(channel_nics)]
    rate = typical_rate(float(p.get("rate_gbps") or 0) for p in everything)
    if not labels or rate is None:
        return []
    wires = len({keys[(str(p["name"]), p.get("port"))] for p in everything})
    return [(label, None, rate) for label in labels[:wires]]


def line_rate_GBps(facts: Mapping[str, Any] | None, report: Any = None,
                   used: Iterable[str] | None = None, channel_nics: int = 0) -> float | None:
    """Sum of the counted ports' rates in GB/s (counted_ports). None when nothing is known."""
    total = sum(rate for _, _, rate in counted_ports(facts, report, used, channel_nics))
    return total / 8 if total > 0 else None


def _on_socket(report: Any) -> bool:
    return bool(_get(report, "fallback_to_socket")) or _get(report, "network") == "Socket"


def check_transport(backend: str, report: Any, policy: Policy,
                    problems: Iterable[str] = ()) -> Check:
    """``problems``: the worker's pre-flight findings on this host, quoted as the likely cause
    when NCCL did not use IB."""
    chk = _check_transport(backend, report, policy)
    causes = list(problems)
    if chk.status == FAIL and causes and backend == "nccl":
        chk.reason += "; pre-flight: " + "; ".join(causes)
    return chk


def _check_transport(backend: str, report: Any, policy: Policy) -> Check:
    if backend != "nccl":
        if policy.requires_ib(backend):
            return Check("transport", FAIL, f"backend {backend} cannot use IB: it runs on TCP")
        return Check("transport", PASS, f"backend {backend} runs on TCP sockets")
    if report is None:
        return Check("transport", FAIL,
                     "no NCCL log from this host: transport unproven (run with NCCL_DEBUG=INFO)")
    network = _get(report, "network")
    socket = _on_socket(report)
    if network is None and not socket:
        return Check("transport", FAIL,
                     "NCCL's log does not say which network it used (is NCCL_DEBUG=INFO set?)")
    if socket:
        cause = _get(report, "fallback_cause")
        text = "NCCL fell back to Socket" + (f" ({cause})" if cause else "")
        if policy.requires_ib(backend):
            return Check("transport", FAIL, text)
        return Check("transport", PASS, text + ": allowed")
    if is_ib_network(network):
        hcas = ", ".join(_hca_label(h) for h in _get(report, "hcas") or ()) or "HCAs not logged"
        return Check("transport", PASS, f"NCCL used network {network} ({hcas})")
    return Check("transport", FAIL if policy.requires_ib(backend) else PASS,
                 f"NCCL used network {network}, not IB")


def _gdr_state(report: Any) -> bool | None:
    gdr = _get(report, "gdr")
    if gdr in (True, "enabled"):
        return True
    if gdr in (False, "disabled"):
        return False
    return None


def check_gdr(backend: str, report: Any, policy: Policy) -> Check:
    state = _gdr_state(report)
    if not policy.require_gdr:
        shown = {True: "on", False: "off", None: "not shown"}[state]
        return Check("gdr", SKIP, f"not required (GPUDirect RDMA {shown} in NCCL's log)")
    if backend != "nccl":
        return Check("gdr", FAIL, f"GPUDirect RDMA required but backend is {backend}")
    if state is True:
        return Check("gdr", PASS, "GPUDirect RDMA in use (GDRDMA on NCCL's channels)")
    why = _get(report, "gdr_reason")
    if state is False:
        return Check("gdr", FAIL, "GPUDirect RDMA off: NCCL copies through host memory"
                     + (f" ({why})" if why else ""))
    return Check("gdr", FAIL, "GPUDirect RDMA required but NCCL's log does not show it")


def check_ports(backend: str, facts: Mapping[str, Any] | None, policy: Policy) -> Check:
    if not policy.requires_ib(backend):
        return Check("ports", SKIP, "IB not required")
    if facts is None:
        return Check("ports", SKIP, "no RDMA facts for this host")
    rdma = facts.get("rdma", facts)
    kernel = rdma.get("kernel") or {}
    if kernel.get("uverbs") is False:
        return Check("ports", FAIL, kernel.get("reason") or "kernel has no RDMA (ib_uverbs)")
    ports = active_ports(facts)
    if not ports:
        return Check("ports", FAIL, "no ACTIVE RDMA port on this host")
    listed = ", ".join(f"{d}:{p} {r:g} Gb/s" for d, p, r in ports)
    return Check("ports", PASS, f"ACTIVE: {listed}")


def gbps(value: float) -> str:
    """A GB/s figure as the reports print it: one decimal from 1 up (12.0, 25.0, 48.3), three
    significant digits below (a lab's 0.844)."""
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def no_fabric_measured(world_size: int, nhosts: int) -> str | None:
    """Why a run's all_reduce figures say nothing of the fabric (bandwidth and iteration
    jitter alike), or None when they do."""
    if world_size < 2:
        return "1 rank: all_reduce sends nothing over a link (busbw factor 2(n-1)/n = 0)"
    if nhosts == 1:
        return ("1 host: the all_reduce stayed inside the host (NVLink/PCIe/shared memory); "
                "no fabric link was measured")
    return None


def check_bandwidth(busbw: float | None, bar: Bar, world_size: int, nhosts: int = 2) -> Check:
    why = no_fabric_measured(world_size, nhosts)
    if why:
        return Check("bandwidth", SKIP, why)
    if busbw is None:
        return Check("bandwidth", FAIL, "no busbw measured")
    if bar.GBps is None:
        return Check("bandwidth", SKIP, f"busbw {gbps(busbw)} GB/s; no bar: {bar.source}")
    if busbw >= bar.GBps:
        return Check("bandwidth", PASS, f"busbw {gbps(busbw)} GB/s >= {bar.source}")
    return Check("bandwidth", FAIL, f"busbw {gbps(busbw)} GB/s below {bar.source}")


@dataclass(frozen=True)
class Bar:
    """The busbw a run must reach, and where that figure came from (shown in every report)."""

    GBps: float | None
    source: str


def fabric_bar(policy: Policy, rates: Mapping[str, float | None], on_tcp: bool,
               ports: Mapping[str, str] | None = None) -> Bar:
    """``rates``: each host's line rate in GB/s (None: unknown); ``ports``: each host's ports
    as text, for the source line. The slowest host sets the bar: every ring passes it."""
    if policy.min_busbw_GBps is not None:
        return Bar(policy.min_busbw_GBps, f"explicit {gbps(policy.min_busbw_GBps)} GB/s "
                   "(--min-busbw)")
    if on_tcp:
        return Bar(None, "the run went over TCP, so the RDMA ports' line rate does not apply")
    slowest = line_rate_bar(rates, policy.bw_fraction)
    if slowest is None:
        unknown = sorted(h for h, r in rates.items() if not r)
        return Bar(None, "no line rate known for " + (", ".join(unknown) or "any host")
                   + " (line rate unknown: no NIC in its NCCL log, or no ACTIVE port's rate)"
                   " and no --min-busbw")
    host, bar = slowest
    rate = rates[host] or 0.0
    where = f" of {host}" + (f" ({ports[host]})" if ports and ports.get(host) else "")
    return Bar(bar, f"{policy.bw_fraction:g} x {gbps(rate)} GB/s line rate{where}")


def check_line_rates(rates: Mapping[str, float | None],
                     ports: Mapping[str, str] | None = None,
                     port_min: Mapping[str, float | None] | None = None,
                     listed: Mapping[str, int] | None = None) -> dict[str, Check]:
    """The relative rule on port speeds: a host whose line rate is below the fabric's best has
    a port trained down (or a NIC missing), and it would drag the bar down with it.
    ``port_min``: each host's slowest counted port (Gb/s); ``listed``: how many NICs its NCCL
    ``Using`` line lists. A host whose ports are as fast as the best host's and whose ``Using``
    line lists as many NICs is only seen on fewer NICs (its channels in a log cut short, fewer
    ranks on it): that is no fault of its own, and it passes with the figure shown."""
    known = {h: r for h, r in rates.items() if r}
    if len(known) < 2:
        return {}
    best_host = max(known, key=lambda h: (known[h], h))
    best = known[best_host]
    out = {}
    for h, r in known.items():
        shown = f" ({ports[h]})" if ports and ports.get(h) else ""
        slower = port_min is None or (port_min.get(h) or 0) < (port_min.get(best_host) or 0)
        fewer = bool(listed and listed.get(h) and listed.get(best_host)
                     and listed[h] < listed[best_host])
        if r < best and (slower or fewer):
            out[h] = Check("line_rate", FAIL,
                           f"line rate {gbps(r)} GB/s{shown} below the fabric's best "
                           f"{gbps(best)} GB/s ({best_host}): a port trained down or missing?")
        elif r < best:
            out[h] = Check("line_rate", PASS,
                           f"line rate {gbps(r)} GB/s{shown}: fewer NICs in its log's channels "
                           f"than {best_host}'s {gbps(best)} GB/s, each as fast")
        else:
            out[h] = Check("line_rate", PASS, f"line rate {gbps(r)} GB/s{shown}")
    return out


def _plugin_said(report: Any) -> str | None:
    """What a host's NCCL log says of its net plugin, as one comparable phrase (a plugin by its
    name, else its file's name: the same plugin from two install paths is the same); None when
    the log does not say (NCCL_DEBUG_SUBSYS without INIT/NET, or a log cut early)."""
    state = _get(report, "net_plugin_state")
    if state == "loaded":
        plugin = _get(report, "net_plugin") or {}
        what = plugin.get("name") or str(plugin.get("path") or "").rsplit("/", 1)[-1]
        return f"the external net plugin {what}".rstrip()
    if state == "internal":
        return "no external net plugin (NCCL's internal IB/Socket)"
    if state == "failed":
        return "a net plugin that failed to load"
    return None


def net_plugin_differences(reports: Mapping[str, Any]) -> dict[str, tuple[str, bool]]:
    """Hosts whose net plugin differs from the others' (a plugin on some hosts and not on
    others hangs the run: their transports do not talk to each other, NVIDIA/nccl#1634): per
    host (the line naming it, whether it is in a minority: the likelier odd one out; every host
    when the groups are the same size). Empty when every host that says agrees."""
    said = {h: t for h, t in ((h, _plugin_said(r)) for h, r in reports.items()) if t}
    groups: dict[str, list[str]] = {}
    for h, t in said.items():
        groups.setdefault(t, []).append(h)
    if len(groups) < 2:
        return {}
    most = max(len(hs) for hs in groups.values())
    out = {}
    for h, mine in said.items():
        others = "; ".join(f"{t} on {', '.join(sorted(hs))}" for t, hs in sorted(groups.items())
                           if t != mine)
        net = _get(reports[h], "network")
        out[h] = (f"net plugin differs across hosts: {mine} here"
                  + (f" (network {net})" if net else "") + f", {others}: every host must "
                  "load the same net plugin (install it on all, or set NCCL_NET_PLUGIN=none "
                  "everywhere)", len(groups[mine]) < most or all(
                      len(hs) == most for hs in groups.values()))
    return out


def peak_busbw(doc: Mapping[str, Any]) -> float | None:
    """The sweep's best busbw: large sizes approach link speed, small ones measure latency."""
    rows = doc.get("results") or []
    return max((float(r["busbw_GBps"]) for r in rows), default=None)


def host_verdict(host: str, backend: str, report: Any, facts: Mapping[str, Any] | None,
                 policy: Policy, busbw: float | None = None,
                 world_size: int = 1, preflight: Mapping[str, Any] | None = None) -> HostVerdict:
    """One host's checks. ``busbw`` is a measurement of this host alone (single-node NIC
    loopback, or a pairwise round); a fabric-wide figure belongs to fabric_verdict.
    ``preflight`` is the worker's pre-flight of this host (worker_preflight.preflight())."""
    problems = (preflight or {}).get("problems") or ()
    v = HostVerdict(host, [check_transport(backend, report, policy, problems),
                           check_gdr(backend, report, policy),
                           check_ports(backend, facts, policy)])
    if busbw is not None:
        rate = line_rate_GBps(facts, report)
        bar = fabric_bar(policy, {host: rate}, _on_socket(report) or backend != "nccl",
                         {host: ports_text(facts, report)})
        v.checks.append(check_bandwidth(busbw, bar, world_size))
    return v


def ports_text(facts: Mapping[str, Any] | None, report: Any = None,
               used: Iterable[str] | None = None, channel_nics: int = 0) -> str:
    """'mlx5_0:1 200 Gb/s IB' for the ports a host's line rate counts."""
    return ", ".join(f"{d}:{p} {r:g} Gb/s" if p is not None else f"{d} {r:g} Gb/s"
                     for d, p, r in counted_ports(facts, report, used, channel_nics))


def fabric_verdict(doc: Mapping[str, Any], reports: Mapping[str, Any],
                   facts: Mapping[str, Mapping[str, Any]] | None = None,
                   policy: Policy | None = None, hosts: list[str] | None = None,
                   preflight: Mapping[str, Any] | None = None,
                   used: Mapping[str, Iterable[str] | None] | None = None,
                   channel_nics: Mapping[str, int] | None = None) -> FabricVerdict:
    """Verdict of one worker run over every host in it.

    ``hosts``: the hosts of the run, one per node (the judge gives inventory names, mapped from
    the document's ranks by rank); default the hostnames the worker recorded (``doc['hosts']``).
    ``reports``, ``facts``, ``preflight`` and ``used`` (the devices each host's channels ran on)
    are keyed by those names. The bar is ``bw_fraction`` x the slowest host's line rate, unless
    ``min_busbw_GBps`` is given; a host whose line rate is below the best host's fails its
    ``line_rate`` check.
    """
    policy = policy or Policy()
    facts = facts or {}
    used = used or {}
    backend = doc.get("backend", "nccl")
    checks: list[Check] = []
    if not doc.get("ok"):
        checks.append(Check("worker", FAIL, f"worker failed: {doc.get('error') or 'unknown'}"))
        names = hosts if hosts is not None else (
            [doc["hostname"]] if doc.get("hostname") else [])
        return FabricVerdict([HostVerdict(h) for h in names], checks, None,
                             Bar(None, "the worker gave no result"))
    checks.append(Check("worker", PASS,
                        f"{len(doc.get('results') or [])} sizes, sums correct, "
                        f"{doc.get('world_size')} ranks"))

    hosts = list(hosts if hosts is not None else doc.get("hosts") or [])
    pre = preflight if preflight is not None else (doc.get("preflight") or {})
    verdicts = [host_verdict(h, backend, reports.get(h), facts.get(h), policy,
                             preflight=pre.get(h)) for h in hosts]
    nics = channel_nics or {}
    rates = {h: line_rate_GBps(facts.get(h), reports.get(h), used.get(h), nics.get(h, 0))
             for h in hosts}
    ports = {h: ports_text(facts.get(h), reports.get(h), used.get(h), nics.get(h, 0))
             for h in hosts}
    # RDMA port rates say nothing about a run that went over TCP.
    on_tcp = backend != "nccl" or any(_on_socket(reports.get(h)) for h in hosts)
    if not on_tcp and policy.requires_ib(backend):
        counted = {h: counted_ports(facts.get(h), reports.get(h), used.get(h), nics.get(h, 0))
                   for h in hosts}
        relative = check_line_rates(
            rates, ports, {h: min((r for _, _, r in c), default=None) for h, c in counted.items()},
            {h: len(_hca_names(reports.get(h))) for h in hosts})
        for v in verdicts:
            if v.host in relative:
                v.checks.append(relative[v.host])
    bar = fabric_bar(policy, rates, on_tcp, ports)
    busbw = peak_busbw(doc)
    checks.append(check_bandwidth(busbw, bar, int(doc.get("world_size") or 1), len(hosts)))
    return FabricVerdict(verdicts, checks, busbw, bar)


def rail_check(host: str, hca: str, port: int, measured_gbps: float | None,
               rate_gbps: float | None, fraction: float = DEFAULT_RAIL_FRACTION,
               bidirectional: bool = False, failed: str | None = None) -> Check:
    """One rail: ``host``'s ``hca`` port ``port`` as ib_write_bw measured it (Gb/s, the best
    average of its table) against ``fraction`` x that port's own rate. Unknown figures are a
    failure, never a pass. A bidirectional test reports both directions: twice the rate.
    ``failed``: ib_write_bw did not end well (its exit status, killed, not started): a failure
    whatever figure its output holds."""
    where = f"{host} {hca} port {port}"
    if failed:
        got = f" after {measured_gbps:g} Gb/s" if measured_gbps is not None else ""
        return Check(f"rail {where}", FAIL, f"rail {where}: ib_write_bw failed ({failed}){got}")
    if measured_gbps is None:
        return Check(f"rail {where}", FAIL, f"rail {where}: no bandwidth in its ib_write_bw "
                     "output (the run stopped early or failed)")
    if not rate_gbps:
        return Check(f"rail {where}", FAIL, f"rail {where}: {measured_gbps:g} Gb/s, but the "
                     "port's rate is unknown (not ACTIVE, or not in counters_before.json)")
    line = 2 * rate_gbps if bidirectional else rate_gbps
    need = fraction * line
    ok = measured_gbps >= need
    return Check(f"rail {where}", PASS if ok else FAIL,
                 f"rail {where}: ib_write_bw {measured_gbps:g} Gb/s "
                 f"{'>=' if ok else '<'} {fraction:g} x {line:g} Gb/s port rate")


# ----- rails: each end against all its partners (the rail round's blame rule) -----------------
# A rail's ib_write_bw figure belongs to both ends of its pair (rounds.rail_plan: each host meets
# up to two partners on a ring, rounds.rail_file: each end keeps every figure it took part in),
# so a low figure alone does not say which end is bad. The rule, per rail (host, HCA, port):
# - below the bar with every partner it had, and 2 partners or more: that rail FAILS, named by
#   host, HCA and port; its partners are not failed for it (a note on each: its pair with this
#   rail was low because of the other end). Unless every partner is in the same state: a ring of
#   low pairs (every second host bad, or all) cannot tell which ends are bad, and naming them all
#   would fail healthy hosts; it is left unexplained (the run fails, no host is named).
# - a low figure whose other end fails by the rule above: blamed on that end only (a note here).
# - fine with another partner: this rail is healthy; a low pair with an end that is not failed
#   either (a one-partner end) is that end's, or the path between them when both are fine
#   elsewhere: the run fails on it as an unexplained pair, no host is failed.
# - one partner only (2 hosts with several HCA ports, the ends of an odd ring) and low with it:
#   the two ends cannot be told apart. As the fabric's pair rounds do for a 2-host run and for a
#   host slow with one good partner (rounds.blame, judge.blame_pairs: "never on one data point",
#   the pair is "unexplained"), neither host is failed (nor drained), each gets a warning, and the
#   run fails on the pair: "one of A mlx5_3:1 / B mlx5_3:1, not told apart with one partner".
# - a figure that is no measurement (ib_write_bw did not run or exited non-zero, no bandwidth in
#   its output, the port's rate unknown): rail_check's failure of the host whose file it is, as
#   before, whatever its partners show; a figure without a known partner (the layout before the
#   round was in the file's name) is judged alone, as before.
RailKey = tuple[str, str, int]  # (host, hca, port)


@dataclass(frozen=True)
class RailFigure:
    """One end's view of one rail figure: ``host``'s ``hca`` port ``port`` in round ``round``,
    its rail_check, and the other end (``partner``'s ``partner_rail`` "hca:port"; None when not
    known)."""

    host: str
    hca: str
    port: int
    check: Check
    measured: bool  # a figure weighed against a known rate (False: rail_check failed it unread)
    gbps: float | None = None
    partner: str | None = None
    partner_rail: str | None = None
    round: int | None = None
    bar: str = ""  # "0.9 x 100 Gb/s port rate": what the figure was weighed against

    @property
    def key(self) -> RailKey:
        return (self.host, self.hca, int(self.port))

    @property
    def partner_key(self) -> RailKey | None:
        if self.partner is None or not self.partner_rail or ":" not in self.partner_rail:
            return None
        hca, _, port = self.partner_rail.rpartition(":")
        return (self.partner, hca, int(port)) if port.isdecimal() else None

    @property
    def low(self) -> bool:
        return self.measured and self.check.status == FAIL


def rail_figure(host: str, hca: str, port: int, measured_gbps: float | None,
                rate_gbps: float | None, fraction: float = DEFAULT_RAIL_FRACTION,
                bidirectional: bool = False, failed: str | None = None,
                partner: str | None = None, partner_rail: str | None = None,
                round_: int | None = None) -> RailFigure:
    """rail_check's verdict on one end's figure, with the pair it came from."""
    check = rail_check(host, hca, port, measured_gbps, rate_gbps, fraction, bidirectional,
                       failed)
    line = (2 * rate_gbps if bidirectional else rate_gbps) if rate_gbps else None
    return RailFigure(host, hca, int(port), check,
                      failed is None and measured_gbps is not None and bool(rate_gbps),
                      measured_gbps, partner, partner_rail, round_,
                      f"{fraction:g} x {line:g} Gb/s port rate" if line else "")


@dataclass
class RailBlame:
    failed: dict[str, list[str]] = field(default_factory=dict)  # host -> its failing rails
    notes: dict[str, list[str]] = field(default_factory=dict)  # host -> warnings, not failing
    unexplained: list[str] = field(default_factory=list)  # low pairs no end is failed for
    rails: int = 0  # rails judged: (host, hca, port)
    bad: int = 0  # rails failed

    def _add(self, book: dict[str, list[str]], host: str, line: str) -> None:
        lines = book.setdefault(host, [])
        if line not in lines:
            lines.append(line)


def _rail_name(k: RailKey) -> str:
    return f"{k[0]} {k[1]}:{k[2]}"


def _figure_text(f: RailFigure) -> str:
    rnd = f" round {f.round}" if f.round is not None else ""
    return f"{f.gbps:g} Gb/s with {f.partner} {f.partner_rail}{rnd}"


def rail_blame(figures: Iterable[RailFigure]) -> RailBlame:
    """The rule above over every rail figure of a run (each end's files)."""
    by: dict[RailKey, list[RailFigure]] = {}
    for f in figures:
        by.setdefault(f.key, []).append(f)
    out = RailBlame(rails=len(by))

    def paired(k: RailKey) -> list[RailFigure]:
        return [f for f in by.get(k, ()) if f.measured and f.partner_key is not None]

    def partners(k: RailKey) -> set[RailKey]:
        return {p for f in paired(k) if (p := f.partner_key) is not None}

    def low_everywhere(k: RailKey) -> bool:  # below the bar with every partner, 2 or more
        fs = paired(k)
        return bool(fs) and all(f.low for f in fs) and len(partners(k)) >= 2

    def fine(k: RailKey) -> bool:  # above the bar with some partner
        return any(not f.low for f in paired(k))

    candidates = {k for k in by if low_everywhere(k)}
    failing = {k for k in candidates if not partners(k) <= candidates}
    failed_rails: set[RailKey] = set()
    seen: set[tuple[frozenset[RailKey], int | None]] = set()
    for k, fs in by.items():
        host = k[0]
        for f in fs:
            # No measurement, or a figure without its pair: judged alone, as before.
            if f.check.status == FAIL and (not f.measured or f.partner_key is None):
                out._add(out.failed, host, f.check.reason)
                failed_rails.add(k)
        if k in failing:
            low = "; ".join(_figure_text(f) for f in paired(k))
            out._add(out.failed, host, f"rail {host} {k[1]} port {k[2]}: below the bar with "
                     f"every partner ({low}; < {paired(k)[0].bar})")
            failed_rails.add(k)
            continue
        for f in paired(k):
            q = f.partner_key
            if not f.low or q is None:
                continue
            pair = (frozenset((k, q)), f.round)
            if q in failing:
                out._add(out.notes, host, f"rail {host} {k[1]} port {k[2]}: its pair with "
                         f"{_rail_name(q)}{_round_text(f)} was low ({f.gbps:g} Gb/s) because "
                         f"of the other end (below the bar with every partner)")
            elif fine(k):
                out._add(out.notes, host, f"rail {host} {k[1]} port {k[2]}: its pair with "
                         f"{_rail_name(q)}{_round_text(f)} was low ({f.gbps:g} Gb/s); this end "
                         "is fine with another partner")
                if fine(q) and pair not in seen:
                    seen.add(pair)
                    out.unexplained.append(
                        f"{_rail_name(k)} + {_rail_name(q)}{_round_text(f)} {f.gbps:g} Gb/s: "
                        "low though both ends are fine with other partners (the path between "
                        "them)")
                elif q not in by and pair not in seen:
                    seen.add(pair)
                    out.unexplained.append(
                        f"{_rail_name(k)} + {_rail_name(q)}{_round_text(f)} {f.gbps:g} Gb/s: "
                        f"low, and {q[0]}'s side of it is not in the results")
            elif k in candidates:
                if pair not in seen:
                    seen.add(pair)
                    out.unexplained.append(
                        f"{_rail_name(k)} + {_rail_name(q)}{_round_text(f)} {f.gbps:g} Gb/s: "
                        "low, and so is every pair of both ends: which ends are bad is not "
                        "told apart")
                out._add(out.notes, host, f"rail {host} {k[1]} port {k[2]}: below the bar "
                         "with every partner, whose rails are all low too: not told apart")
            else:
                # One partner only, low with it: the two ends are not told apart.
                hint = (f"; {_rail_name(q)} is fine with another partner"
                        if fine(q) else "")
                if pair not in seen:
                    seen.add(pair)
                    out.unexplained.append(
                        f"one of {_rail_name(k)} / {_rail_name(q)}, not told apart with one "
                        f"partner ({f.gbps:g} Gb/s{_round_text(f)}{hint})")
                out._add(out.notes, host, f"rail {host} {k[1]} port {k[2]}: low with its one "
                         f"partner {_rail_name(q)}{_round_text(f)} ({f.gbps:g} Gb/s): one of "
                         "the two ends, not told apart with one partner")
    out.bad = len(failed_rails)
    return out


def _round_text(f: RailFigure) -> str:
    return f" in round {f.round}" if f.round is not None else ""
