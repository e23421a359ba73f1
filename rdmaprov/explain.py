"""Say what a pasted NCCL log, nccl-tests table or RDMA tool output shows, and what to do.

``explain_stream(lines, options)`` detects the kind of text from its first lines, then streams
every line through that kind's parser (rdmaprov.parsers); memory stays bounded whatever the
input size. No host is contacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from rdmaprov.parsers import (
    ethtool_stats,
    ib_counters,
    ibdev2netdev,
    ibstat,
    ibstatus,
    ibv_devinfo,
    kernel_log,
    mlnx_qos,
    nccl_log,
    nccl_tests,
    nvidia_topo,
    perftest,
    rdma_link,
    rules,
    show_gids,
)
from rdmaprov.parsers._common import Finding, clean, split_pasted
from rdmaprov.textsafe import safe_text
from rdmaprov.validate.verdict import DEFAULT_BW_FRACTION

KNOWN_FORMATS = {
    "nccl_log": "NCCL_DEBUG=INFO/WARN log (NCCL 2.3 and later)",
    "nccl_tests": "nccl-tests output (all_reduce_perf, all_gather_perf, ...)",
    "ibstat": "ibstat",
    "ibv_devinfo": "ibv_devinfo (plain or -v)",
    "ibstatus": "ibstatus",
    "rdma_link": "rdma link show",
    "ibdev2netdev": "ibdev2netdev",
    "show_gids": "show_gids",
    "mlnx_qos": "mlnx_qos -i IFACE",
    "perftest": "perftest (ib_write_bw, ib_read_bw, ib_send_bw, ib_*_lat)",
    "kernel_log": "kernel log (dmesg, dmesg -T, journalctl -k, grep'd lines)",
    "ethtool_stats": "ethtool -S IFACE",
    "nvidia_topo": "nvidia-smi topo -m",
    "ib_counters": "perfquery / ibqueryerrors port counters, ibportstate link width/speed",
}

# Lines that identify each kind; counted over the first lines of the input.
_SIGNS: list[tuple[str, re.Pattern[str]]] = [
    ("nccl_tests", re.compile(r"out-of-place|Avg bus bandwidth|Out of bounds values|"
                              r"^#?\s*size\s+count\s+type|^\s*\d+\s+\d+\s+(?:float|half|"
                              r"bfloat16|double|int8|uint8|int32|uint32|int64|uint64)\s|"
                              r"^\s*#\s*(?:nThread \d|nccl-tests version|Using devices|"
                              r"Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid)|^\s*nThread \d+ nGpus \d|"
                              r"(?:Test )?(?:CUDA|Cuda|NCCL) failure \S+\.cu:\d+")),
    ("nccl_log", re.compile(r"NCCL (?:INFO|WARN)|NCCL version \d|Got completion from peer|"
                            r"ProcessGroupNCCL|NET/IB|NET/Socket|\.(?:cu|cc|c|h):\d+ WARN |"
                            r"nccl\w*Error|ncclSocketInit")),
    ("ibstat", re.compile(r"^\s*CA '[^']+'\s*$|^\s*(?:Physical state|Link layer|Base lid|"
                          r"CA type):")),
    ("ibstatus", re.compile(r"^\s*Infiniband device '[^']+' port \d+ status:|"
                            r"^\s*phys state:\s+\d:")),
    ("ibv_devinfo", re.compile(r"^\s*hca_id:|^\s*(?:state|link_layer|active_mtu|port_lid|"
                               r"phys_port_cnt|fw_ver):\s+\S|^\s*port:\s+\d+\s*$|"
                               r"^\s*\d+ HCAs? found:?\s*$|^\s*No IB devices found")),
    ("rdma_link", re.compile(r"^\s*(?:\d+/\d+:\s*)?link \S+/\d+ .*state ")),
    ("ibdev2netdev", re.compile(r"^\s*\S+\s+port\s+\d+\s+==>\s+\S+\s+\((?:Up|Down)\)|"
                                r"\bport\s+\d+\s+\(\w+\s*\)\s+==>\s+\S+\s+\((?:Up|Down)\)")),
    ("show_gids", re.compile(r"^\s*DEV\s+PORT\s+INDEX\s+GID|n_gids_found=|"
                             r"^\s*\S+\s+\d+\s+\d+\s+[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}\s")),
    ("mlnx_qos", re.compile(r"Priority trust (?:state|mode):|^\s*PFC configuration:|"
                            r"dscp2prio mapping|^\s*DCBX mode:|^\s*tc:\s*\d+\s+ratelimit:|"
                            r"^\s*enabled(\s+[01]){8}\s*$")),
    ("perftest", re.compile(r"BW peak\[|BW average\[|t_typical\[|#bytes\s+#iterations|"
                            r"^\s*(?:RDMA_Write|RDMA_Read|Send|Atomic\w*)\s+(?:Bidirectional\s+)?"
                            r"(?:BW|Lat\w*) Test|"
                            r"Couldn't connect to \S+:\d+|Unable to init the socket connection|"
                            r"Failed to modify QP|Failed status \d+: wr_id|Couldn't create IB "
                            r"resources|Couldn't allocate MR|Failed to allocate hugepages\. "
                            r"Please configure|Waiting for client to "
                            r"connect|^\s*(?:Dual-port|Number of qps|Data ex\. method|"
                            r"Connection type|TX depth|CQ Moderation)\s*:")),
    ("kernel_log", re.compile(r"\bmlx[45]_core\b|\bmlx5_ib\b|PCIe Bus Error|NETDEV WATCHDOG|"
                              r"available PCIe bandwidth|\bpcieport\b|\bbnxt_en\b|\birdma\b|"
                              r"^\s*\[\s*\d+\.\d+\]|^\s*\[[A-Z][a-z]{2} [A-Z][a-z]{2} |"
                              r" kernel: ")),
    ("ethtool_stats", re.compile(r"^\s*NIC statistics:|^\s*[rt]x_prio\d_\w+:\s+\d+|"
                                 r"^\s*\w+_phy:\s+\d+\s*$|^\s*(?:np_cnp_sent|rp_cnp_handled|"
                                 r"rx_out_of_buffer|rx_ecn_mark):\s+\d+")),
    ("nvidia_topo", re.compile(r"^\s*GPU0\s+(?:X|GPU1|NIC0|mlx\w+)\b|^\s*GPU\d+\s+(?:X|NV\d+|"
                               r"PIX|PXB|PHB|NODE|SYS|SOC)\s|^\s*X\s+= Self|NIC Legend:|"
                               r"CPU Affinity")),
]
_SIGNS.append(("ib_counters", re.compile(
    r"^\s*(?:SymbolErrorCounter|LinkDownedCounter|PortXmitWait|PortRcvErrors|PortXmitDiscards|"
    r"LinkErrorRecoveryCounter|PortSelect|CounterSelect):\.{2,}|#\s*Port (?:extended )?"
    r"counters: Lid|\[(?:SymbolErrorCounter|LinkDownedCounter|PortXmitWait|PortRcvErrors|"
    r"PortXmitDiscards) == \d+|^\s*Link(?:Width|Speed)Active:\.{2,}")))
_DETECT_LINES = 400


@dataclass
class Options:
    expect_busbw: float | None = None
    line_rate_gbps: float | None = None
    nics: int = 1
    min_fraction: float = DEFAULT_BW_FRACTION  # validate's bw_fraction: the same rule
    ib_tc: int | None = None
    lossless_prio: int = ethtool_stats.LOSSLESS_PRIO


def detect(sample: list[str]) -> str:
    """Kind of text whose signature lines are most frequent in the sample."""
    score = dict.fromkeys(KNOWN_FORMATS, 0)
    for raw in sample:
        line = clean(raw)
        for kind, rx in _SIGNS:
            if rx.search(line):
                score[kind] += 1
    # nccl-tests output usually carries NCCL log lines too; a table decides it.
    if score["nccl_tests"] >= 2:
        return "nccl_tests"
    # ibstatus lines also look like ibv_devinfo's "state:" lines.
    if score["ibstatus"]:
        score["ibv_devinfo"] = 0
    best = max(score, key=lambda k: score[k])
    return best if score[best] else "unknown"


def _parser(kind: str) -> Any:
    return {
        "ibstat": ibstat.IbstatParser, "ibv_devinfo": ibv_devinfo.IbvDevinfoParser,
        "ibstatus": ibstatus.IbstatusParser, "rdma_link": rdma_link.RdmaLinkParser,
        "ibdev2netdev": ibdev2netdev.Ibdev2netdevParser, "show_gids": show_gids.ShowGidsParser,
        "mlnx_qos": mlnx_qos.MlnxQosParser, "perftest": perftest.PerftestParser,
        "kernel_log": kernel_log.KernelLogParser,
        "ethtool_stats": ethtool_stats.EthtoolStatsParser, "nvidia_topo": nvidia_topo.TopoParser,
        "ib_counters": ib_counters.IbCountersParser,
    }[kind]()


def explain_stream(lines: Iterable[str], options: Options | None = None) -> dict[str, Any]:
    """One report (the documented JSON shape) for one input."""
    return _with_remedies(_explain(lines, options))


def _with_remedies(d: dict[str, Any]) -> dict[str, Any]:
    """Every error or warning whose code has a remediation class carries it ("remedy")."""
    for fs in (d.get("findings") or [], (d.get("nccl_log") or {}).get("findings") or []):
        for f in fs:
            if f["severity"] != "info" and "remedy" not in f:
                rem = rules.remedy_for(f.get("code"))
                if rem:
                    f["remedy"] = rem
    return d


def _explain(lines: Iterable[str], options: Options | None) -> dict[str, Any]:
    opts = options or Options()
    it: Iterator[str] = iter(lines)
    head: list[str] = []
    for line in it:
        head.append(line)
        if len(head) >= _DETECT_LINES:
            break
    kind = detect(head)
    if kind == "unknown":
        return {"kind": "unknown", "findings": [{
            "severity": "error",
            "message": "cannot tell what this text is",
            "hint": "known formats: " + "; ".join(KNOWN_FORMATS.values())}],
            "known_formats": sorted(KNOWN_FORMATS)}

    def all_lines() -> Iterator[str]:
        yield from head
        yield from it

    if kind in ("nccl_log", "nccl_tests"):
        return _nccl(all_lines(), opts)
    p = _parser(kind)
    feed = p.feed
    for line in all_lines():
        feed(line)
    if kind == "mlnx_qos":
        report = p.finish(opts.ib_tc)
    elif kind == "perftest":
        report = p.finish(opts.line_rate_gbps, opts.min_fraction)
    elif kind == "ethtool_stats":
        report = p.finish(opts.lossless_prio)
    else:
        report = p.finish()
    return report.to_dict()


def _nccl(lines: Iterable[str], opts: Options) -> dict[str, Any]:
    # One pass feeds both parsers: NCCL log lines to the log parser, the rest to the table
    # parser, so a 1 GB log costs one substring test per line beyond the log parser's work.
    log = nccl_log.NcclLogParser()
    tests = nccl_tests.NcclTestsParser()
    log_feed, log_other, tests_feed = log.feed, log.feed_other, tests.feed
    for line in lines:
        # Colour codes and one-line pasted exceptions ("...\\nLast error:\\n...") are rare:
        # two substring tests keep the common line on the fast path.
        if "\x1b" in line or "\\n" in line:
            for part in split_pasted(line):
                if "NCCL" in part:
                    log_feed(part)
                elif not log_other(part):
                    tests_feed(part)
            continue
        if "NCCL" in line:
            log_feed(line)
        elif not log_other(line):
            tests_feed(line)
    for line in log.test_failures:
        tests.abort(line)
    # nccl-tests lists every rank's host: all of them on one host means a one-host run.
    if tests.ranks and all(len(p) == 1 for p in tests.ranks.values()):
        hosts = {p.partition("@")[2] for pids in tests.ranks.values() for p in pids}
        log.single_host_hint = (len(hosts) == 1
                                and len(tests.ranks) == max(tests.ranks) + 1)
    log_report = log.finish()
    # A device list alone (no table) with an NCCL log under it is a log; an aborted test
    # is the test's report.
    if tests.signals >= 2 and (tests.rows or tests.header or tests.summaries
                               or ((tests.devices or tests.failures)
                                   and not log_report.nccl_lines)):
        t = tests.finish()
        nccl_tests.verdict(t, opts.expect_busbw, opts.line_rate_gbps, opts.nics,
                           opts.min_fraction)
        d = t.to_dict()
        d["nccl_version"] = d["nccl_version"] or log_report.nccl_version
        if log_report.nccl_lines or log_report.env_pasted or log_report.errors:
            sub = log_report.to_dict()
            d["nccl_log"] = sub
            # The log's errors and fallback matter most when a table looks slow.
            d["findings"] = [f for f in sub["findings"] if f["severity"] != "info"] + d["findings"]
        if (log_report.ranks == 1 and log_report.hosts > 1
                and not any(f.get("code") == "tests_no_mpi" for f in d["findings"])):
            d["findings"].insert(0, Finding(
                "error", f"every NCCL communicator here has 1 rank, on {log_report.hosts} "
                "hosts: each process ran its own single-rank test",
                "nccl-tests was built without MPI support: `make clean; make MPI=1 "
                "MPI_HOME=...` so the ranks form one communicator.", "tests_no_mpi",
                "config").to_dict())
        return d
    d = log_report.to_dict()
    if tests.failures:  # an aborted nccl-tests run under an NCCL log is never healthy
        d["findings"] += [nccl_tests.abort_finding(f).to_dict() for f in tests.failures]
    return d


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(g|gb|gbps|gbit|gb/s)?\s*$", re.I)


def parse_line_rate(text: str) -> float:
    """'400G', '400', '200Gbps' -> Gb/s; raises ValueError for anything else."""
    m = _RATE.match(text)
    if not m:
        raise ValueError(text)
    return float(m.group(1))


_SEV_MARK = {"error": "ERROR", "warning": "WARN ", "info": "info "}

def render_text(name: str, report: dict[str, Any]) -> str:
    """Short human report: what the text is, the key facts, then findings with hints."""
    kind = report.get("kind", "unknown")
    out = [f"== {name}: {KNOWN_FORMATS.get(kind, 'unknown input')}"]
    if kind == "nccl_log":
        out.append(f"   NCCL {report['nccl_version'] or '?'}  network: {report['network'] or '?'}"
                   f"  GDR: {report['gdr']}  OOB: {report['oob_interface'] or '?'}"
                   f"  hosts: {report['hosts']}  lines: {report['lines']}")
        if report["hcas"]:
            out.append("   HCAs: " + " ".join(f"{h['device']}:{h['port']}/{h['link_layer']}"
                                              for h in report["hcas"][:16]))
        if report.get("net_plugin"):
            out.append("   net plugin: " + " ".join(str(v) for v in report["net_plugin"].values()))
    elif kind == "nccl_tests":
        if report.get("nccl_version") or report.get("devices"):
            hosts = {d["host"] for d in report.get("devices") or []}
            gpus = sorted({d["name"] for d in report.get("devices") or []})
            out.append(f"   NCCL {report.get('nccl_version') or '?'}  devices listed: "
                       f"{len(report.get('devices') or [])} on {len(hosts)} host(s)"
                       + (f"  GPU: {', '.join(gpus[:3])}" if gpus else ""))
        out.append(f"   ranks: {report['ranks'] or '?'}  rows: {len(report['rows'])}  "
                   f"avg busbw: {report['avg_busbw']}  peak busbw: {report['peak_busbw']} "
                   f"at {report['peak_size_bytes']} B")
    elif "ports" in report:
        for p in report["ports"][:64]:
            row = "   {:<12} port {:<2} {:<7} {:<10} {:>6} {:<10} mtu {:<5} lid {:<6} {}"
            out.append(row.format(
                str(p["device"] or "?"), str(p["port"] if p["port"] is not None else "?"),
                str(p["state"] or "-"), str(p["phys_state"] or "-"),
                f"{p['rate_gbps']}G" if p["rate_gbps"] is not None else "-",
                str(p["link_layer"] or "-"), str(p["active_mtu"] or "-"),
                str(p["lid"] if p["lid"] is not None else "-"),
                p["netdev"] or p.get("netdev_state") or ""))
    elif kind == "show_gids":
        out.append("   RoCE v2 IPv4 GID index: " + (", ".join(
            f"{k}={v}" for k, v in sorted(report["gid_index"].items())) or "none"))
    elif kind == "mlnx_qos":
        out.append(f"   trust: {report['trust']}  PFC on: {report['pfc_enabled']}")
    elif kind == "perftest":
        st = report["settings"]
        out.append(f"   {report['test'] or 'test ?'}  role: {report['role'] or '?'}  device: "
                   f"{st.get('device', '?')}  link: {st.get('link_type', '?')}  mtu: "
                   f"{st.get('mtu', '?')}  GID index: {st.get('gid_index', '-')}  CUDA: "
                   f"{'yes' if report['use_cuda'] else 'no'}  rows: {len(report['rows'])}")
    elif kind == "kernel_log":
        out.append(f"   lines: {report['lines']}  devices: {len(report['devices'])}  "
                   f"interfaces with link events: {len(report['links'])}")
    elif kind == "ethtool_stats":
        out.append(f"   interface: {report['interface'] or '?'}  counters: {report['counters']}"
                   f"  pause on priorities: {report['pause_priorities'] or 'none'}")
    elif kind == "nvidia_topo":
        out.append(f"   GPUs: {len(report['gpus'])}  NICs: {len(report['nics'])}")
    elif kind == "ib_counters":
        out.append(f"   ports: {len(report['counters'])}  extended: "
                   f"{'yes' if report['extended'] else 'no'}")
    for f in report.get("findings", []):
        out.append(f"   {_SEV_MARK.get(f['severity'], f['severity'])} {f['message']}")
        if f.get("hint"):
            out.append(f"         -> {f['hint']}")
    return safe_text("\n".join(out))
