"""NCCL_DEBUG=INFO logs, NCCL 2.3 to 2.2x: which network, which HCAs, GPUDirect RDMA, errors.

Streaming: feed one line at a time (``NcclLogParser().feed(line)``) or a whole iterable
(``parse_nccl_log(lines)``); state is per-log counters and small capped sets, never the text,
so a gigabyte from a thousand ranks parses in bounded memory. The validation engine and
``rdmaprov explain`` share this parser.

Line shapes it relies on (all versions seen in public issue threads):
  host:pid:tid [dev] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO];
      OOB eth0:10.0.0.1<0>                                                    (one line)
  host:pid:tid [dev] NCCL INFO NET/IB: [0] mlx5_1:1/IB                        (2.3)
  host:pid:tid [dev] NCCL INFO Using network IB | Using internal Network IB   (2.4+ | 2.3)
  host:pid:tid [dev] NCCL INFO NET/IB : No device found.
  host:pid:tid [dev] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
  host:pid:tid [dev] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)
  host:pid:tid [dev] NCCL INFO GPU Direct RDMA Disabled for GPU 42000 / HCA 0 (distance 6 > 4)
  host:pid:tid [dev] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.
  host:pid:tid [dev] file.cc:123 NCCL WARN NET/IB : Got completion from peer ...
      status=12 ... vendor err 129                                            (one line)
  NCCL version 2.18.5+cuda12.2   |   host:pid:tid [dev] NCCL INFO NCCL version 2.27.6+cuda13.0
  host:pid:tid [dev] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection
      timed out, on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 3, ...  (2.2x)
  host:pid:tid [dev] include/socket.h:311 WARN Socket creation failed : ...     (2.2, no "NCCL")
  [rank3]: ncclRemoteError: ... / Last error: / <the error>                    (PyTorch)
  [rank1]:[E626 06:24:44.90 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective
      operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, ...)           (PyTorch)
  host:pid:tid [dev] NCCL INFO Plugin Path : /opt/hpcx/.../libnccl-net.so | P2P plugin IBext
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers import nccl_env, nccl_errors, rules
from rdmaprov.parsers._common import Finding, VerbsWarnings
from rdmaprov.parsers.nccl_errors import NcclError

# Caps keep memory flat however many ranks and hosts log the same thing.
_MAX_ERRORS = 50
_MAX_SET = 4096

_HCA = re.compile(r"\[\d+\]\s*([^\s:\[\]]+):(\d+)/(IB|RoCE)")
_OOB = re.compile(r"OOB\s+([^\s:<]+)")
_IFACE = re.compile(r"(?:\[\d+\])?([A-Za-z][\w.@-]*?):(?:[\d.]+|[0-9a-fA-F:]+(?:%\S+)?)<")
_ENV = re.compile(r"^(NCCL_\w+) set (?:by environment )?to (.*?)\.?\s*$")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_HEAD = re.compile(r"(\S+):(\d+):(\d+) \[\d+\]")
_STATUS = re.compile(r"status=(\d+)|with error (\d+)")
_VENDOR = re.compile(r"vendor err (\d+)")
_VERB = re.compile(r"Call to (ibv_\w+) failed(?: with error ([^(\n]+?))?\s*(?:\(|$)")
_GDR_OFF = re.compile(r"GPU Direct RDMA Disabled for (?:GPU (\S+) / HCA (\d+)|HCA (\d+) '([^']*)')"
                      r"(?:\s*\(([^)]*)\))?")
_NRANKS = re.compile(r"nranks (\d+)")
_RETURNED = re.compile(r"\S+:\d+ -> (\d+)\b")  # "transport/shm.cc:114 -> 2"
# 2.19+: "comm 0x55.. rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0"
_NNODES = re.compile(r"nRanks (\d+) nNodes (\d+)")
# 2.2x verbs failures: "failed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT,
# next state RTR, local GID index 3, local GID ::ffff:10.0.0.1, remote GID ::ffff:10.0.0.2"
_VERB_NEW = re.compile(r"Call to (ibv_\w+) failed with (\d+) ([^,(\n]+)")
_QP_NEXT = re.compile(r"next state (\w+)")
_GID_INDEX = re.compile(r"GID index (\d+)")
_LOCAL_GID = re.compile(r"local ?GID:? ?([0-9a-fA-F:.x]+)", re.I)
_OLD_WARN = re.compile(r"\.(?:cu|cc|c|h):\d+ WARN (.*)$")
_OLD_INFO = re.compile(r":\d+ \[\d+\] INFO (.*)$")  # NCCL 2.2: "host:pid:tid [0] INFO msg"
# First words of frequent INFO lines that carry nothing this parser reads (none of them holds
# "nranks", a network, an HCA, a plugin or an error): skipped before the chain of tests.
_INFO_SKIP = frozenset({
    "Setting", "Trees", "Connected", "threadThresholds", "NVLS", "cudaDriverVersion", "Comm",
    "Allocated", "Tree", "MNNVL", "DMA-BUF", "TUNER/Plugin",
    "PROFILER/Plugin", "ENV/Plugin", "Enabled", "Connecting"})
# host:pid:tid [dev] in front of a WARN; pastes replace the pid with placeholders ("XXXXXX").
_ERR_HEAD = re.compile(r"([\w.-]+):\w+(?::\w+)? \[\d+\]")
_RANK_TAG = re.compile(r"\[[Rr]ank ?(\d+)\]")
_WATCHDOG = re.compile(r"(?:\[PG (?:ID )?(\d+)[^\]]*? )?\[?Rank (\d+)\] Watchdog caught collective "
                       r"operation timeout: WorkNCCL\(SeqNum=(\d+)(?:, OpType=(\w+))?"
                       r"(?:, NumelIn=(\d+), NumelOut=(\d+))?")
# "[PG 0 (default_pg) Rank 7] Exception ... detected by watchdog at work: 80078": the rank's PG.
_WD_PG = re.compile(r"\[PG (?:ID )?(\d+)[^\]]*? Rank (\d+)\] Exception")
# Collectives every rank of a group calls alike (same op, same count); point-to-point, all-to-all,
# gather/scatter and coalesced ops legitimately differ between ranks at one sequence number.
_SAME_ON_ALL = frozenset({"ALLREDUCE", "BROADCAST", "REDUCE", "ALLGATHER", "_ALLGATHER_BASE",
                          "REDUCE_SCATTER", "_REDUCE_SCATTER_BASE", "BARRIER"})
_WD_STUCK = re.compile(r"Rank (\d+)\] ProcessGroupNCCL's watchdog got stuck")
_TORCH_TS = re.compile(r"\[[EWI](\d{3,4}) (\d\d:\d\d:\d\d\.\d+)")
_LAST_DONE = re.compile(r"Rank (\d+)\] Exception .*last completed NCCL work: (\d+)")
_PEER = re.compile(r"(?:from|peer|to) ([\w.:-]+?)<(\d+)>")
# Lines without "NCCL" in them that still belong to the log (explain routes them here).
OTHER = re.compile(r"Got completion|Watchdog|watchdog|ncclSocketInit|nccl\w*Error|libibverbs|"
                   r"\.\w{1,2}:\d+ WARN |\] INFO |Last error|NET/OFI|remote process exited|"
                   r"NVLink SHARP|^\s*(?:This is usually caused|Disable NVLS)|Test NCCL failure|"
                   r"^\s*(?:Errors|Warnings)\s*$|^\s*#\d+-\d+ \(")
# NCCL RAS (2.24+, the ncclras client): "#0-0 (fa93daea854b060b) MISMATCH" under an "Errors" or
# "Warnings" heading, then indented lines saying what and which ranks.
# What NCCL's plugin loader says when there is simply no external net plugin (ENOENT), in every
# version's words (src/net.cc 2.12-2.22, src/plugin/plugin_open.cc 2.26+).
_PLUGIN_ABSENT = re.compile(r"No plugin found|Could not find:|Using internal (?:net(?:work)? "
                            r"plugin|implementation)|returned \d+ :.*No such file or directory|"
                            r"dlerror=.*No such file or directory", re.I)
_RAS_ITEM = re.compile(r"^\s*#(\d+)-(\d+) \(([0-9a-fA-F]+)\) ([A-Z][A-Z_ ]*?)\s*$")
# Interfaces that only reach this host: bridges, veths and overlay tunnels.
_LOCAL_IF = re.compile(r"^(?:virbr|docker|br-|veth|cni|flannel|cali|tunl|kube-ipvs|lxcbr|podman)")

# Finding codes of the diagnoses of failures around NCCL (containers, interfaces, RoCE QP
# setup, net plugins, peers, watchdogs, variables). tests/fixtures/explain/index.yaml lists, per
# real fixture, which of them must fire; bench/explain_diagnoses.py counts precision over all.
CONTEXT_CODES = frozenset({
    "no_interface", "address_family", "subnet", "bind_address", "async_event", "peer_lost",
    "remote_error", "qp_link_local_gid", "qp_unreachable", "qp_timeout", "qp_no_device",
    "verbs_open_device", "plugin_no_device", "plugin_network", "bridge_interface",
    "docker_bridge", "link_local_address", "first_failure", "watchdog", "watchdog_silent",
    "watchdog_behind", "watchdog_stuck", "watchdog_desync", "verbs_provider", "verbs_provider_abi",
    "env_removed",
    "env_deprecated", "env_unknown", "env_nccl_says", "version_from_env",
    "dmabuf_unsupported", "nvls_failure", "collnet_fallback", "cuda_oom",
    "shm_create", "shm_attach", "network_mismatch",
    "rank_count_mismatch", "invalid_usage", "ras_report", "stray_connection",
    "nccl_known_bug", "userbuff_register_harmless"})

# Causes in the rules table that end the process reporting them (its peers then lose it).
_FATAL_CAUSES = frozenset({"cuda_oom", "nvls_failure", "async_event", "dmabuf_unsupported",
                           "shm_create", "shm_attach"})

# ibv_wc_status names: one table, in rules (kept here under its old name).
WC_STATUS = rules.WC_STATUS


@dataclass
class NcclLogReport:
    nccl_version: str | None = None
    network: str | None = None
    fallback_to_socket: bool = False
    fallback_cause: str | None = None
    hcas: list[dict[str, Any]] = field(default_factory=list)
    oob_interface: str | None = None
    gdr: str = "unknown"  # enabled | disabled | unknown
    gdr_reason: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    errors: list[NcclError] = field(default_factory=list)
    ranks: int | None = None
    hosts: int = 0
    lines: int = 0
    nccl_lines: int = 0
    net_plugin: dict[str, Any] | None = None
    # loaded (an external net plugin carried the traffic) | internal (none found: NCCL's own
    # IB/Socket, as it says) | failed (one was there and did not load) | None (not logged)
    net_plugin_state: str | None = None
    socket_interfaces: list[str] = field(default_factory=list)
    env_pasted: dict[str, str] = field(default_factory=dict)
    watchdog: dict[str, Any] | None = None
    nodes: int | None = None  # NCCL's own "nNodes N" (2.19+), the largest communicator's
    single_host: bool = False  # every rank provably on one host: no network transport needed
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "nccl_log",
            "findings": [f.to_dict() for f in self.findings],
            "nccl_version": self.nccl_version,
            "network": self.network,
            "fallback_to_socket": self.fallback_to_socket,
            "fallback_cause": self.fallback_cause,
            "hcas": self.hcas,
            "oob_interface": self.oob_interface,
            "gdr": self.gdr,
            "gdr_reason": self.gdr_reason,
            "env": self.env,
            "errors": [e.to_dict() for e in self.errors],
            "ranks": self.ranks,
            "hosts": self.hosts,
            "lines": self.lines,
            "nccl_lines": self.nccl_lines,
            "net_plugin": self.net_plugin,
            "net_plugin_state": self.net_plugin_state,
            "socket_interfaces": self.socket_interfaces,
            "env_pasted": self.env_pasted,
            "watchdog": self.watchdog,
            "nodes": self.nodes,
            "single_host": self.single_host,
        }


def _first_word(msg: str) -> str:
    i = msg.find(" ")
    w = msg if i < 0 else msg[:i]
    return w[:-1] if w.endswith(":") else w


class NcclLogParser:
    """Feed lines; ``finish()`` returns the report. Unknown lines are ignored, never fatal."""

    def __init__(self) -> None:
        self.lines = 0
        self.nccl_lines = 0
        self.versions: Counter[str] = Counter()
        self.networks: Counter[str] = Counter()
        self.channel_nets: Counter[str] = Counter()
        self.gdr_channels = 0
        self.net_channels = 0
        self.hcas: dict[tuple[str, int], str] = {}
        self.oob: Counter[str] = Counter()
        self.sideband: Counter[str] = Counter()
        self.bootstrap: Counter[str] = Counter()
        self.socket_ifs: Counter[str] = Counter()
        self.ib_no_device = 0
        self.no_libibverbs = 0
        self.plugin_failures: list[str] = []
        self.plugin_internal = 0  # lines saying no external net plugin is there (informational)
        self.plugin_versions_missed = 0
        self.plugin_assigned: set[str] = set()  # 2.28+ "Assigned NET plugin NAME to comm"
        self.gdr_off: Counter[str] = Counter()  # reason -> count
        self.gdr_on_lines = 0
        self.env: dict[str, str] = {}
        self.errors: dict[tuple[str, str], NcclError] = {}
        self.errors_dropped = 0
        self.nranks = 0
        self.nnodes = 0
        # Set by explain when an nccl-tests device list shows every rank on one host.
        self.single_host_hint = False
        self.hosts: set[str] = set()
        self.plugin: dict[str, str] = {}
        self.socket_all: dict[str, str] = {}  # interface -> address, socket and bootstrap
        self.env_pasted: dict[str, str] = {}
        self.env_nccl_says: dict[str, str] = {}  # NCCL 2.30 "Warning: ENV X is deprecated"
        self.rank_tags: set[int] = set()
        self.wd: dict[int, tuple[int, str, str, str]] = {}  # rank -> (seq, op, time, MMDD)
        self.wd_numel: dict[int, tuple[int, int]] = {}  # rank -> (NumelIn, NumelOut)
        self.wd_pg: dict[int, int] = {}  # rank -> process group id, where a line names it
        self.wd_done: dict[int, int] = {}  # rank -> last completed work
        self.wd_stuck: set[int] = set()  # ranks whose watchdog itself hung (heartbeat monitor)
        self._last_error_for: NcclError | None = None
        self._last_added: NcclError | None = None
        self._pending_warn: NcclError | None = None  # a generic WARN awaiting its "-> N" line
        self.ras_items: list[dict[str, Any]] = []  # NCCL RAS report entries
        self._ras_section: str | None = None
        self._ras_item: dict[str, Any] | None = None
        self.test_failures: list[str] = []  # nccl-tests "Test NCCL failure" lines
        self._after_rdma: set[int] = set()
        self.verbs = VerbsWarnings()
        self._pending_last = False

    # -- feeding ---------------------------------------------------------------------------
    def feed(self, line: str) -> None:
        self.lines += 1
        i = line.rfind("NCCL INFO ")
        if i >= 0:
            self.nccl_lines += 1
            msg = line[i + 10:]
            if self._pending_warn is not None:  # the INFO line right after a generic WARN
                r = _RETURNED.match(msg)
                if r and self._pending_warn.returned is None:
                    self._pending_warn.returned = int(r.group(1))
                self._pending_warn = None
            # Channel lines are most of a big log and name no new host: skip the host scan.
            if not msg.startswith(("Channel", "Ring")):
                self._host(line, i)
            self._info(msg.rstrip())
            return
        i = line.rfind("NCCL WARN ")
        if i >= 0:
            self._pending_last = False
            self._pending_warn = None
            self.nccl_lines += 1
            self._host(line, i)
            self._warn(line[i + 10:].rstrip(), line)
            return
        # PyTorch prints NCCL's own message on the line after "Last error:" (never an INFO
        # line, so the INFO path above does not look at this state).
        if self._pending_last:
            self._pending_last = False
            self._last_error(line.strip())
            return
        m = _OLD_WARN.search(line)
        if m:  # NCCL 2.2 printed "file.cu:61 WARN msg" without the word NCCL
            self.nccl_lines += 1
            self._warn(m.group(1).rstrip(), line)
            return
        m = _OLD_INFO.search(line)
        if m:
            self.nccl_lines += 1
            self._info(m.group(1).rstrip())
            return
        self._other(line.rstrip())

    def feed_other(self, line: str) -> bool:
        """A line without "NCCL": feed it when it belongs to the log, else only count it."""
        if (self._pending_last or OTHER.search(line)
                or (self._ras_item is not None and line.startswith("  "))):
            self.feed(line)
            return True
        self.lines += 1
        return False

    def feed_many(self, lines: Iterable[str]) -> None:
        feed = self.feed
        for line in lines:
            feed(line)

    def _host(self, line: str, i: int) -> None:
        if len(self.hosts) >= _MAX_SET:
            return
        # host:pid:tid [dev] sits just before the marker (maybe after a file:line tag).
        j = line.find(" [", 0, i)
        if j <= 0:
            return
        head = line[:j]
        k = head.rfind(":", 0, head.rfind(":")) if head.count(":") >= 2 else -1
        if k > 0:
            host = head[:k]
            s = max(host.rfind(" "), host.rfind(">"), host.rfind("]"))
            h = host[s + 1:]
            if h[:1] == ":":  # "[trainer3]:host:pid:tid"
                h = h.lstrip(":")
            if h:
                self.hosts.add(h)

    def _info(self, msg: str) -> None:
        w = _first_word(msg)
        if w in _INFO_SKIP:
            return
        if w in ("Channel", "Ring"):
            j = msg.find("via NET/")
            if j >= 0:
                self._channel(msg[j + 8:])
            return
        if w.startswith("NET/"):
            self._net(w, msg)
        elif w == "Using":
            if msg.startswith("Using network "):
                self.networks[msg[14:].strip()] += 1
            elif msg.startswith("Using internal Network "):
                self.networks[msg[23:].strip()] += 1
        elif w.startswith("NCCL_"):
            m = _ENV.match(msg)
            if m and len(self.env) < 256:
                self.env[m.group(1)] = m.group(2).strip()
        elif w == "Bootstrap":
            m = _IFACE.search(msg)
            if m:
                self.bootstrap[m.group(1)] += 1
                self._ifaces(msg)
        elif w in ("Plugin", "P2P") and (msg.startswith("Plugin Path") or
                                        msg.startswith("P2P plugin")):
            k = "path" if w == "Plugin" else "name"
            # "Plugin Path : /opt/..." (a garbled line may have lost its colon)
            self.plugin.setdefault(k, msg.partition(":")[2].strip() if k == "path"
                                   else msg[11:].strip())
        elif w == "Warning" and msg.startswith("Warning: ENV "):  # NCCL 2.30
            parts = msg.split()
            if len(parts) > 4 and len(self.env_nccl_says) < 64:
                self.env_nccl_says[parts[2]] = " ".join(parts[3:5]).rstrip(".")
        elif w == "NCCL":
            m = _VERSION.search(msg)
            if m:
                self.versions[m.group(1)] += 1
        elif w == "GPU":
            self._gdr_line(msg)
        elif w == "NET":  # 2.3: "NET : Using interface enp1s0f0:1.2.3.4<0>"
            m = _IFACE.search(msg)
            if m:
                self.bootstrap[m.group(1)] += 1
        elif "nNodes " in msg:
            m = _NNODES.search(msg)
            if m:
                self.nranks = max(self.nranks, int(m.group(1)))
                self.nnodes = max(self.nnodes, int(m.group(2)))
        elif "nranks" in msg:
            m = _NRANKS.search(msg)
            if m:
                n = int(m.group(1))
                if n > self.nranks:
                    self.nranks = n
        elif "Got completion" in msg:
            self._warn(msg, msg)
        elif w == "ncclMaxSharedMem" and "exceeds device/fn" in msg:
            # 2.25's INFO line: NCCL cannot run on this GPU (a bug fixed in 2.26.2).
            self._warn(msg, msg)
        elif w == "socketFinalizeAccept" and "magic mismatch" in msg:
            # 2.27+ logs a stray connection at INFO: a cause whatever its level.
            self._warn(msg, msg)
        elif w == "Failed" and msg.startswith("Failed to open libibverbs"):
            # NCCL's ibvsymbols.cc logs it at INFO: a cause whatever its level.
            self._warn(msg, msg)
        elif w in ("Successfully", "Initialized", "Assigned", "External") and \
                "plugin" in msg:
            self._plugin_state(msg)

    def _plugin_state(self, msg: str) -> None:
        """NCCL 2.26+'s plugin lines: "Successfully loaded external network plugin PATH",
        "Initialized NET plugin NAME", "Assigned NET plugin NAME to comm", "External network
        plugin PATH is unsupported" (src/plugin/net.cc)."""
        if msg.startswith("Successfully loaded external network plugin "):
            self.plugin.setdefault("path", msg[44:].strip())
        elif msg.startswith(("Initialized NET plugin ", "Assigned NET plugin ")):
            name = msg.split("NET plugin ", 1)[1].removesuffix(" to comm").strip()
            if msg.startswith("Assigned") and name and len(self.plugin_assigned) < 8:
                self.plugin_assigned.add(name)  # the one that carries the communicator
            if name in ("IB", "Socket"):
                self.plugin_internal += 1
            elif name:
                self.plugin.setdefault("name", name)
        elif msg.startswith("External network plugin ") and "unsupported" in msg:
            self._plugin_failure(msg)

    def _plugin_failure(self, msg: str) -> None:
        if len(self.plugin_failures) < 8 and msg not in self.plugin_failures:
            self.plugin_failures.append(msg)

    def _channel(self, rest: str) -> None:
        self.net_channels += 1
        gdr = "GDRDMA" in rest
        if gdr:
            self.gdr_channels += 1
        # "IB/0/GDRDMA", "AWS Libfabric/0", "Socket/3": the name ends at the last "/<index>".
        parts = rest.split("/")
        name_parts = []
        for p in parts:
            if p.strip().isdecimal():
                break
            name_parts.append(p)
        name = "/".join(name_parts).strip()
        if name:
            self.channel_nets[name] += 1

    def _net(self, w: str, msg: str) -> None:
        if "GPU Direct RDMA" in msg:
            self._gdr_line(msg)
            return
        if w == "NET/IB":
            if "No device found" in msg:
                self.ib_no_device += 1
                return
            if "/IB" in msg or "/RoCE" in msg:
                for dev, port, ll in _HCA.findall(msg):
                    if len(self.hcas) < 1024:
                        self.hcas[(dev, int(port))] = ll
                m = _OOB.search(msg)
                if m:
                    self.oob[m.group(1)] += 1
                return
            if "sideband communication" in msg:
                m = re.search(r"interface (\S+) for sideband", msg)
                if m:
                    self.sideband[m.group(1)] += 1
                return
            if "Got completion" in msg:
                self._warn(msg, msg)
        elif w == "NET/Socket":
            if "Using" in msg:
                m = _IFACE.search(msg)
                if m:
                    self.socket_ifs[m.group(1)] += 1
                    self._ifaces(msg)
        elif w == "NET/Plugin":
            if "Loaded net plugin" in msg:
                self.plugin.setdefault("name", msg.split("Loaded net plugin", 1)[1].strip())
                return
            low = msg.lower()
            if "collnet" in low or "plugin name set by env" in low or "closing" in low:
                return
            if _PLUGIN_ABSENT.search(msg):
                # No libnccl-net.so on the path: NCCL uses its internal IB and Socket, as it
                # says (2.18 "No plugin found, using internal implementation", 2.19 "No plugin
                # found (libnccl-net.so)", 2.23+ "Could not find: libnccl-net.so"): not a failure.
                self.plugin_internal += 1
            elif "failed to find ncclnetplugin_v" in low:
                self.plugin_versions_missed += 1  # an older symbol may load next ("Loaded ...")
            elif ("returned" in low or "failed" in low or "unsupported" in low
                  or "undefined symbol" in low or "cannot open shared object" in low
                  or "wrong elf class" in low):
                self._plugin_failure(msg)

    def _ifaces(self, msg: str) -> None:
        for m in re.finditer(r"(?:\[\d+\])?([A-Za-z][\w.@-]*?):([\d.]+|[0-9a-fA-F:]+(?:%\S+)?)<",
                             msg):
            if len(self.socket_all) < 64:
                self.socket_all.setdefault(m.group(1), m.group(2))

    def _gdr_line(self, msg: str) -> None:
        if "Disabled" in msg:
            m = _GDR_OFF.search(msg)
            reason = (m.group(5) if m else None) or ""
            self.gdr_off[reason.strip()] += 1
        elif "nabled" in msg:
            self.gdr_on_lines += 1

    def _add_error(self, kind: str, key: str, line: str, **kw: Any) -> None:
        k = (kind, key)
        e = self.errors.get(k)
        if e is not None:
            e.count += 1
            self._last_added = e
            return
        if len(self.errors) >= _MAX_ERRORS:
            self.errors_dropped += 1
            return
        e = NcclError(kind=kind, line=line.strip()[:400], **kw)
        m = _ERR_HEAD.search(line)
        if m:
            e.host = m.group(1)
        r = _RANK_TAG.search(line)
        if r:
            e.rank = int(r.group(1))
        self.errors[k] = e
        self._last_added = e

    def _warn(self, msg: str, line: str) -> None:
        hit = rules.match(line, "nccl")  # the whole line: "nvls.cc:223" sits before the WARN
        if hit is not None:  # a cause in the rules table names the error
            self._add_error(hit[0].code, rules.diagnosis(*hit, line).cause[:80], line)
            return
        if "Got completion" in msg:
            m = _STATUS.search(msg)
            status = int(m.group(1) or m.group(2)) if m else None
            v = _VENDOR.search(msg)
            vendor = int(v.group(1)) if v else None
            self._add_error("completion", f"{status}/{vendor}", line, status=status,
                            vendor_err=vendor)
            return
        m = _VERB_NEW.search(msg)
        if m:
            verb, err = m.group(1), m.group(3).strip()
            nxt, gi, lg = _QP_NEXT.search(msg), _GID_INDEX.search(msg), _LOCAL_GID.search(msg)
            self._add_error("ibv_call", f"{verb}/{err}", line, verb=verb, errno_text=err,
                            errno=int(m.group(2)), qp_state=nxt.group(1) if nxt else None,
                            gid_index=int(gi.group(1)) if gi else None,
                            local_gid=lg.group(1) if lg else None)
            return
        m = _VERB.search(msg)
        if m:
            verb, err = m.group(1), (m.group(2) or "").strip() or None
            self._add_error("ibv_call", f"{verb}/{err}", line, verb=verb, errno_text=err)
            return
        if "Unable to open device" in msg:  # follows "Call to ibv_open_device failed"
            self._add_error("ibv_call", "ibv_open_device/None", line, verb="ibv_open_device")
            return
        if "Failed to open libibverbs" in msg:
            self.no_libibverbs += 1
            self._add_error("no_libibverbs", "", line)
            return
        low = msg.lower()
        if ("no socket interface found" in low or ("ncclsocketinit" in low and "af_inet" in low)
                or "no nccl_socket_ifname interface" in low):
            self._add_error("no_interface", "", line)
            return
        if "address family not supported" in low:
            self._add_error("address_family", "", line)
            return
        if "no interface found in the same subnet" in low:
            p = _PEER.search(msg) or re.search(r"address ([\w.:]+)<", msg)
            self._add_error("subnet", "", line, peer=p.group(1) if p else None)
            return
        if "cannot assign requested address" in low:
            self._add_error("bind_address", "", line)
            return
        if "encountered a fatal error" in low:  # NCCL aborts the comm after the error itself
            self._add_error("comm_abort", "", line)
            return
        if ("broken pipe" in low or "connection reset by peer" in low
                or "connection closed by remote peer" in low or "connection refused" in low):
            p = _PEER.search(msg)
            self._add_error("peer_lost", msg[:40], line, peer=p.group(1) if p else None)
            return
        if "duplicate gpu" in low:
            self._add_error("duplicate_gpu", "", line)
        elif "unable to register memory" in low or "cannot allocate memory" in low:
            self._add_error("memory_registration", "", line)
        elif "timeout" in low or "timed out" in low:
            self._add_error("timeout", msg[:60], line)
        elif "service thread" in low or "proxy" in low:
            self._add_error("proxy", msg[:60], line)
        elif "net/ofi" in low:
            self._add_error("plugin", msg[:60], line)
        elif "socket" in low or "connect" in low or "bootstrap" in low:
            self._add_error("socket", msg[:60], line)
        else:
            self._add_error("warn", msg[:60], line)
            self._pending_warn = self._last_added

    def _ras(self, line: str) -> bool:
        """NCCL RAS report lines; True when the line was one."""
        s = line.strip()
        if s in ("Errors", "Warnings"):
            self._ras_section = s
            self._ras_item = None
            return True
        m = _RAS_ITEM.match(line)
        if m and self._ras_section and len(self.ras_items) < 32:
            self._ras_item = {"section": self._ras_section, "group": int(m.group(1)),
                              "comm": int(m.group(2)), "hash": m.group(3),
                              "what": m.group(4), "detail": []}
            self.ras_items.append(self._ras_item)
            return True
        if self._ras_item is not None and line.startswith("  ") and s:
            if len(self._ras_item["detail"]) < 8:
                self._ras_item["detail"].append(s)
            return True
        self._ras_item = None
        return False

    def _other(self, line: str) -> None:
        if ((self._ras_section is not None or line.strip() in ("Errors", "Warnings"))
                and self._ras(line)):
            return
        if "NCCL_" in line and len(self.env_pasted) < 256:
            for name, val in nccl_env.ASSIGN.findall(line):
                self.env_pasted.setdefault(name, val)
        if "libibverbs: Warning" in line and self.verbs.feed(line):
            return
        t = _RANK_TAG.search(line)
        if t and len(self.rank_tags) < _MAX_SET:
            self.rank_tags.add(int(t.group(1)))
        if "Test NCCL failure" in line or "Test CUDA failure" in line:
            if len(self.test_failures) < 16:
                self.test_failures.append(line)
            return
        s = line.lstrip()
        if s.startswith(("This is usually caused", "Disable NVLS")):  # NCCL 2.29's own words
            e = self._last_added
            if e is not None and e.kind == "nvls_failure":
                e.detail = ((e.detail + " ") if e.detail else "") + s[:200]
            return
        if "NVLink SHARP" in line and "NCCL WARN" not in line:  # a wrapped exception text
            self._warn(line, line)
            return
        if line.endswith("Last error:"):  # NCCL's message follows on the next line
            self._pending_last = True
            return
        j = line.find("Last error: ")
        inline = line[j + 12:].strip() if j >= 0 else ""
        m = _VERSION.search(line)
        if m:
            self.versions[m.group(1)] += 1
        if "remote process exited" in line or "ncclRemoteError" in line:
            self._add_error("remote_error", "", line)
            self._last_error_for = self.errors.get(("remote_error", ""))
            if inline:  # a wrapped exception text: "... Last error: NET/IB : Got completion"
                self._last_error(inline)
            return
        if m:
            # "NCCL error in: ..., unhandled system error, NCCL version X" names no cause by
            # itself; a flattened exception carries NCCL's own message after "Last error:".
            if inline:
                kind = ("system_error" if "system error" in line or "ncclSystemError" in line
                        else "cuda_error" if "cuda error" in line
                        or "ncclUnhandledCudaError" in line else None)
                if kind:
                    self._add_error(kind, "", line)
                self._last_error(inline)
            return
        if "Got completion" in line or "ncclSocketInit" in line or "NET/OFI" in line:
            self._warn(line, line)
        elif "Watchdog caught collective operation timeout" in line:
            self._add_error("timeout", "", line)
            w = _WATCHDOG.search(line)
            if w and len(self.wd) < _MAX_SET:
                ts = _TORCH_TS.search(line)
                rank = int(w.group(2))
                if rank not in self.wd:
                    self.wd[rank] = (int(w.group(3)), w.group(4) or "?",
                                     ts.group(2) if ts else "",
                                     ts.group(1).zfill(4) if ts else "")
                    if w.group(5):
                        self.wd_numel[rank] = (int(w.group(5)), int(w.group(6)))
                    if w.group(1):
                        self.wd_pg.setdefault(rank, int(w.group(1)))
        elif "watchdog got stuck" in line:
            st = _WD_STUCK.search(line)
            if st and len(self.wd_stuck) < _MAX_SET:
                self.wd_stuck.add(int(st.group(1)))
        elif "last completed NCCL work" in line:
            g = _WD_PG.search(line)
            if g and len(self.wd_pg) < _MAX_SET:
                self.wd_pg.setdefault(int(g.group(2)), int(g.group(1)))
            d = _LAST_DONE.search(line)
            if d and len(self.wd_done) < _MAX_SET:
                self.wd_done[int(d.group(1))] = int(d.group(2))
        elif "unhandled system error" in line or "ncclSystemError" in line:
            self._add_error("system_error", "", line)
        elif "unhandled cuda error" in line or "ncclUnhandledCudaError" in line:
            self._add_error("cuda_error", "", line)
        elif "NCCL error" in line or "ncclInternalError" in line or "NCCL failure" in line:
            self._add_error("nccl_error", line[-60:], line)
            self._last_error_for = self.errors.get(("nccl_error", line[-60:]))

    def _last_error(self, text: str) -> None:
        """The line under "Last error:" is NCCL's own message: classify it as a WARN."""
        text = re.sub(r"^\[[^\]]*\]:\s*", "", text)
        if self._last_error_for is not None and self._last_error_for.detail is None:
            self._last_error_for.detail = text[:300]
        if text:
            self._warn(text, text)

    # -- conclusions -----------------------------------------------------------------------
    def finish(self) -> NcclLogReport:
        r = NcclLogReport(lines=self.lines, nccl_lines=self.nccl_lines)
        r.nccl_version = self.versions.most_common(1)[0][0] if self.versions else None
        r.env = dict(self.env)
        r.hcas = [{"device": d, "port": p, "link_layer": ll}
                  for (d, p), ll in sorted(self.hcas.items())]
        for src in (self.oob, self.sideband, self.bootstrap, self.socket_ifs):
            if src:
                r.oob_interface = src.most_common(1)[0][0]
                break
        ib_disabled = self.env.get("NCCL_IB_DISABLE", "0").strip() not in ("0", "")
        if self.networks:
            r.network = self.networks.most_common(1)[0][0]
        elif self.channel_nets:
            r.network = self.channel_nets.most_common(1)[0][0]
        elif (self.ib_no_device or self.no_libibverbs or ib_disabled) and \
                (self.socket_ifs or not self.hcas):
            r.network = "Socket" if self.socket_ifs else None
        elif self.hcas:
            r.network = "IB"
        r.fallback_to_socket = r.network == "Socket"
        if r.fallback_to_socket:
            if self.ib_no_device:
                r.fallback_cause = "NET/IB : No device found"
            elif self.no_libibverbs:
                r.fallback_cause = "libibverbs could not be loaded"
            elif ib_disabled:
                r.fallback_cause = ("IB disabled by environment "
                                    f"(NCCL_IB_DISABLE={self.env['NCCL_IB_DISABLE']})")
            elif self.plugin_failures:
                r.fallback_cause = "network plugin failed to load"
            else:
                r.fallback_cause = "not stated in the log"
        if self.gdr_channels or self.gdr_on_lines:
            r.gdr = "enabled"
        elif self.gdr_off:
            r.gdr = "disabled"
            reasons = [k for k, _ in self.gdr_off.most_common() if k]
            r.gdr_reason = reasons[0] if reasons else (
                "no RDMA network (Socket)" if r.fallback_to_socket else "not stated")
        elif r.fallback_to_socket:
            r.gdr, r.gdr_reason = "disabled", "no RDMA network (Socket)"
        elif self.net_channels and r.network and r.network != "Socket":
            r.gdr, r.gdr_reason = "disabled", "network channels run without /GDRDMA"
        r.errors = list(self.errors.values())
        r.ranks = self.nranks or None
        r.hosts = len(self.hosts)
        r.nodes = self.nnodes or None
        # One host for sure: NCCL says nNodes 1 (or nccl-tests lists every rank on one host),
        # no communicator spans more, no channel went through the network, one host name.
        r.single_host = ((self.nnodes == 1 or (self.single_host_hint and not self.nnodes))
                         and not self.net_channels and r.hosts <= 1)
        if self.plugin:
            r.net_plugin = dict(self.plugin)
        requested = self.env.get("NCCL_NET_PLUGIN", "").strip()
        if self.plugin_assigned:  # NCCL 2.28+ says which plugin carries the communicator
            r.net_plugin_state = ("internal" if self.plugin_assigned <= {"IB", "Socket"}
                                  else "loaded")
        elif self.plugin:
            r.net_plugin_state = "loaded"
        elif self.plugin_failures or (requested and requested.lower() != "none"
                                      and self.plugin_internal):
            r.net_plugin_state = "failed"
        elif self.plugin_internal:
            r.net_plugin_state = "internal"
        r.socket_interfaces = [f"{k}:{v}" for k, v in self.socket_all.items()]
        r.env_pasted = dict(self.env_pasted)
        if self.wd or self.wd_stuck:
            r.watchdog = self._watchdog()
        r.findings = self._findings(r)
        return r

    def _watchdog(self) -> dict[str, Any]:
        """Which ranks report a collective timeout, which do not, and which is behind."""
        ranks = sorted(self.wd)
        seen = set(self.rank_tags) | set(range(self.nranks))
        d: dict[str, Any] = {
            "ranks_timed_out": ranks[:256], "count": len(ranks), "seq": None, "op": None,
            "first": None, "watchdog_stuck": sorted(self.wd_stuck)[:256],
            # A rank with only the "Exception ... detected by watchdog" line timed out too.
            "silent_ranks": sorted(seen - set(ranks) - set(self.wd_done) - self.wd_stuck)[:256],
        }
        if ranks:
            first = min(ranks, key=lambda k: (self.wd[k][3] or "~", self.wd[k][2] or "~", k))
            d["seq"], d["op"] = self.wd[first][0], self.wd[first][1]
            d["first"] = {"rank": first, "time": self.wd[first][2] or None}
        desync = self._desync()
        if desync:
            d["desync"] = desync
        if self.wd_done and len(set(self.wd_done.values())) > 1:
            low = min(self.wd_done.values())
            d["behind"] = sorted(k for k, v in self.wd_done.items() if v == low)[:64]
            d["behind_last_completed"] = low
        return d

    def _desync(self) -> dict[str, Any] | None:
        """Ranks of one process group that timed out at the same SeqNum in different
        collectives (or the same one with different counts): the ranks diverged."""
        by_seq: dict[int, list[int]] = {}
        for rank, (seq, _op, _t, _d) in self.wd.items():
            by_seq.setdefault(seq, []).append(rank)
        groups: dict[tuple[int | None, int], list[int]] = {}
        for seq, members in by_seq.items():
            pgs = {self.wd_pg[k] for k in members if k in self.wd_pg}
            for k in members:
                # A rank whose group no line names joins the one group the others name; with
                # several groups named, it is compared with none (their numbers are separate).
                pg = self.wd_pg.get(k, next(iter(pgs)) if len(pgs) == 1 else None)
                if pg is None and pgs:
                    continue
                groups.setdefault((pg, seq), []).append(k)
        for (pg, seq), ranks in sorted(groups.items(), key=lambda kv: kv[0][1]):
            ops = {self.wd[k][1] for k in ranks}
            if len(ranks) < 2 or "?" in ops or not ops <= _SAME_ON_ALL:
                continue
            if len(ops) > 1:
                by = {op: sorted(k for k in ranks if self.wd[k][1] == op) for op in ops}
                return {"seq": seq, "pg": pg, "what": "op", "by": dict(sorted(
                    by.items(), key=lambda kv: (-len(kv[1]), kv[0])))}
            sizes = {self.wd_numel[k] for k in ranks if k in self.wd_numel}
            if len(sizes) > 1:
                op = next(iter(ops))
                by_n = {f"{op} of {n[0]} elements":
                        sorted(k for k in ranks if self.wd_numel.get(k) == n) for n in sizes}
                return {"seq": seq, "pg": pg, "what": "size", "by": dict(sorted(
                    by_n.items(), key=lambda kv: (-len(kv[1]), kv[0])))}
        return None

    def _findings(self, r: NcclLogReport) -> list[Finding]:
        f: list[Finding] = []
        if r.fallback_to_socket:
            hint = {
                "NET/IB : No device found":
                    "NCCL found no usable RDMA device: check ibv_devinfo on the host (and "
                    "inside the container: --device /dev/infiniband, --ulimit memlock=-1, "
                    "--cap-add IPC_LOCK), that the ports are ACTIVE, and NCCL_IB_HCA.",
                "libibverbs could not be loaded":
                    "Install rdma-core/libibverbs in the image (libibverbs.so.1 must load).",
                "network plugin failed to load":
                    "The net plugin named by NCCL_NET_PLUGIN did not load; see the plugin "
                    "line and LD_LIBRARY_PATH.",
            }.get(r.fallback_cause or "", "Unset NCCL_IB_DISABLE (or set it to 0) if the "
                  "hosts have RDMA NICs." if (r.fallback_cause or "").startswith("IB disabled")
                  else "The lines saying why are not in this text: rerun with NCCL_DEBUG=INFO "
                  "NCCL_DEBUG_SUBSYS=INIT,NET and look for NET/IB lines; check ibv_devinfo on "
                  "the hosts and in the container.")
            if r.single_host:
                # Not an error: GPUs of one host never use the network transport.
                f.append(Finding(
                    "warning", "no RDMA network (network Socket: "
                    f"{r.fallback_cause}), but every rank is on one host"
                    + (f" (NCCL: nNodes {r.nodes})" if r.nodes else "")
                    + ": GPUs of one host talk over P2P/NVLink or shared memory, not the "
                    "network, so this run loses nothing",
                    "Only a job across hosts would fall back to TCP sockets; before running "
                    "one: " + hint, "socket_fallback", "config"))
            else:
                f.append(Finding("error", "NCCL fell back to TCP sockets (network Socket): "
                                 f"{r.fallback_cause}", hint, "socket_fallback", "config"))
        elif r.network:
            f.append(Finding("info", f"network used: {r.network}"
                             + (f" over {len(r.hcas)} HCA port(s)" if r.hcas else ""), None))
        nets = self.networks
        if len(nets) > 1 and "Socket" in nets:
            # NCCL picks its network per process: a host without a usable RDMA device takes
            # Socket while the others take IB, and their connections fail (NVIDIA/nccl-tests#188).
            f.append(Finding(
                "error", "ranks in this text chose different networks: "
                + ", ".join(f"{n} ({c} line{'s' if c > 1 else ''})" for n, c in
                            nets.most_common()),
                "Every rank must use the same network, or their connections fail "
                "(socketFinalizeAccept: wrong type): the ranks on Socket found no usable RDMA "
                "device (look for 'NET/IB : No device found' on their host and check ibv_devinfo "
                "there); NCCL_IB_DISABLE=1 everywhere runs all of them over sockets.",
                "network_mismatch", "config"))
        if r.oob_interface == "lo" and r.single_host:
            f.append(Finding("info", "NCCL's socket/bootstrap interface is the loopback 'lo' "
                             "(fine while every rank is on this host)", None))
        elif r.oob_interface == "lo":
            f.append(Finding("error", "NCCL's socket/bootstrap interface is the loopback 'lo'",
                             "Ranks on other hosts cannot reach 127.0.0.1: set "
                             "NCCL_SOCKET_IFNAME to the hosts' routable interface."))
        layers = {h["link_layer"] for h in r.hcas}
        if len(layers) > 1:
            odd = [f"{h['device']}:{h['port']}" for h in r.hcas if h["link_layer"] == "RoCE"]
            f.append(Finding("warning", "NCCL uses both InfiniBand and RoCE ports: "
                             + ", ".join(odd) + " are RoCE",
                             "A RoCE port cannot talk to an IB port; restrict NCCL_IB_HCA "
                             "to one fabric."))
        if r.gdr == "disabled" and not r.fallback_to_socket:
            reason = r.gdr_reason or ""
            if "no module" in reason:
                hint = ("Load the peer-memory module (modprobe nvidia_peermem, or "
                        "nv_peer_mem on old drivers) on every host, or use DMA-BUF.")
            elif "distance" in reason:
                hint = ("The GPU and NIC are too far apart on PCIe for NCCL's default "
                        "(NCCL_NET_GDR_LEVEL); GDR is off by design here. Check "
                        "nvidia-smi topo -m; NCCL_NET_GDR_LEVEL=SYS forces it.")
            else:
                hint = ("Check nvidia_peermem is loaded and registered "
                        "(/sys/kernel/mm/memory_peers/nv_mem/version) or DMA-BUF support, "
                        "and that PCIe ACS/IOMMU do not block peer-to-peer.")
            f.append(Finding("warning", f"GPUDirect RDMA is disabled ({reason})", hint))
        elif r.gdr == "enabled":
            f.append(Finding("info", "GPUDirect RDMA is in use (channels via NET/.../GDRDMA)"
                             if self.gdr_channels else "GPUDirect RDMA is enabled", None))
        # Generic NCCL/PyTorch error lines restate a cause listed elsewhere: list them last.
        late = ("nccl_error", "system_error", "cuda_error", "proxy", "comm_abort",
                *rules.CONSEQUENCE_CODES)
        rdma_seen = False
        for e in r.errors:  # in order of appearance
            e_after_rdma = rdma_seen and e.kind == "peer_lost"
            rdma_seen = rdma_seen or e.kind in ("ibv_call", "completion", "async_event")
            if e_after_rdma:
                self._after_rdma.add(id(e))
        for e in sorted(r.errors, key=lambda e: (e.kind in late, self._lost_peer(e, r))):
            fd = nccl_errors.explain_error(e, {**r.env_pasted, **r.env}, id(e) in self._after_rdma)
            fd.code = fd.code or e.kind
            if e.kind == "no_libibverbs" and r.single_host:
                fd.severity = "info"  # NCCL needs no verbs between GPUs of one host
            if fd.severity != "info":
                fd.remedy = fd.remedy or rules.remedy_for(fd.code)
            f.append(fd)
        if self.errors_dropped:
            f.append(Finding("info", f"{self.errors_dropped} more distinct errors not listed",
                             None))
        for it in self.ras_items:
            f.append(Finding(
                "error" if it["section"] == "Errors" else "warning",
                f"NCCL RAS reports {it['what']} for communicator {it['group']}-{it['comm']} "
                f"({it['hash']})" + (": " + "; ".join(it["detail"][:6]) if it["detail"] else ""),
                "RAS sees the running job from every process: MISMATCH means the ranks of a "
                "communicator disagree (different operation counts: the ranks at the lower "
                "count are the ones behind, stuck or on another code path); INCOMPLETE or "
                "missing ranks are processes that stopped answering (dead, hung or "
                "unreachable). Inspect the processes it names (py-spy dump, gdb) and their "
                "logs; run the RAS client again to see whether it persists.", "ras_report"))
        if r.env:
            f.append(Finding("info", "environment overrides NCCL reports: "
                             + ", ".join(f"{k}={v}" for k, v in sorted(r.env.items())), None))
        if self.plugin_failures and not r.fallback_to_socket and not self.plugin:
            f.append(Finding("info", "no external net plugin loaded (NCCL used its internal "
                             "transports): " + self.plugin_failures[0], None))
        f.extend(self._around_findings(r))
        f.extend(self.verbs.findings())
        if r.nccl_version:
            f.append(Finding("info", f"NCCL {r.nccl_version}", None))
        elif "NCCL_VERSION" in r.env_pasted:
            f.append(Finding(
                "info", "no NCCL version line in this text; NCCL_VERSION="
                f"{r.env_pasted['NCCL_VERSION']} is set in the environment",
                "NCCL_VERSION is a container image label, not what NCCL reads: the library "
                "that ran can differ (PyTorch wheels bring their own). NCCL_DEBUG=INFO prints "
                "'NCCL version X' on rank 0; python -c 'import torch; "
                "print(torch.cuda.nccl.version())' tells torch's.", "version_from_env"))
        return f

    @staticmethod
    def _lost_peer(e: NcclError, r: NcclLogReport) -> bool:
        """A lost connection when the text also holds a cause that ends a process (a CUDA
        OOM, an NVLS or device failure): the peer went away because of that cause, so it is
        listed after it (NVIDIA/nccl#1235: socketProgress closed, then rank 3 out of memory)."""
        return e.kind in ("peer_lost", "socket") and any(
            x.kind in _FATAL_CAUSES for x in r.errors)

    def _around_findings(self, r: NcclLogReport) -> list[Finding]:
        """What went wrong around NCCL: interfaces, containers, plugins, who failed first."""
        f: list[Finding] = []
        plugin = self.plugin
        if plugin:
            what = " ".join(x for x in (plugin.get("name"), plugin.get("path")) if x)
            if r.fallback_to_socket:
                f.append(Finding(
                    "info" if r.single_host else "warning",
                    f"an external net plugin was loaded ({what}) but found no "
                    "usable RDMA device, so NCCL fell back to Socket",
                    "The plugin searches the same verbs devices as NCCL: in a container map "
                    "/dev/infiniband and the rdma resource; NCCL_NET_PLUGIN=none (NCCL 2.11+) "
                    "takes the plugin out to check NCCL's own IB transport.", "plugin_no_device"))
            elif r.network and r.network not in ("IB", "Socket"):
                ib_off = self.env.get("NCCL_IB_DISABLE", "0").strip() not in ("0", "")
                f.append(Finding(
                    "warning" if ib_off else "info",
                    f"network {r.network} comes from an external net plugin ({what})"
                    + (" although NCCL_IB_DISABLE is set" if ib_off else ""),
                    "The plugin, not NCCL's internal IB transport, carries the traffic and "
                    "reads the NCCL_IB_* settings itself; NCCL_IB_DISABLE does not switch it "
                    "off. For NCCL's internal transports set NCCL_NET_PLUGIN=none (NCCL 2.11+) "
                    "or choose one with NCCL_NET=IB or NCCL_NET=Socket (2.10+).", "plugin_network"))
        bridges = [i for i in self.socket_all if _LOCAL_IF.match(i)]
        if bridges and len(self.socket_all) > 1 and not r.single_host:
            f.append(Finding(
                "warning", f"NCCL's socket interfaces include {', '.join(bridges)} "
                f"(of {', '.join(self.socket_all)}): a bridge that only reaches this host",
                "Set NCCL_SOCKET_IFNAME to the interface the other hosts reach (the same "
                "name on every host, or a prefix such as NCCL_SOCKET_IFNAME=ens).",
                "bridge_interface"))
        # Addresses other hosts cannot reach matter only when there are other hosts.
        for name, addr in ({} if r.single_host else self.socket_all).items():
            if addr.startswith("172.17.0.") and name == "eth0":
                f.append(Finding(
                    "warning", f"NCCL's address {addr} on {name} looks like Docker's default "
                    "bridge (172.17.0.0/16): the container has no host networking",
                    "Other hosts cannot reach a bridge address: run the container with "
                    "--network=host (Kubernetes: hostNetwork, or a secondary network with "
                    "NCCL_SOCKET_IFNAME naming it).", "docker_bridge"))
            elif addr.startswith("169.254."):
                f.append(Finding(
                    "warning", f"NCCL's address {addr} on {name} is link-local",
                    "A 169.254/16 address is not routed between hosts: set "
                    "NCCL_SOCKET_IFNAME to an interface with a routable address.",
                    "link_local_address"))
        if r.watchdog:
            f.extend(nccl_errors.watchdog_findings(r.watchdog))
        # Consequences of another error, and libibverbs missing (NCCL goes on with sockets).
        consequences = ("proxy", "nccl_error", "remote_error", "timeout", "system_error",
                        "no_libibverbs", "comm_abort", "cuda_error", "collnet_fallback",
                        *rules.CONSEQUENCE_CODES)
        firsts = sorted((e for e in r.errors if e.kind not in consequences),
                        key=lambda e: self._lost_peer(e, r))
        if len(firsts) > 1:
            e = firsts[0]
            where = " ".join(x for x in (f"host {e.host}" if e.host else "",
                                         f"rank {e.rank}" if e.rank is not None else "") if x)
            f.append(Finding(
                "info", f"first failure in this text ({e.kind})"
                + (f" on {where}" if where else "") + ": " + e.line[-200:],
                "Errors after it on other ranks are usually consequences: fix this one "
                "first." + (f" Its peer {e.peer} is where to look next (its log, whether the "
                            "process is alive)." if e.peer else ""), "first_failure"))
        says = self.env_nccl_says
        for name, what in sorted(says.items()):
            f.append(Finding("warning", f"NCCL says {name} {what}",
                             next((x.hint for x in nccl_env.lint({name: "?"}, r.nccl_version)),
                                  None), "env_nccl_says"))
        env = {k: v for k, v in {**r.env_pasted, **r.env}.items() if k not in says}
        f.extend(nccl_env.lint(env, r.nccl_version))
        return f


def parse_nccl_log(lines: Iterable[str]) -> NcclLogReport:
    p = NcclLogParser()
    p.feed_many(lines)
    return p.finish()


def applied_settings(lines: Iterable[str]) -> dict[str, str]:
    """The NCCL settings NCCL itself says it took, name -> value, from its INFO lines
    ``NCCL_xxx set by environment to v.`` (and ``NCCL_xxx set to v``). NCCL loads
    /etc/nccl.conf (or NCCL_CONF_FILE) into its own environment without overriding what is set,
    so a conf-file value shows up the same way. Only what NCCL logs is here: a variable it
    never reads, or one read with NCCL_DEBUG_SUBSYS without ENV/INIT, is absent."""
    return dict(parse_nccl_log(lines).env)
