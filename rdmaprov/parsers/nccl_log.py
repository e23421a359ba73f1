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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding

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

# ibv_wc_status values (verbs.h) NCCL prints as "status=N" or "with error N".
WC_STATUS = {
    1: "local length error", 2: "local QP operation error", 4: "local protection error",
    5: "work request flushed", 9: "remote invalid request", 10: "remote access error",
    11: "remote operation error", 12: "transport retry counter exceeded",
    13: "RNR retry counter exceeded",
}


@dataclass
class NcclError:
    kind: str
    line: str
    count: int = 1
    status: int | None = None
    vendor_err: int | None = None
    verb: str | None = None
    errno_text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "line": self.line, "count": self.count}
        for k in ("status", "vendor_err", "verb", "errno_text"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.status is not None:
            d["status_text"] = WC_STATUS.get(self.status)
        return d


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
        self.gdr_off: Counter[str] = Counter()  # reason -> count
        self.gdr_on_lines = 0
        self.env: dict[str, str] = {}
        self.errors: dict[tuple[str, str], NcclError] = {}
        self.errors_dropped = 0
        self.nranks = 0
        self.hosts: set[str] = set()

    # -- feeding ---------------------------------------------------------------------------
    def feed(self, line: str) -> None:
        self.lines += 1
        i = line.rfind("NCCL INFO ")
        if i >= 0:
            self.nccl_lines += 1
            msg = line[i + 10:]
            # Channel lines are most of a big log and name no new host: skip the host scan.
            if not msg.startswith(("Channel", "Ring")):
                self._host(line, i)
            self._info(msg.rstrip())
            return
        i = line.rfind("NCCL WARN ")
        if i >= 0:
            self.nccl_lines += 1
            self._host(line, i)
            self._warn(line[i + 10:].rstrip(), line)
            return
        if "NCCL" in line or "Got completion" in line or "Watchdog" in line:
            self._other(line.rstrip())

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
            self.hosts.add(host[s + 1:])

    def _info(self, msg: str) -> None:
        w = _first_word(msg)
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
        elif "nranks" in msg:
            m = _NRANKS.search(msg)
            if m:
                n = int(m.group(1))
                if n > self.nranks:
                    self.nranks = n
        elif "Got completion" in msg:
            self._warn(msg, msg)

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
        elif w == "NET/Plugin":
            low = msg.lower()
            if (("returned" in low or "failed" in low) and len(self.plugin_failures) < 8
                    and "collnet" not in low and msg not in self.plugin_failures):
                self.plugin_failures.append(msg)

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
            return
        if len(self.errors) >= _MAX_ERRORS:
            self.errors_dropped += 1
            return
        self.errors[k] = NcclError(kind=kind, line=line.strip()[:400], **kw)

    def _warn(self, msg: str, line: str) -> None:
        if "Got completion" in msg:
            m = _STATUS.search(msg)
            status = int(m.group(1) or m.group(2)) if m else None
            v = _VENDOR.search(msg)
            vendor = int(v.group(1)) if v else None
            self._add_error("completion", f"{status}/{vendor}", line, status=status,
                            vendor_err=vendor)
            return
        m = _VERB.search(msg)
        if m:
            verb, err = m.group(1), (m.group(2) or "").strip() or None
            self._add_error("ibv_call", f"{verb}/{err}", line, verb=verb, errno_text=err)
            return
        if "Failed to open libibverbs" in msg:
            self.no_libibverbs += 1
            self._add_error("no_libibverbs", "", line)
            return
        low = msg.lower()
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

    def _other(self, line: str) -> None:
        m = _VERSION.search(line)
        if m:
            self.versions[m.group(1)] += 1
            return
        if "Got completion" in line:
            self._warn(line, line)
        elif "Watchdog caught collective operation timeout" in line:
            op = re.search(r"OpType=(\w+)", line)
            self._add_error("timeout", op.group(1) if op else "", line)
        elif "unhandled system error" in line or "ncclSystemError" in line:
            self._add_error("system_error", "", line)
        elif "unhandled cuda error" in line or "ncclUnhandledCudaError" in line:
            self._add_error("cuda_error", "", line)
        elif "NCCL error" in line or "ncclInternalError" in line or "NCCL failure" in line:
            self._add_error("nccl_error", line[-60:], line)

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
        r.findings = self._findings(r)
        return r

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
            f.append(Finding("error", "NCCL fell back to TCP sockets (network Socket): "
                             f"{r.fallback_cause}", hint))
        elif r.network:
            f.append(Finding("info", f"network used: {r.network}"
                             + (f" over {len(r.hcas)} HCA port(s)" if r.hcas else ""), None))
        if r.oob_interface == "lo":
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
        for e in r.errors:
            f.append(_explain_error(e))
        if self.errors_dropped:
            f.append(Finding("info", f"{self.errors_dropped} more distinct errors not listed",
                             None))
        if r.env:
            f.append(Finding("info", "environment overrides NCCL reports: "
                             + ", ".join(f"{k}={v}" for k, v in sorted(r.env.items())), None))
        if self.plugin_failures and not r.fallback_to_socket:
            f.append(Finding("info", "no external net plugin loaded (NCCL used its internal "
                             "transports): " + self.plugin_failures[0], None))
        if r.nccl_version:
            f.append(Finding("info", f"NCCL {r.nccl_version}", None))
        return f


def _explain_error(e: NcclError) -> Finding:
    times = f" (x{e.count})" if e.count > 1 else ""
    if e.kind == "completion":
        what = WC_STATUS.get(e.status or -1, "error")
        msg = (f"work completion error status {e.status} ({what})"
               + (f", vendor err {e.vendor_err}" if e.vendor_err is not None else "") + times)
        if e.status == 12:
            hint = ("The NIC retried a send until it gave up: the peer was unreachable over "
                    "the fabric. Check the path between the two hosts (link flaps, switch "
                    "ports, ibdiagnet), on RoCE the GID index (a RoCE v2 IPv4 GID on both "
                    "ends), routing between subnets and PFC/ECN; vendor err 129 is the mlx5 "
                    "code for that retry exhaustion.")
        elif e.status == 13:
            hint = ("The receiver had no buffer posted in time: usually the peer process died "
                    "or hung.")
        elif e.status == 5:
            hint = "Flushed after an earlier error on the same QP: look for the first error."
        elif e.status in (4, 10):
            hint = "A memory key or access right did not match: often GDR/peer-memory trouble."
        else:
            hint = "Check the fabric path and the peer process at the time of the error."
        return Finding("error", msg, hint)
    if e.kind == "ibv_call":
        msg = f"{e.verb} failed" + (f": {e.errno_text}" if e.errno_text else "") + times
        err = (e.errno_text or "").lower()
        if e.verb == "ibv_modify_qp":
            if "unreachable" in err or "invalid argument" in err or "no such device" in err:
                hint = ("Connecting the queue pair failed: usually a wrong NCCL_IB_GID_INDEX "
                        "(on RoCE pick the RoCE v2 IPv4 GID from show_gids, same on all "
                        "hosts) or no route between the two ports' subnets.")
            elif "timed out" in err:
                hint = ("The peer did not answer the connection: check the fabric path and "
                        "firewalls.")
            else:
                hint = "Queue pair setup failed: check NCCL_IB_GID_INDEX, MTU and the fabric path."
        elif e.verb in ("ibv_reg_mr", "ibv_reg_mr_iova2", "ibv_create_cq", "ibv_create_qp",
                        "ibv_reg_dmabuf_mr"):
            hint = ("Usually the locked-memory limit: `ulimit -l` must be unlimited where NCCL "
                    "runs (limits.conf, systemd LimitMEMLOCK, docker --ulimit memlock=-1, "
                    "mpirun/slurm propagate it).")
        else:
            hint = "A verbs call failed: check the device state (ibv_devinfo) and permissions."
        return Finding("error", msg, hint)
    if e.kind == "memory_registration":
        return Finding("error", "registering memory with the NIC failed" + times,
                       "Raise the locked-memory limit (ulimit -l unlimited) where the ranks run.")
    if e.kind == "no_libibverbs":
        return Finding("warning", "libibverbs.so could not be loaded" + times,
                       "Without libibverbs NCCL cannot use InfiniBand/RoCE; install rdma-core.")
    if e.kind == "timeout":
        return Finding("error", "a collective timed out" + times,
                       "One rank stopped progressing: look for the first NCCL WARN on any "
                       "rank before the timeout (a network error, a dead process); a "
                       "slow/failing link shows as retry-exceeded completion errors.")
    if e.kind == "system_error":
        return Finding("error", "NCCL 'unhandled system error'" + times,
                       "A system or verbs call failed; rerun with NCCL_DEBUG=INFO and read the "
                       "NCCL WARN line before it (often memlock, a wrong interface or GID).")
    if e.kind == "plugin":
        return Finding("error", "net plugin error: " + e.line[-160:] + times,
                       "The external network plugin (e.g. aws-ofi-nccl) failed: check its "
                       "version against libfabric and that the devices are visible in the "
                       "container.")
    if e.kind == "duplicate_gpu":
        return Finding("error", "two ranks use the same GPU (Duplicate GPU detected)" + times,
                       "Each local rank needs its own device: torch.cuda.set_device(LOCAL_RANK) "
                       "before init, or a CUDA_VISIBLE_DEVICES per rank.")
    if e.kind == "proxy":
        return Finding("warning", "proxy thread error (a consequence): " + e.line[-120:] + times,
                       "The proxy reports an earlier failure on this rank: act on the first "
                       "error above it.")
    if e.kind == "socket":
        return Finding("error", "socket/bootstrap error: " + e.line[-160:] + times,
                       "Check NCCL_SOCKET_IFNAME picks the same routable interface on every "
                       "host and that no firewall blocks the ports.")
    return Finding("warning", "NCCL warning: " + e.line[-160:] + times, None)


def parse_nccl_log(lines: Iterable[str]) -> NcclLogReport:
    p = NcclLogParser()
    p.feed_many(lines)
    return p.finish()
