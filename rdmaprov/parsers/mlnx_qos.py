"""`mlnx_qos -i IFACE`: trust mode, dscp2prio map, PFC per priority, ETS per traffic class;
and whether NCCL's traffic class (NCCL_IB_TC = TOS = DSCP<<2 | ECN) lands on a PFC priority."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding, clean

_PRIO = re.compile(r"^prio:\s*(\d)\s+dscp:\s*([\d,\s]+)")
_TC = re.compile(r"^tc:\s*(\d+)\s+ratelimit:\s*([^,]+),\s*tsa:\s*(\w+)(?:,\s*bw:\s*(\d+)%)?")


@dataclass
class MlnxQosReport:
    dcbx: str | None = None
    trust: str | None = None
    pfc_enabled: list[int] = field(default_factory=list)
    pfc_seen: bool = False
    dscp2prio: dict[int, int] = field(default_factory=dict)
    ets: list[dict[str, Any]] = field(default_factory=list)
    lossless: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "mlnx_qos", "findings": [f.to_dict() for f in self.findings],
                "dcbx": self.dcbx, "trust": self.trust,
                "pfc_enabled": self.pfc_enabled if self.pfc_seen else None,
                "dscp2prio": {str(k): v for k, v in sorted(self.dscp2prio.items())},
                "ets": self.ets, "lossless": self.lossless}


class MlnxQosParser:
    def __init__(self) -> None:
        self.r = MlnxQosReport()
        self.signals = 0
        self._prio_line: list[int] | None = None
        self._tc: dict[str, Any] | None = None

    def feed(self, line: str) -> None:
        s = clean(line).strip()
        if not s:
            return
        r = self.r
        low = s.lower()
        if low.startswith("dcbx mode:"):
            r.dcbx = s.split(":", 1)[1].strip()
        elif low.startswith(("priority trust state:", "priority trust mode:", "trust state:")):
            r.trust = s.split(":", 1)[1].strip().lower()
        elif low.startswith("dscp2prio mapping") or low.startswith("pfc configuration"):
            pass
        elif m := _PRIO.match(s):
            for d in re.findall(r"\d+", m.group(2)):
                r.dscp2prio[int(d)] = int(m.group(1))
        elif re.match(r"^priority(\s+\d){8}\s*$", s):
            self._prio_line = [int(x) for x in s.split()[1:]]
        elif re.match(r"^enabled(\s+[01]){8}\s*$", s):
            flags = [int(x) for x in s.split()[1:]]
            prios = self._prio_line or list(range(8))
            r.pfc_enabled = [p for p, on in zip(prios, flags, strict=True) if on]
            r.pfc_seen = True
        elif m := _TC.match(s):
            self._tc = {"tc": int(m.group(1)), "ratelimit": m.group(2).strip(),
                        "tsa": m.group(3), "bw_percent": int(m.group(4)) if m.group(4) else None,
                        "priorities": []}
            r.ets.append(self._tc)
        elif low.startswith("priority:") and self._tc is not None:
            self._tc["priorities"] += [int(x) for x in re.findall(r"\d+", s.split(":", 1)[1])]
        else:
            return
        self.signals += 1

    def finish(self, ib_tc: int | None = None) -> MlnxQosReport:
        r = self.r
        f = r.findings
        if r.trust == "pcp":
            f.append(Finding("warning", "trust mode is pcp: untagged RoCE traffic is not "
                             "classified by its DSCP",
                             "For routed RoCE without VLANs: mlnx_qos -i IFACE --trust dscp."))
        if r.pfc_seen and not r.pfc_enabled:
            f.append(Finding("warning", "PFC is enabled on no priority: RoCE runs lossy",
                             "Enable PFC on the RoCE priority (e.g. mlnx_qos -i IFACE --pfc "
                             "0,0,0,1,0,0,0,0) and on the switch ports, or rely on ECN only "
                             "knowingly."))
        elif r.pfc_seen:
            f.append(Finding("info", "PFC enabled on priorities "
                             + ",".join(map(str, r.pfc_enabled)), None))
        tc = ib_tc if ib_tc is not None else 0
        dscp = tc >> 2
        check: dict[str, Any] = {"nccl_ib_tc": tc, "assumed_default": ib_tc is None,
                                 "dscp": dscp, "priority": None, "ready": None}
        if r.trust not in (None, "dscp"):
            check["why"] = f"trust is {r.trust}, so the DSCP does not choose the priority"
            check["ready"] = False
        elif not r.pfc_seen:
            check["why"] = "the text shows no PFC configuration"
        elif not r.dscp2prio:
            check["why"] = "the text shows no dscp2prio map"
        else:
            prio = r.dscp2prio.get(dscp)
            check["priority"] = prio
            check["ready"] = prio is not None and prio in r.pfc_enabled
            check["why"] = (f"DSCP {dscp} maps to priority {prio}, PFC "
                            f"{'on' if check['ready'] else 'off'} there")
        r.lossless = check
        label = f"NCCL_IB_TC={tc}" + (" (NCCL's default)" if ib_tc is None else "")
        if check["ready"] is True:
            f.append(Finding("info", f"{label} is lossless-ready: {check['why']}", None))
        elif check["ready"] is False:
            good = sorted(d for d, p in r.dscp2prio.items() if p in r.pfc_enabled)
            hint = ("Choose NCCL_IB_TC = DSCP*4 (+2 for ECN-capable) with a DSCP on a PFC "
                    f"priority, e.g. DSCP {26 if 26 in good else (good[0] if good else 26)}"
                    f" -> NCCL_IB_TC={(26 if 26 in good else (good[0] if good else 26)) * 4 + 2}"
                    if good else "Enable PFC on the priority the DSCP maps to.")
            f.append(Finding("error" if ib_tc is not None else "warning",
                             f"{label} is not lossless: {check['why']}", hint))
        else:
            f.append(Finding("info", f"cannot tell whether {label} is lossless: "
                             f"{check.get('why')}", None))
        return r


def parse_mlnx_qos(lines: Iterable[str], ib_tc: int | None = None) -> MlnxQosReport:
    p = MlnxQosParser()
    for line in lines:
        p.feed(line)
    return p.finish(ib_tc)
