"""Which NICs a host's NCCL channels ran on, and which ports those are: what its line rate counts.

NCCL lists every device it may use (``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ...``) but
a rank's channels run on the few nearest its GPU: ``Channel 00/0 : 0[0] -> 1[0] [send] via
NET/IB/1/GDRDMA`` (``NET/IB/1(8)/GDRDMA`` when rank 8's proxy carries it: PXN, the same host's
NIC 1). With one GPU per host and eight NICs, the sum over the ``Using`` list is eight times the
rate the run could reach. From NCCL 2.19 the index is a *virtual* device's
(``NET/IB : Made virtual device [0] name=mlx5_0+mlx5_1 speed=400000 ndevs=2``, NCCL_IB_MERGE_NICS):
a merged device stands for each NIC in its name.

SR-IOV virtual functions are RDMA devices of their own on one physical port: VFs (or a PF and
its VFs) that NCCL used together count that port's rate once (``physfn`` in the port facts, or
a VF netdev ``<pf>v<n>`` next to its PF's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_USING = re.compile(r"\[(\d+)\]\s*([^\s:\[\]]+):(\d+)/(?:IB|RoCE)")
_VDEV = re.compile(r"Made virtual device \[(\d+)\] name=(\S+)")
_VIA = re.compile(r"\bvia NET/([^/\n]+)/(\d+)")
_VF_NETDEV = re.compile(r"^(.*\d)v\d+$")  # ibp75s0v7 -> ibp75s0


def channel_devices(lines: Iterable[str]) -> set[str] | None:
    """The RDMA device names (``mlx5_0``) the channels in this log ran on; None when the log has
    no channel line over an IB network, or names an index that neither NCCL's ``Using`` list
    nor a virtual device explains (then the caller keeps the ``Using`` list)."""
    physical: dict[int, str] = {}
    virtual: dict[int, list[str]] = {}
    used: set[int] = set()
    for line in lines:
        if "NCCL INFO" not in line and " INFO " not in line:
            continue
        if "via NET/" in line:
            m = _VIA.search(line)
            if m and m.group(1).upper().startswith("IB"):
                used.add(int(m.group(2)))
        elif "Made virtual device" in line:
            m = _VDEV.search(line)
            if m:
                virtual[int(m.group(1))] = [n.split(":")[0] for n in m.group(2).split("+") if n]
        elif "NET/IB" in line and "Using" in line:
            for idx, dev, _port in _USING.findall(line):
                physical.setdefault(int(idx), dev)
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


def physical_port(port: Mapping[str, Any]) -> tuple[str, Any]:
    """What two RDMA ports share when they are one wire: the PF's PCI function (``physfn`` of a
    VF, else the device's own ``pci``) and the port number; else a VF netdev's PF name; else
    the device and port themselves."""
    pf = port.get("physfn") or port.get("pci")
    if pf:
        return (f"pci:{pf}", port.get("port"))
    nd = port.get("netdev")
    if nd:
        m = _VF_NETDEV.match(str(nd))
        return (f"net:{m.group(1) if m else nd}", None)
    return (f"dev:{port.get('name') or port.get('device')}", port.get("port"))
