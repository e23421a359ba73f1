"""`ibstatus`: Infiniband device 'mlx5_0' port 1 status: / state: 4: ACTIVE /
rate: 100 Gb/sec (4X EDR)."""

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
from rdmaprov.parsers._ports import PortListParser, PortReport

_HEAD = re.compile(r"^\s*Infiniband device '([^']+)' port (\d+) status:")
_KV = re.compile(r"^\s*([a-z_ ]+?):\s*(.*)$")


class IbstatusParser(PortListParser):
    kind = "ibstatus"

    def __init__(self) -> None:
        super().__init__()
        self.port: Port | None = None

    def line(self, s: str) -> None:
        m = _HEAD.match(s)
        if m:
            self.port = self.new_port(m.group(1), int(m.group(2)))
            self.signals += 1
            return
        m = _KV.match(s)
        if not m or self.port is None:
            return
        key, val, p = m.group(1).strip(), m.group(2).strip(), self.port
        if key == "state":
            p.state = norm_state(val)
        elif key == "phys state":
            p.phys_state = norm_phys(val)
        elif key == "rate":
            p.rate_gbps = parse_rate(val)
            p.extra["rate_string"] = val
        elif key == "base lid":
            p.lid = to_int(val)
        elif key == "link_layer":
            p.link_layer = norm_link_layer(val)
        else:
            return
        self.signals += 1

    def finish(self) -> PortReport:
        for p in self.ports:
            if p.link_layer == "Ethernet":
                p.lid = None
        return super().finish()
