"""`ibv_devinfo` and `ibv_devinfo -v`: hca_id blocks, port: N, state, MTUs, LID, link layer,
and with -v the physical state, width x speed and GID table."""

from __future__ import annotations

import re

from rdmaprov.parsers._common import (
    Finding,
    Port,
    norm_link_layer,
    norm_phys,
    norm_state,
    parse_rate,
    to_int,
)
from rdmaprov.parsers._ports import PortListParser, PortReport

_HCA = re.compile(r"^\s*hca_id:\s*(\S+)")
_PORT = re.compile(r"^\s*port:\s*(\d+)\s*$")
_KV = re.compile(r"^\s*(\w+):\s*(.*)$")
_GID = re.compile(r"^\s*GID\[\s*(\d+)\]:\s*([0-9a-fA-F:]+)(?:,\s*(.*))?")
_VERBOSE_KEYS = {"max_qp", "device_cap_flags", "max_mr_size", "max_msg_sz", "gid_tbl_len"}


class IbvDevinfoParser(PortListParser):
    kind = "ibv_devinfo"

    def __init__(self) -> None:
        super().__init__()
        self.device: str | None = None
        self.port: Port | None = None
        self.verbose = False
        self._width: dict[int, float] = {}

    def line(self, s: str) -> None:
        m = _HCA.match(s)
        if m:
            self.device, self.port = m.group(1), None
            self.signals += 1
            return
        m = _PORT.match(s)
        if m:
            self.port = self.new_port(self.device, int(m.group(1)))
            self.signals += 1
            return
        m = _GID.match(s)
        if m:
            p = self._cur()
            if p is not None:
                gids = p.extra.setdefault("gids", [])
                if len(gids) < 256:
                    gids.append({"index": int(m.group(1)), "gid": m.group(2),
                                 "type": (m.group(3) or "").strip() or None})
            self.verbose = True
            return
        m = _KV.match(s)
        if not m:
            return
        key, val = m.group(1).lower(), m.group(2).strip()
        if key in _VERBOSE_KEYS:
            self.verbose = True
        if key in ("state", "active_mtu", "port_lid", "link_layer", "phys_state",
                   "active_width", "active_speed", "max_mtu", "sm_lid"):
            p = self._cur()
            if p is None:
                return
            self.signals += 1
            if key == "state":
                p.state = norm_state(val)
            elif key == "active_mtu":
                p.active_mtu = to_int(val.split()[0]) if val else None
            elif key == "port_lid":
                p.lid = to_int(val)
            elif key == "link_layer":
                p.link_layer = norm_link_layer(val)
            elif key == "phys_state":
                p.phys_state = norm_phys(val)
                self.verbose = True
            elif key == "active_width":
                w = re.match(r"(\d+)X", val)
                if w:
                    p.extra["_width"] = int(w.group(1))
            elif key == "active_speed":
                p.extra["_speed"] = parse_rate(val)

    def _cur(self) -> Port | None:
        # A paste may start inside a port block, before any "hca_id:"/"port:" line.
        if self.port is None:
            self.port = self.new_port(self.device, None)
        return self.port

    def finish(self) -> PortReport:
        for p in self.ports:
            w, sp = p.extra.pop("_width", None), p.extra.pop("_speed", None)
            if w and sp:
                p.rate_gbps = w * sp
            if p.link_layer == "Ethernet":
                p.lid = None
        r = super().finish()
        r.extra["verbose"] = self.verbose
        return r

    def more_findings(self, ports: list[Port]) -> list[Finding]:
        out = []
        for p in ports:
            gids = p.extra.get("gids") or []
            v4 = [g for g in gids if g["gid"].lower().startswith("0000:0000:0000:0000:0000:ffff:")]
            if p.link_layer == "Ethernet" and v4:
                typed = [g for g in v4 if g["type"] and "v2" in g["type"]]
                idx = (typed or v4)[0]["index"]
                out.append(Finding(
                    "info", f"{p.device or '?'} port {p.port or '?'}: IPv4-mapped GID at index "
                    + ", ".join(str(g["index"]) for g in v4)
                    + ("" if typed
                       else " (the GID type is not shown: check show_gids for RoCE v2)"),
                    f"NCCL_IB_GID_INDEX={idx}" if typed else None))
        return out
