"""Kernel logs (dmesg, dmesg -T, journalctl -k, grep'd lines): mlx5 health and command errors,
PCIe width/power and AER errors, probe failures, cable events and port up/down.

The causes are the ``kernel`` rules of rdmaprov.parsers.rules (one table, shared with
``check``); this module adds what needs state across lines: link flaps per interface and the
firmware versions the driver printed. Lines as the kernel prints them (drivers/net/ethernet/
mellanox/mlx5/core, drivers/pci):
  mlx5_core 0000:3b:00.0: firmware version: 28.39.1002
  mlx5_core 0000:3b:00.0 ens1f0np0: Link down
  mlx5_core 0000:0d:00.0: poll_health:801:(pid 0): device's health compromised - reached miss count
  mlx5_core 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 link
      at 0000:3a:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers import rules
from rdmaprov.parsers._common import Finding, clean

# "mlx5_core 0000:01:00.1 eth1: Link up", "lan: Link is Down", "eth0: igb: eth0 NIC Link is Down"
_LINK = re.compile(r"(?:^|\s)([\w.@-]+): (?:[\w-]+: [\w.@-]+ )?(?:NIC )?[Ll]ink (?:is )?"
                   r"([Uu]p|[Dd]own)\b")
# bonding: "bond0: link status definitely down for interface eno50, disabling it"
_BOND_DOWN = re.compile(r"link status definitely (?=(?:down|up) for interface ([\w.@-]+))"
                        r"(down|up)")
_FW = re.compile(r"(mlx5_core|mlx4_core|bnxt_en|ice|irdma) ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}"
                 r"\.\d)(?: [\w.-]+)?: (?:firmware version|FW version)[: ]+(\S+)", re.I)
_DEV = re.compile(r"(mlx5_core|mlx4_core|bnxt_en|irdma) ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)"
                  r"(?: ([\w.@-]+))?:")
_MAX = 1024
# Where a line says which host and second it is from: syslog/journalctl ("Mar 27 15:37:34 cc1
# kernel: "), journalctl -o short-iso and rsyslog ("2025-03-27T15:37:34+0000 cc1 kernel: ").
_SYSLOG_HOST = re.compile(r"^\s*([A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[T ]\d\d:"
                          r"\d\d:\d\d)\S*\s+([\w.-]+)\s+kernel:")


@dataclass
class KernelLogReport:
    lines: int = 0
    devices: list[dict[str, Any]] = field(default_factory=list)
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    diagnoses: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "kernel_log", "findings": [f.to_dict() for f in self.findings],
                "lines": self.lines, "devices": self.devices, "links": self.links,
                "diagnoses": self.diagnoses}


class KernelLogParser:
    def __init__(self) -> None:
        self.lines = 0
        self.diag = rules.Diagnoser("kernel")
        self.devices: dict[str, dict[str, Any]] = {}
        self.links: dict[str, dict[str, Any]] = {}
        self.host_links: dict[str, dict[str, Any]] = {}  # "host iface" -> counts
        self.downs: dict[str, dict[str, set[str]]] = {}  # second -> host -> ifaces down
        self.hosts: set[str] = set()

    def feed(self, raw: str) -> None:
        self.lines += 1
        h = _SYSLOG_HOST.match(raw) if "kernel:" in raw else None
        line = clean(raw)
        if not line.strip():
            return
        m = _DEV.search(line)
        if m and len(self.devices) < _MAX:
            d = self.devices.setdefault(m.group(2), {"driver": m.group(1)})
            if m.group(3) and "netdev" not in d and not m.group(3).endswith(":"):
                d["netdev"] = m.group(3)
        m = _FW.search(line)
        if m and m.group(2) in self.devices:
            self.devices[m.group(2)]["firmware"] = m.group(3).rstrip(",")
        m = _LINK.search(line) or _BOND_DOWN.search(line)
        if m and len(self.links) < _MAX:
            name = m.group(1)
            up = m.group(2).lower() == "up"
            s = self.links.setdefault(name, {"down": 0, "up": 0, "last": None})
            s["up" if up else "down"] += 1
            s["last"] = "up" if up else "down"
            if h and len(self.host_links) < _MAX:
                host = h.group(2)
                self.hosts.add(host)
                hs = self.host_links.setdefault(f"{host} {name}",
                                                {"down": 0, "up": 0, "last": None})
                hs["up" if up else "down"] += 1
                hs["last"] = "up" if up else "down"
                if not up and len(self.downs) < _MAX:
                    sec = " ".join(h.group(1).replace("T", " ").split())
                    self.downs.setdefault(sec, {}).setdefault(host, set()).add(name)
        self.diag.feed(line)

    def finish(self) -> KernelLogReport:
        r = KernelLogReport(lines=self.lines, links=self.links,
                            devices=[{"pci": k, **v} for k, v in sorted(self.devices.items())])
        found = self.diag.result()
        r.diagnoses = [d.to_dict() for d in found]
        f = r.findings
        f.extend(d.finding() for d in found)
        # Several hosts: each host's ports are its own (one iface name on three hosts is three
        # links), and downs of several hosts in one second point at the part they share.
        links = self.links
        if len(self.hosts) > 1:
            links = r.links = self.host_links
        shared: set[str] = set()
        for sec, by_host in sorted(self.downs.items()):
            if len(by_host) < 2:
                continue
            hosts = sorted(by_host)
            names = sorted({f"{hh} {i}" for hh in hosts for i in by_host[hh]})
            shared.update(names)
            f.append(Finding(
                "error", f"links went down on {len(hosts)} hosts in the same second ({sec}): "
                + ", ".join(names[:16]) + (" ..." if len(names) > 16 else "")
                + ": the part they share failed or restarted (a switch reboot or power loss, "
                "on InfiniBand the subnet manager), not each host's cable",
                "Read the switch's log and uptime for that second (on the switch: show log, "
                "show version); on InfiniBand `sminfo` and the SM's log. Do not replace the "
                "hosts' cables or NICs for this; only a link still down or flapping after the "
                "switch is back is a cable.", "link_down_shared", "investigate"))
        for name, s in sorted(links.items()):
            if name in shared and s["last"] == "up" and max(s["down"], s["up"] - 1) <= 1:
                continue  # went down with the others and came back: the shared event above
            # A "Link up" after another one means the link went down in between, logged or not.
            drops = max(s["down"], s["up"] - 1)
            if drops >= 2:
                f.append(Finding(
                    "error", f"{name}: the link went down {drops} times (it flaps); last "
                    f"state {s['last']}",
                    "A flapping link is a cable, transceiver or switch-port fault: reseat or "
                    "replace the cable/optic, read the switch port's error counters, and "
                    "check the NIC's own counters (ethtool -S: link_down_events_phy, "
                    "rx_symbol_err_phy).", "link_flap", "reset-link"))
            elif s["down"] == 1 and s["last"] == "down":
                f.append(Finding(
                    "warning", f"{name}: the link went down and did not come back in this log",
                    "Check the cable and the switch port (ethtool IFACE, ibstat); if NCCL used "
                    "this port, its jobs failed with it.", "link_down", "reset-link"))
            elif s["down"] == 1 and s["up"]:
                f.append(Finding(
                    "warning", f"{name}: the link went down once and came back",
                    "One drop can be a reboot of the switch or a re-plug; if it recurs it is "
                    "a flapping link.", "link_down", "reset-link"))
        fws = {d["firmware"] for d in self.devices.values() if d.get("firmware")}
        if len(fws) > 1:
            f.append(Finding(
                "warning", "the adapters run different firmware versions: "
                + ", ".join(sorted(fws)),
                "Hosts and ports of one fabric should run the same firmware: update them "
                "together (mlxfwmanager).", "firmware_mixed", "firmware"))
        if not f:
            f.append(Finding("info", f"no RDMA/PCIe errors among {self.lines} kernel log "
                             "lines", None))
        return r
