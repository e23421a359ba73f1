"""`ibstat` output: CA 'mlx5_0' / Port 1: / State, Physical state, Rate, Base lid, Link layer."""

from __future__ import annotations

import re

from rdmaprov.parsers._common import (
    Port,
    norm_link_layer,
    norm_phys,
    norm_state,
    parse_rate,
    to_int,
)
from rdmaprov.parsers._ports import PortListParser

_CA = re.compile(r"^\s*CA '([^']+)'")
_PORT = re.compile(r"^\s*Port (\d+):\s*$")
_KV = re.compile(r"^\s*([A-Za-z ]+?):\s*(.*)$")


class IbstatParser(PortListParser):
    kind = "ibstat"

    def __init__(self) -> None:
        super().__init__()
        self.device: str | None = None
        self.port: Port | None = None

    def line(self, s: str) -> None:
        m = _CA.match(s)
        if m:
            self.device, self.port = m.group(1), None
            self.signals += 1
            return
        m = _PORT.match(s)
        if m:
            self.port = self.new_port(self.device, int(m.group(1)))
            self.signals += 1
            return
        m = _KV.match(s)
        if not m or self.port is None:
            return
        key, val = m.group(1).strip().lower(), m.group(2).strip()
        p = self.port
        if key == "state":
            p.state = norm_state(val)
        elif key == "physical state":
            p.phys_state = norm_phys(val)
        elif key == "rate":
            p.rate_gbps = parse_rate(val)
            p.extra["rate_string"] = val
        elif key == "base lid":
            p.lid = to_int(val)
        elif key == "link layer":
            p.link_layer = norm_link_layer(val)
            if p.link_layer == "Ethernet":
                p.lid = None
        else:
            return
        self.signals += 1
