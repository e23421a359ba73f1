"""`ibdev2netdev`: mlx5_0 port 1 ==> ibp26s0 (Down). The Up/Down is the netdev's state, not
the RDMA port's, so it is reported as netdev_state and the port state stays unknown.

`ibdev2netdev -v` adds the PCI address, the part and board, the firmware and the RDMA port's
own state: 0000:02:00.0 mlx5_0 (MT4115 - MT1523X04353) CX456A - ConnectX-4 QSFP fw 12.23.1020
port 1 (ACTIVE) ==> enp2s0f0 (Up), and on Lustre hosts a trailing (o2ib); mlx4 rows have no
PCI address."""

from __future__ import annotations

import re

from rdmaprov.parsers._common import Finding, Port
from rdmaprov.parsers._ports import PortListParser, PortReport

_ROW = re.compile(r"^\s*(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)\s+\((Up|Down)\)", re.I)
_ROW_V = re.compile(r"^\s*(?:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)\s+)?(\S+)\s+\("
                    r".*?\bfw\s+(\S+)\s+port\s+(\d+)\s+\((\w+)\s*\)\s+==>\s+(\S+)\s+\((Up|Down)\)",
                    re.I)


class Ibdev2netdevParser(PortListParser):
    kind = "ibdev2netdev"

    def line(self, s: str) -> None:
        v = _ROW_V.match(s)
        if v:
            p = self.new_port(v.group(2), int(v.group(4)))
            if p is None:
                return
            self.signals += 1
            p.state, p.netdev = v.group(5).upper(), v.group(6)
            p.extra["netdev_state"] = v.group(7).capitalize()
            p.extra["firmware"] = v.group(3)
            if v.group(1):
                p.extra["pci"] = v.group(1)
            return
        m = _ROW.match(s)
        if not m:
            return
        p = self.new_port(m.group(1), int(m.group(2)))
        if p is None:
            return
        self.signals += 1
        p.netdev = m.group(3)
        p.extra["netdev_state"] = m.group(4).capitalize()

    def finish(self) -> PortReport:
        return super().finish()

    def more_findings(self, ports: list[Port]) -> list[Finding]:
        out = []
        eth_down = [p for p in ports if p.extra.get("netdev_state") == "Down"
                    and p.netdev and not p.netdev.startswith("ib")]
        ib_down = [p for p in ports if p.extra.get("netdev_state") == "Down"
                   and p.netdev and p.netdev.startswith("ib")]
        if eth_down:
            out.append(Finding(
                "warning", "Ethernet netdev down: " + ", ".join(
                    f"{p.device}->{p.netdev}" for p in eth_down),
                "On RoCE the RDMA port is only usable when its netdev is up (ip link set "
                "DEV up; check the cable/switch port)."))
        if ib_down:
            out.append(Finding(
                "info", f"{len(ib_down)} IPoIB interface(s) down: "
                + ", ".join(p.netdev or "" for p in ib_down[:8]),
                "For an IPoIB netdev, Down says nothing about the InfiniBand port itself: "
                "check ibstat (State/Physical state) before concluding the port is down."))
        return out
