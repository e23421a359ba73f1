"""Which NICs a host's NCCL log shows and which physical ports they are: what its line rate counts.

NCCL lists every device it may use (``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ...``) but
a rank's channels run on the few nearest its GPU: ``Channel 00/0 : 0[0] -> 1[0] [send] via
NET/IB/1/GDRDMA`` (``NET/IB/1(8)/GDRDMA`` when rank 8's proxy carries it: PXN, the same host's
NIC 1). With one GPU per host and eight NICs, the sum over the ``Using`` list is eight times the
rate the run could reach. From NCCL 2.19 the index is a *virtual* device's
(``NET/IB : Made virtual device [0] name=mlx5_0+mlx5_1 speed=400000 ndevs=2``, NCCL_IB_MERGE_NICS):
a merged device stands for each NIC in its name. When the ``Using`` line is not in the host's
log (a launcher folded it into another host's output), the channels still say how many of the
host's NICs carried the run: ``read_log`` counts their distinct indices.

One NIC per physical port (``port_keys``): SR-IOV virtual functions, and the PCIe functions of a
Socket Direct / multi-host card that reach one port over two PCIe links (DGX Spark:
``rocep1s0f1`` at 0000:01:00.1 and ``roceP2p1s0f1`` at 0002:01:00.1, one 200 Gb/s cage), are
RDMA devices of their own on one wire; the wire's rate counts once. A port's identity, best
first: the netdev's ``phys_port_id``; the card's ``sys_image_guid`` with the PCI function
number and port (every function of one adapter shares that GUID; a dual-port card's ports are
functions 0 and 1); the SR-IOV parent (``physfn``); else the PCI bus layout: the same
bus:device.function in two PCI domains, each domain holding the card's several functions
(GB200's four single-function rails at 0000:03:00.0, 0002:03:00.0, ... stay four). Without any
of these a port is its own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_USING = re.compile(r"\[(\d+)\]\s*([^\s:\[\]]+):(\d+)/(IB|RoCE)")
_VDEV = re.compile(r"Made virtual device \[(\d+)\] name=(\S+)(?: speed=(\d+))?(?: ndevs=(\d+))?")
_VIA = re.compile(r"\bvia NET/([^/\n]+)/(\d+)")
# NCCL 2.27+ (net_ib.cc, NCCL_DEBUG_SUBSYS with NET): "NET/IB: [1] rocep1s0f1:uverbs1:1/RoCE
# provider=Mlx5 speed=200000 context=0x.. pciPath=/sys/devices/... ar=0" (speed in Mb/s).
_SPEED = re.compile(r"NET/IB: \[\d+\] ([^\s:]+):[^\s:]*:(\d+)/(IB|RoCE) .*?\bspeed=(\d+)")
_VF_NETDEV = re.compile(r"^(.*\d)v\d+$")  # ibp75s0v7 -> ibp75s0
_BDF = re.compile(r"^([0-9a-fA-F]{4,}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
# rdma-core's persistent names (NAME_KERNEL from the PCI path, as systemd names netdevs):
# roceP2p1s0f1 = domain 2, bus 1, slot 0, function 1; "f" only on a multi-function device.
_PCI_NAME = re.compile(r"^(?:roce|ib|iw|en|ib)(?:P(\d+))?p(\d+)s(\d+)(?:f(\d+))?(?:np\d+)?$")


@dataclass
class LogNics:
    """What one host's NCCL log says of its NICs."""

    channels: set[str] | None = None  # device names its channels ran on (channel_devices)
    indices: set[int] = field(default_factory=set)  # the NET/IB/<i> its channels ran on
    # (device, port) -> (link layer, Gb/s) from NCCL's per-device lines (2.27+)
    speeds: dict[tuple[str, int], tuple[str, float]] = field(default_factory=dict)

    def facts(self) -> dict[str, Any] | None:
        """The devices NCCL's own lines list, with their speeds, in the rdma facts shape: the
        ports of a host whose run left no counters file (every one NCCL lists was ACTIVE)."""
        if not self.speeds:
            return None
        devices: dict[str, list[dict[str, Any]]] = {}
        for (dev, port), (layer, gbps) in sorted(self.speeds.items()):
            devices.setdefault(dev, []).append({
                "port": port, "state": "ACTIVE", "rate_gbps": gbps,
                "link_layer": "InfiniBand" if layer == "IB" else "Ethernet"})
        return {"rdma": {"devices": [{"name": n, "ports": p} for n, p in devices.items()]}}


def read_log(lines: Iterable[str]) -> LogNics:
    physical: dict[int, str] = {}
    virtual: dict[int, list[str]] = {}
    used: set[int] = set()
    speeds: dict[tuple[str, int], tuple[str, float]] = {}
    vspeeds: dict[str, float] = {}  # device -> Gb/s from the virtual devices (2.24+)
    listed: dict[str, tuple[int, str]] = {}  # device -> (port, link layer) from the Using line
    for line in lines:
        if "NCCL INFO" not in line and " INFO " not in line:
            continue
        if "speed=" in line and "NET/IB: [" in line:
            m = _SPEED.search(line)
            if m and len(speeds) < 256:
                speeds[(m.group(1), int(m.group(2)))] = (m.group(3), int(m.group(4)) / 1000)
        elif "via NET/" in line:
            m = _VIA.search(line)
            if m and m.group(1).upper().startswith("IB"):
                used.add(int(m.group(2)))
        elif "Made virtual device" in line:
            m = _VDEV.search(line)
            if m:
                members = [n.split(":")[0] for n in m.group(2).split("+") if n]
                virtual[int(m.group(1))] = members
                if m.group(3) and members:  # 2.24+: its speed, the sum of its members'
                    for n in members:
                        vspeeds.setdefault(n, int(m.group(3)) / 1000 / len(members))
        elif "NET/IB" in line and "Using" in line:
            for idx, dev, port, layer in _USING.findall(line):
                physical.setdefault(int(idx), dev)
                listed.setdefault(dev, (int(port), layer))
    known = {dev for dev, _port in speeds}
    for dev, gbps in vspeeds.items():  # 2.24-2.26 print no per-device line: the vdev's speed
        if dev not in known and dev in listed and len(speeds) < 256:
            port, layer = listed[dev]
            speeds[(dev, port)] = (layer, gbps)
    return LogNics(_names(used, physical, virtual), used, speeds)


