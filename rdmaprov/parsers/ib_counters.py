"""InfiniBand port counters as perfquery and ibqueryerrors print them (infiniband-diags):

  # Port extended counters: Lid 10 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)
  SymbolErrorCounter:..............0
  PortXmitWait:....................0
   GUID 0x1070fd0300370ea2 port ALL: [LinkDownedCounter == 25 (25.000)] [PortXmitWait == ...]

The IBA PortCounters attribute gives most error counters 16 bits (LinkDowned and
LinkErrorRecovery 8, LocalLinkIntegrity and ExcessiveBufferOverrun 4, PortXmitWait 32) and they
stop at their maximum instead of wrapping: a counter at 65535 (255, 15, 4294967295) is
saturated, its real count unknown, and only a reset and a second reading say how fast it grows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding, clean

# Counter -> (bits in PortCounters, what a rising count means, the part to look at).
COUNTERS: dict[str, tuple[int, str]] = {
    "SymbolErrorCounter": (16, "symbol errors on the wire: a marginal cable, optic or port"),
    "LinkErrorRecoveryCounter": (8, "link retraining: a marginal cable or optic"),
    "LinkDownedCounter": (8, "the link went down: a flapping cable or a rebooted peer"),
    "PortRcvErrors": (16, "malformed packets received: a bad cable or port (or the peer's)"),
    "PortRcvRemotePhysicalErrors": (16, "packets marked bad upstream: a cable or port "
                                        "earlier on the path"),
    "PortRcvSwitchRelayErrors": (16, "packets a switch could not forward (routing)"),
    "PortXmitDiscards": (16, "packets dropped at this port: congestion or a down path "
                             "(a routing or SM issue)"),
    "PortXmitConstraintErrors": (8, "packets dropped by partition/constraint checks"),
    "PortRcvConstraintErrors": (8, "packets dropped by partition/constraint checks"),
    "LocalLinkIntegrityErrors": (4, "local link integrity errors: a marginal cable"),
    "ExcessiveBufferOverrunErrors": (4, "buffer overruns: a flow-control problem on the link"),
    "VL15Dropped": (16, "subnet management packets dropped"),
    "PortXmitWait": (32, "time the port had data but no credits: congestion, not an error"),
}
# Errors that point at the cable/port itself.
_PHYSICAL = frozenset({"SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter",
                       "PortRcvErrors", "LocalLinkIntegrityErrors"})
_DOTS = re.compile(r"^\s*(\w+):\.{2,}\s*(\d+)\s*$")
_ITEM = re.compile(r"\[(\w+) == (\d+)")
_HEAD = re.compile(r"#\s*Port (?:extended )?counters: Lid (\d+) port (\d+|ALL|255)")
_GUID = re.compile(r"GUID (0x[0-9a-fA-F]+) port (\w+):")
# ibqueryerrors: 'Errors for "dl380g7 mlx4_0"' or 'Errors for 0x2c903006e29b0 "MF0;sw:SX6036/U1"'
_NODE = re.compile(r'^\s*Errors for (?:0x[0-9a-fA-F]+ )?"([^"]{1,80})"')
_MAX = 4096
# ibportstate/smpquery portinfo: "LinkWidthActive:.................4X",
# "LinkSpeedEnabled:................2.5 Gbps or 5.0 Gbps or 10.0 Gbps"; "Peer PortInfo:" starts
# the other end of the link.
_LINKATTR = re.compile(r"^\s*Link(Width|Speed)(Enabled|Active):\.{2,}\s*(.+?)\s*$")
_NUM = re.compile(r"(\d+(?:\.\d+)?)\s*(?:X|Gbps)")


@dataclass
class IbCountersReport:
    ports: dict[str, dict[str, int]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    extended: bool = False
    link: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "ib_counters", "findings": [f.to_dict() for f in self.findings],
                "counters": self.ports, "extended": self.extended, "link": self.link}


class IbCountersParser:
    def __init__(self) -> None:
        self.r = IbCountersReport()
        self.cur = "port"
        self.node = ""
        self.link: dict[str, dict[str, float]] = {}  # end ("local"/"peer") -> attr -> value
        self.end = "local"

    def feed(self, raw: str) -> None:
        line = clean(raw)
        if "#" in line and "counters:" in line:
            h = _HEAD.search(line)
            if h:
                self.cur = f"lid {h.group(1)} port {h.group(2)}"
                self.r.extended = self.r.extended or "extended" in line
            return
        if line.lstrip().startswith("Errors for"):
            n = _NODE.match(line)
            self.node = n.group(1) if n else ""
            return
        if line.lstrip().startswith("Peer PortInfo"):
            self.end = "peer"
            return
        a = _LINKATTR.match(line) if line.lstrip().startswith("Link") else None
        if a:
            vals = [float(x) for x in _NUM.findall(a.group(3))]
            if vals:
                # Enabled lists what the port may use: its best; Active is one value.
                self.link.setdefault(self.end, {})[a.group(1) + a.group(2)] = max(vals)
            return
        m = _DOTS.match(line)
        if m:
            if m.group(1) in COUNTERS and len(self.r.ports) < _MAX:
                self.r.ports.setdefault(self.cur, {})[m.group(1)] = int(m.group(2))
            return
        if "==" in line and "[" in line:
            g = _GUID.search(line)
            where = f"{g.group(1)} port {g.group(2)}" if g else self.cur
            if self.node:
                where = f'"{self.node}" {where}'
            for name, val in _ITEM.findall(line):
                if name in COUNTERS and len(self.r.ports) < _MAX:
                    self.r.ports.setdefault(where, {})[name] = int(val)

    def finish(self) -> IbCountersReport:
        r = self.r
        f = r.findings
        saturated: list[str] = []
        for where, cs in r.ports.items():
            for name, val in cs.items():
                bits, meaning = COUNTERS[name]
                if val == (1 << bits) - 1:
                    saturated.append(f"{where} {name} = {val}")
                elif val and name in _PHYSICAL:
                    f.append(Finding("warning", f"{where}: {name} = {val} ({meaning})",
                                     "Reset the counters (perfquery -x -R LID PORT, or "
                                     "ibqueryerrors -k -K) and read them again after a load: "
                                     "a count that keeps rising is the cable or optic of this "
                                     "port (reseat, then replace); one that stays is history.",
                                     "ib_counter_errors", "reset-link"))
                elif val and name == "PortXmitDiscards":
                    f.append(Finding("warning", f"{where}: {name} = {val} ({meaning})",
                                     "Reset and re-read under load; rising discards with no "
                                     "physical errors point at congestion or routing (check "
                                     "for down links and the SM: ibdiagnet).",
                                     "ib_counter_errors", "investigate"))
        if saturated:
            f.insert(0, Finding(
                "warning", "saturated counters (stuck at their maximum, the real count is "
                "unknown): " + "; ".join(saturated[:12]) + (" ..." if len(saturated) > 12
                                                            else ""),
                "A saturated counter no longer counts: reset it (perfquery -x -R LID PORT, "
                "or ibqueryerrors -k -K for the fabric) and read it again after some traffic; "
                "only the rate after the reset says whether the port is bad. PortXmitWait at "
                "its maximum is congestion history, not an error.",
                "ib_counter_saturated", "investigate"))
        loc, peer = self.link.get("local", {}), self.link.get("peer", {})
        for what, unit in (("Width", "X"), ("Speed", " Gbps")):
            act, en = loc.get(what + "Active"), loc.get(what + "Enabled")
            if act is None or en is None:
                continue
            best = min(en, peer.get(what + "Enabled", en))  # what both ends allow
            if act < best:
                f.append(Finding(
                    "error", f"link {what.lower()} down: active {act:g}{unit}, both ends "
                    f"enabled for {best:g}{unit}",
                    "A link that trained below what both ports allow has a bad lane or a "
                    "marginal cable/optic: reseat it, then replace it; `mlxlink -d DEV -p "
                    "PORT` (or ibdiagnet) shows the lanes and the error rate.",
                    f"ib_link_{what.lower()}_down", "reset-link"))
        r.link = self.link
        if not r.ports and not self.link:
            f.append(Finding("warning", "no port counters found in this text", None))
        elif not f:
            f.append(Finding("info", f"no error counters above zero on {len(r.ports)} "
                             "port(s)" if r.ports else "the link runs at the width and speed "
                             "both ends allow", None))
        return r
