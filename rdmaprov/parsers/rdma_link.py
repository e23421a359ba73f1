"""`rdma link show` (iproute2): link mlx5_0/1 [subnet_prefix .. lid N sm_lid ..] state ACTIVE
physical_state LINK_UP [netdev ens1f0]. IB ports carry subnet_prefix/lid; RoCE ports do not."""

from __future__ import annotations

import re

from rdmaprov.parsers._common import norm_phys, norm_state, to_int
from rdmaprov.parsers._ports import PortListParser

_LINK = re.compile(r"^\s*(?:\d+/\d+:\s*)?link\s+([^\s/]+)/(\d+)\s+(.*)$")


class RdmaLinkParser(PortListParser):
    kind = "rdma_link"

    def line(self, s: str) -> None:
        m = _LINK.match(s)
        if not m:
            return
        p = self.new_port(m.group(1), int(m.group(2)))
        if p is None:
            return
        self.signals += 1
        tok = m.group(3).split()
        kv = {tok[i]: tok[i + 1] for i in range(0, len(tok) - 1)}
        p.state = norm_state(kv.get("state"))
        p.phys_state = norm_phys(kv.get("physical_state"))
        p.netdev = kv.get("netdev")
        if "subnet_prefix" in kv or "lid" in kv:
            p.link_layer, p.lid = "InfiniBand", to_int(kv.get("lid"))
        elif p.netdev:
            p.link_layer = "Ethernet"