def _names(used: set[int], physical: dict[int, str],
           virtual: dict[int, list[str]]) -> set[str] | None:
    if not used:
        return None
    names: set[str] = set()
    for i in used:
        if virtual:
            if i not in virtual:
                return None
            names.update(virtual[i])
        elif i in physical:
            names.add(physical[i])
        else:
            return None
    return names or None


def channel_devices(lines: Iterable[str]) -> set[str] | None:
    """The RDMA device names (``mlx5_0``) the channels in this log ran on; None when the log has
    no channel line over an IB network, or names an index that neither NCCL's ``Using`` list
    nor a virtual device explains (then the caller keeps the ``Using`` list)."""
    return read_log(lines).channels


def _bdf(text: Any) -> tuple[int, int, int, int] | None:
    m = _BDF.match(str(text or ""))
    return tuple(int(g, 16) for g in m.groups()) if m else None  # type: ignore[return-value]


def _pci_of_name(name: Any) -> tuple[int, int, int, int] | None:
    """(domain, bus, slot, function) from a persistent name; function -1 when the name has
    none (a single-function device)."""
    m = _PCI_NAME.match(str(name or ""))
    if not m:
        return None
    dom, bus, slot, fn = m.groups()
    return (int(dom or 0), int(bus), int(slot), int(fn) if fn is not None else -1)


def _guid(port: Mapping[str, Any]) -> str | None:
    g = str(port.get("sys_image_guid") or "").strip().lower()
    return g if g and g.strip("0:x") else None


def port_keys(ports: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """One key per port of ``ports`` (one host's, each with ``name`` and ``port``): equal keys
    are one physical port (the module docstring says by what)."""
    layout: list[tuple[int, int, int, int] | None] = []
    named: set[tuple[int, int, int]] = set()  # told multi-function by a persistent name's "f"
    for p in ports:
        base = _bdf(p.get("physfn") or p.get("pci"))
        by_name = _pci_of_name(p.get("name"))
        base = base or by_name
        if base and by_name and by_name[3] >= 0:
            named.add(base[:3])
        layout.append(base)
    # Functions present per (domain, bus, slot): a multi-function device has several.
    funcs: dict[tuple[int, int, int], set[int]] = {}
    for loc in layout:
        if loc:
            funcs.setdefault(loc[:3], set()).add(loc[3])
    for place in named:
        funcs[place].add(-2)  # rdma-core writes "f<n>" only for a multi-function device
    by_place: dict[tuple[Any, ...], set[int]] = {}
    for p, loc in zip(ports, layout, strict=True):
        if loc and loc[3] >= 0:
            by_place.setdefault((loc[1], loc[2], loc[3], p.get("port"), p.get("rate_gbps")),
                                set()).add(loc[0])
    keys: list[tuple[Any, ...]] = []
    for p, loc in zip(ports, layout, strict=True):
        ppid = str(p.get("phys_port_id") or "").strip()
        guid = _guid(p)
        if ppid:
            keys.append(("ppid", ppid))
        elif guid and loc:
            keys.append(("card", guid, loc[3], p.get("port")))
        elif p.get("physfn") and loc:
            keys.append(("pci", loc, p.get("port")))
        elif loc and loc[3] >= 0 and not guid and _twins(p, loc, by_place, funcs):
            keys.append(("twin", loc[1], loc[2], loc[3], p.get("port")))
        elif loc:
            keys.append(("pci", loc, p.get("port")))
        elif p.get("netdev"):
            m = _VF_NETDEV.match(str(p["netdev"]))
            keys.append(("net", m.group(1) if m else str(p["netdev"])))
        else:
            keys.append(("dev", p.get("name") or p.get("device"), p.get("port")))
    return keys


def _twins(p: Mapping[str, Any], loc: tuple[int, int, int, int],
           by_place: Mapping[tuple[Any, ...], set[int]],
           funcs: Mapping[tuple[int, int, int], set[int]]) -> bool:
    """The same bus:slot.function (and port and rate) in several PCI domains, each of them a
    multi-function device: one multi-port card reached over several PCIe links."""
    domains = by_place.get((loc[1], loc[2], loc[3], p.get("port"), p.get("rate_gbps"))) or set()
    return len(domains) > 1 and all(len(funcs.get((d, loc[1], loc[2]), ())) > 1
                                    for d in domains)


def typical_rate(rates: Iterable[float]) -> float | None:
    """The rate most ports have (the rails; a front-end port is the odd one), the lower on a tie."""
    c = Counter(r for r in rates if r)
    if not c:
        return None
    top = max(c.values())
    return min(r for r, n in c.items() if n == top)
