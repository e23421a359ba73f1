"""`show_gids` (MLNX_OFED): DEV PORT INDEX GID [IPv4] VER DEV. Picks, per device:port, the
RoCE v2 IPv4-mapped GID index: the value NCCL_IB_GID_INDEX needs on RoCE."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding, clean

_GID = re.compile(r"^[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}$")
_V4MAP = "0000:0000:0000:0000:0000:ffff:"
_ENV = re.compile(r"NCCL_IB_GID_INDEX\s*[=\s]\s*(\d+)")
_COUNT = re.compile(r"n_gids_found=(\d+)")


@dataclass
class ShowGidsReport:
    gids: list[dict[str, Any]] = field(default_factory=list)
    gid_index: dict[str, int] = field(default_factory=dict)
    n_gids_found: int | None = None
    nccl_ib_gid_index_in_text: int | None = None
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "show_gids", "findings": [f.to_dict() for f in self.findings],
                "gid_index": self.gid_index, "gids": self.gids,
                "n_gids_found": self.n_gids_found,
                "nccl_ib_gid_index_in_text": self.nccl_ib_gid_index_in_text}


class ShowGidsParser:
    def __init__(self) -> None:
        self.gids: list[dict[str, Any]] = []
        self.n_found: int | None = None
        self.env_index: int | None = None
        self.signals = 0

    def feed(self, line: str) -> None:
        s = clean(line).strip()
        if not s:
            return
        if "NCCL_IB_GID_INDEX" in s:
            m = _ENV.search(s)
            if m:
                self.env_index = int(m.group(1))
            return
        if s.startswith("DEV") and "GID" in s:
            self.signals += 1
            return
        m = _COUNT.search(s)
        if m:
            self.n_found = int(m.group(1))
            self.signals += 1
            return
        tok = s.split()
        if len(tok) not in (6, 7) or not tok[1].isdecimal() or not tok[2].isdecimal() \
                or not _GID.match(tok[3]) or tok[-2] not in ("v1", "v2"):
            return
        if len(self.gids) >= 8192:
            return
        self.gids.append({"device": tok[0], "port": int(tok[1]), "index": int(tok[2]),
                          "gid": tok[3].lower(), "ipv4": tok[4] if len(tok) == 7 else None,
                          "version": tok[-2], "netdev": tok[-1]})
        self.signals += 1

    def finish(self) -> ShowGidsReport:
        r = ShowGidsReport(gids=self.gids, n_gids_found=self.n_found,
                           nccl_ib_gid_index_in_text=self.env_index)
        f = r.findings
        ports: dict[str, list[dict[str, Any]]] = {}
        for g in self.gids:
            ports.setdefault(f"{g['device']}:{g['port']}", []).append(g)
        for key, gs in ports.items():
            cands = [g for g in gs if g["version"] == "v2" and g["gid"].startswith(_V4MAP)]
            if not cands:
                f.append(Finding(
                    "warning", f"{key} has no RoCE v2 IPv4 GID",
                    f"Give its netdev ({gs[0]['netdev']}) an IPv4 address, or use an IPv6 GID "
                    "(NCCL_IB_ADDR_FAMILY=AF_INET6 with a v2 global GID)."))
                continue
            r.gid_index[key] = cands[0]["index"]
            if len({c["netdev"] for c in cands}) > 1:
                f.append(Finding(
                    "warning", f"{key} has RoCE v2 IPv4 GIDs on several netdevs: "
                    + ", ".join(f"{c['index']} ({c['netdev']} {c['ipv4'] or ''})".replace(" )", ")")
                                for c in cands),
                    "Pick the index whose netdev carries the RDMA traffic; an overlay "
                    "(vxlan) GID usually is not it."))
        values = set(r.gid_index.values())
        if len(values) > 1:
            f.append(Finding(
                "warning", "devices disagree on the RoCE v2 IPv4 GID index: "
                + ", ".join(f"{k}={v}" for k, v in sorted(r.gid_index.items())),
                "NCCL_IB_GID_INDEX is one value for all devices: make the GID tables agree "
                "(same address setup on every netdev) or let NCCL pick per device "
                "(NCCL >= 2.21 selects by NCCL_IB_ROCE_VERSION_NUM/NCCL_IB_ADDR_FAMILY when "
                "NCCL_IB_GID_INDEX is unset)."))
        elif len(values) == 1:
            only = next(iter(values))
            f.append(Finding("info", f"RoCE v2 IPv4 GID index: {only}",
                             f"NCCL_IB_GID_INDEX={only}"))
        if self.n_found == 0 or (self.n_found is None and not self.gids):
            f.append(Finding(
                "error", "no GIDs found",
                "No RDMA device has an address here: in a container, the RDMA device's netdev "
                "must be in the container's network namespace (host network, or the SR-IOV/"
                "macvlan CNI) and carry an IP address."))
        if self.env_index is not None and self.gids:
            hit = [g for g in self.gids if g["index"] == self.env_index]
            if hit and not any(g["version"] == "v2" and g["gid"].startswith(_V4MAP) for g in hit):
                g = hit[0]
                f.append(Finding(
                    "error", f"NCCL_IB_GID_INDEX={self.env_index} in the text points to a "
                    f"{g['version']} {'IPv4' if g['ipv4'] else 'link-local/IPv6'} GID",
                    "Set NCCL_IB_GID_INDEX to the RoCE v2 IPv4 index"
                    + (f" ({next(iter(values))})" if len(values) == 1 else "")
                    + "."))
        return r
