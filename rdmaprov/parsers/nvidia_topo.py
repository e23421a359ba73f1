"""`nvidia-smi topo -m`: the GPU/NIC matrix (X, NV#, PIX, PXB, PHB, NODE, SYS, old SOC), CPU and
NUMA affinity, and the "NIC Legend" (NIC0: mlx5_0). Older drivers name the NIC columns by
device (mlx5_0) instead of NICn.

Each GPU's nearest NIC decides GPUDirect RDMA: NCCL uses it by default only up to PXB
(NCCL_NET_GDR_LEVEL); a GPU whose nearest NIC is SYS away crosses the CPU interconnect
between sockets for every network transfer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding, clean

# Closest first; "SOC" is the name drivers before 396 gave to SYS.
_ORDER = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6, "SOC": 6}
_CELL = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_MAX = 512


def _rank(cell: str) -> int:
    return _ORDER.get("NV" if cell.startswith("NV") else cell, 9)


@dataclass
class TopoReport:
    gpus: list[dict[str, Any]] = field(default_factory=list)
    nics: list[dict[str, Any]] = field(default_factory=list)
    matrix: dict[str, dict[str, str]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "nvidia_topo", "findings": [f.to_dict() for f in self.findings],
                "gpus": self.gpus, "nics": self.nics, "matrix": self.matrix}


class TopoParser:
    def __init__(self) -> None:
        self.cols: list[str] = []
        self.rows: dict[str, tuple[list[str], list[str]]] = {}
        self.legend: dict[str, str] = {}

    def feed(self, raw: str) -> None:
        line = clean(raw).replace("\t", "  ")
        s = line.strip()
        if not s:
            return
        m = _LEGEND.match(s)
        if m:
            self.legend[m.group(1)] = m.group(2)
            return
        tok = s.split()
        if not self.cols:
            if tok and tok[0] == "GPU0":
                # Header: device names up to "CPU Affinity" (or the end).
                cols: list[str] = []
                for t in tok:
                    if t in ("CPU", "NUMA", "GPU") and cols and t != "GPU0":
                        break
                    cols.append(t)
                self.cols = cols
            return
        if tok and tok[0] in self.cols and len(self.rows) < _MAX:
            n = len(self.cols)
            cells = tok[1:1 + n]
            if len(cells) == n and all(_CELL.match(c) for c in cells):
                self.rows[tok[0]] = (cells, tok[1 + n:])

    def finish(self) -> TopoReport:
        r = TopoReport()
        names = self.cols
        nic_cols = [c for c in names if not c.startswith("GPU")]
        for dev, (cells, _rest) in self.rows.items():
            r.matrix[dev] = dict(zip(names, cells, strict=True))
        for c in nic_cols:
            r.nics.append({"name": c, "device": self.legend.get(c, c)})
        for dev, (_cells, rest) in self.rows.items():
            if not dev.startswith("GPU"):
                continue
            g: dict[str, Any] = {"name": dev, "cpu_affinity": rest[0] if rest else None,
                                 "numa_affinity": rest[1] if len(rest) > 1 else None}
            links = {c: r.matrix[dev][c] for c in nic_cols}
            if links:
                best = min(links.values(), key=_rank)
                near = sorted(c for c, v in links.items() if v == best)
                g["nearest_nic"] = [self.legend.get(c, c) for c in near]
                g["nic_path"] = best
            r.gpus.append(g)
        f = r.findings
        far = [g for g in r.gpus if g.get("nic_path") in ("SYS", "SOC")]
        mid = [g for g in r.gpus if g.get("nic_path") in ("PHB", "NODE")]
        if far:
            f.append(Finding(
                "warning", "GPU(s) whose nearest NIC is SYS away (across the CPU "
                "interconnect between NUMA nodes): " + ", ".join(g["name"] for g in far),
                "Network traffic of these GPUs crosses sockets and NCCL keeps GPUDirect RDMA "
                "off for them (NCCL_NET_GDR_LEVEL): put a NIC on each GPU's PCIe switch or "
                "NUMA node, or pin those ranks to the NIC on their socket (NCCL_IB_HCA per "
                "rank, NCCL_CROSS_NIC). Check BIOS NUMA settings if the layout looks wrong.",
                "topo_nic_far", "investigate"))
        if mid:
            f.append(Finding(
                "info", "GPU(s) whose nearest NIC is behind the CPU's host bridge (PHB/NODE): "
                + ", ".join(f"{g['name']} ({g['nic_path']})" for g in mid),
                "NCCL enables GPUDirect RDMA by default only up to PXB; beyond it transfers "
                "go through host memory unless NCCL_NET_GDR_LEVEL allows the path.",
                "topo_nic_host_bridge"))
        if r.gpus and not nic_cols:
            f.append(Finding("info", "no NIC in the matrix (nvidia-smi lists NICs the driver "
                             "sees on PCIe; none here)", None))
        if not r.gpus:
            f.append(Finding("warning", "no GPU rows could be read from this matrix", None))
        for g in r.gpus:
            if g.get("nic_path") and g["nic_path"] not in ("SYS", "SOC", "PHB", "NODE"):
                f.append(Finding("info", f"{g['name']}: nearest NIC "
                                 f"{', '.join(g['nearest_nic'])} ({g['nic_path']})", None))
        return r
