"""Base for the port-listing parsers (ibstat, ibv_devinfo, ibstatus, rdma link, ibdev2netdev)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding, Port, VerbsWarnings, clean, port_findings

_MAX_PORTS = 4096


@dataclass
class PortReport:
    kind: str
    ports: list[Port] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind,
                             "findings": [f.to_dict() for f in self.findings],
                             "ports": [p.to_dict() for p in self.ports]}
        d.update(self.extra)
        return d


class PortListParser:
    kind = "ports"

    def __init__(self) -> None:
        self.ports: list[Port] = []
        self.signals = 0
        self.verbs = VerbsWarnings()

    def new_port(self, device: str | None, port: int | None) -> Port | None:
        if len(self.ports) >= _MAX_PORTS:
            return None
        p = Port(device=device, port=port)
        self.ports.append(p)
        return p

    def feed(self, line: str) -> None:
        s = clean(line)
        if "libibverbs: Warning" in s and self.verbs.feed(s):
            return
        if s.strip():
            self.line(s)

    def line(self, s: str) -> None:  # pragma: no cover - each format overrides it
        raise NotImplementedError

    def finish(self) -> PortReport:
        ports = [p for p in self.ports if p.device or p.state or p.link_layer]
        r = PortReport(kind=self.kind, ports=ports)
        r.findings = port_findings(ports) + self.more_findings(ports) + self.verbs.findings()
        if not ports:
            r.findings.append(Finding("warning", "no port found in the text", None))
        return r

    def more_findings(self, ports: list[Port]) -> list[Finding]:
        return []
