# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""What a node's kernel lets the driver roles do: load modules, see NVIDIA GPUs, and which
drivers stand behind a network interface. Pure functions over a filesystem root, so the unit
tests can hand them a fake /proc and /sys; the modules host_capabilities and kernel_modules use
them with root="/"."""

from __future__ import annotations

import glob
import os
import re

CAP_SYS_MODULE = 16


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def module_loading(root: str = "/", release: str | None = None) -> dict:
    """{"can_load": bool, "reason": str}: whether this process may load kernel modules now."""
    proc = os.path.join(root, "proc")
    if not os.path.exists(os.path.join(proc, "modules")):
        return {"can_load": False,
                "reason": "no /proc/modules: this kernel has no loadable-module support"}
    disabled = (_read(os.path.join(proc, "sys/kernel/modules_disabled")) or "0").strip()
    if disabled == "1":
        return {"can_load": False,
                "reason": "kernel.modules_disabled=1: module loading is locked until reboot"}
    status = _read(os.path.join(proc, "self/status")) or ""
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status, re.M)
    if m and not int(m.group(1), 16) & (1 << CAP_SYS_MODULE):
        return {"can_load": False,
                "reason": "no CAP_SYS_MODULE: not root, or a container that drops it"}
    if release and not os.path.isdir(os.path.join(root, "lib/modules", release)):
        return {"can_load": False,
                "reason": f"no /lib/modules/{release}: no modules installed for the running kernel"}
    return {"can_load": True, "reason": "modules can be loaded"}


def module_state(name: str, root: str = "/") -> str:
    """"loaded", "builtin" or "absent", from /sys/module (names there use underscores)."""
    path = os.path.join(root, "sys/module", name.replace("-", "_"))
    if not os.path.isdir(path):
        return "absent"
    # Only loadable modules have initstate; a built-in one with parameters shows up without it.
    state = (_read(os.path.join(path, "initstate")) or "").strip()
    if not state:
        return "builtin"
    return "loaded" if state == "live" else state


def gpus(root: str = "/") -> dict:
    """NVIDIA GPUs as the driver shows them: /proc/driver/nvidia/gpus, else /dev/nvidiaN."""
    models = []
    for info in sorted(glob.glob(os.path.join(root, "proc/driver/nvidia/gpus/*/information"))):
        text = _read(info) or ""
        m = re.search(r"^Model:\s*(.+)$", text, re.M)
        models.append(m.group(1).strip() if m else "unknown")
    devices = sorted(
        os.path.basename(p) for p in glob.glob(os.path.join(root, "dev/nvidia*"))
        if re.fullmatch(r"nvidia\d+", os.path.basename(p))
    )
    version = None
    m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+(?:\.\d+)+)",
                  _read(os.path.join(root, "proc/driver/nvidia/version")) or "")
    if m:
        version = m.group(1)
    count = len(models) or len(devices)
    source = "procfs" if models else ("dev" if devices else "none")
    return {"count": count, "models": models, "devices": devices,
            "driver_version": version, "source": source}


def netdev_drivers(iface: str, root: str = "/") -> dict:
    """The devices under `iface` (through bonds, VLANs: lower_* links) and their drivers.

    rdma_backed is true when one of them is a PCI function with an RDMA device, i.e. restarting
    the RDMA driver stack (openibd) takes it down.
    """
    net = os.path.join(root, "sys/class/net")
    if not iface or not os.path.isdir(os.path.join(net, iface)):
        return {"name": iface, "exists": False, "devices": [], "rdma_backed": False}
    seen: list[dict] = []
    todo, visited = [iface], set()
    while todo:
        name = todo.pop(0)
        if name in visited:
            continue
        visited.add(name)
        base = os.path.join(net, name)
        lowers = [os.path.basename(p)[len("lower_"):] for p in glob.glob(os.path.join(base, "lower_*"))]
        todo.extend(sorted(lowers))
        driver = None
        link = os.path.join(base, "device/driver")
        if os.path.islink(link):
            driver = os.path.basename(os.readlink(link))
        rdma = bool(glob.glob(os.path.join(base, "device/infiniband/*")))
        seen.append({"name": name, "driver": driver, "rdma": rdma,
                     "virtual": not os.path.exists(os.path.join(base, "device"))})
    backed = any(d["rdma"] or (d["driver"] or "").startswith(("mlx4", "mlx5")) for d in seen)
    return {"name": iface, "exists": True, "devices": seen, "rdma_backed": backed}
