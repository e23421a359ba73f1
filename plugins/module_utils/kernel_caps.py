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
    """{"can_load": bool, "reason": str, "by": "kernel" | "process"}: whether this process may
    load kernel modules now; "by" says whether the kernel or only this process stands in the way
    (a check run without root must not blame the kernel)."""
    proc = os.path.join(root, "proc")
    if not os.path.exists(os.path.join(proc, "modules")):
        return {"can_load": False, "by": "kernel",
                "reason": "no /proc/modules: this kernel has no loadable-module support"}
    disabled = (_read(os.path.join(proc, "sys/kernel/modules_disabled")) or "0").strip()
    if disabled == "1":
        return {"can_load": False, "by": "kernel",
                "reason": "kernel.modules_disabled=1: module loading is locked until reboot"}
    if release and not os.path.isdir(os.path.join(root, "lib/modules", release)):
        return {"can_load": False, "by": "kernel",
                "reason": f"no /lib/modules/{release}: no modules installed for the running kernel"}
    status = _read(os.path.join(proc, "self/status")) or ""
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status, re.M)
    if m and not int(m.group(1), 16) & (1 << CAP_SYS_MODULE):
        return {"can_load": False, "by": "process",
                "reason": "no CAP_SYS_MODULE: not root, or a container that drops it"}
    return {"can_load": True, "by": "kernel", "reason": "modules can be loaded"}


# What each RDMA module creates once it is in the kernel, loaded or built in. A module built in
# without parameters or a driver of its own has no /sys/module entry (ib_uverbs and rdma_ucm under
# CONFIG_INFINIBAND_USER_ACCESS=y), and a kernel installed without /lib/modules has no
# modules.builtin: then its classes and device nodes are the only evidence.
CREATES = {
    "ib_core": ("sys/class/infiniband",),
    "ib_uverbs": ("sys/class/infiniband_verbs", "dev/infiniband/uverbs*"),
    "rdma_ucm": ("dev/infiniband/rdma_cm", "sys/class/misc/rdma_cm"),
    "ib_umad": ("sys/class/infiniband_mad", "dev/infiniband/umad*"),
    "mlx5_core": ("sys/bus/pci/drivers/mlx5_core",),
    "mlx5_ib": ("sys/bus/auxiliary/drivers/mlx5_ib.rdma",),
    "ib_ipoib": ("sys/bus/auxiliary/drivers/ib_ipoib*",),
}


def kernel_release(root: str | None = "/") -> str | None:
    """The running kernel's release as root's procfs says it (a fixture names its own)."""
    if root is None:
        return None
    text = _read(os.path.join(root, "proc/sys/kernel/osrelease"))
    if text and text.strip():
        return text.strip()
    return os.uname().release if os.path.realpath(root) == "/" else None


def _listed(path: str, key: str, builtin: bool) -> bool:
    text = _read(path) or ""
    if builtin:  # modules.builtin: kernel/drivers/infiniband/core/ib_uverbs.ko
        names = {os.path.basename(line.strip())[:-3] for line in text.splitlines()
                 if line.strip().endswith(".ko")}
    else:  # /proc/modules: "mlx5_ib 471040 0 - Live 0x0000000000000000"
        names = {line.split()[0] for line in text.splitlines() if line.strip()}
    return key in {n.replace("-", "_") for n in names}


def module_status(name: str, root: str | None = "/", sysfs: str | None = None) -> dict:
    """Whether a kernel module is in the running kernel: the one answer every command gives.

    {"name", "state": "loaded" | "builtin" | "absent", "evidence": what says so}. Read, in this
    order: /proc/modules (loaded), /sys/module/NAME (initstate only for a loadable module),
    /lib/modules/$(uname -r)/modules.builtin, then the classes and device nodes the module
    creates (CREATES): present but not loaded means built in. Every path is under `root`
    (sysfs under `sysfs`, default root/sys) so a fixture tree can stand in; root None reads sysfs
    alone (a sysfs-only tree).
    """
    key = name.replace("-", "_")
    sys_dir = sysfs if sysfs is not None else os.path.join(root or "/", "sys")
    proc_modules = os.path.join(root, "proc/modules") if root is not None else None
    if proc_modules and _listed(proc_modules, key, builtin=False):
        return {"name": name, "state": "loaded", "evidence": "listed in /proc/modules"}
    module_dir = os.path.join(sys_dir, "module", key)
    if os.path.isdir(module_dir):
        # Only loadable modules have initstate; a built-in one with parameters shows up without it.
        state = (_read(os.path.join(module_dir, "initstate")) or "").strip()
        if state:  # live, or coming/going: neither usable nor gone
            return {"name": name, "state": "loaded" if state == "live" else state,
                    "evidence": f"/sys/module/{key}/initstate {state}"}
        return {"name": name, "state": "builtin",
                "evidence": f"/sys/module/{key} without initstate"}
    release = kernel_release(root)
    if release:
        builtin = os.path.join(root or "/", "lib/modules", release, "modules.builtin")
        if _listed(builtin, key, builtin=True):
            return {"name": name, "state": "builtin",
                    "evidence": f"listed in /lib/modules/{release}/modules.builtin"}
    for rel in CREATES.get(key, ()):
        base = sys_dir if rel.startswith("sys/") else root
        if base is None:
            continue
        pattern = os.path.join(base, rel[len("sys/"):] if rel.startswith("sys/") else rel)
        if glob.glob(pattern):
            return {"name": name, "state": "builtin",
                    "evidence": f"/{rel} exists and {key} is not a loaded module"}
    creates = ", ".join("/" + rel for rel in CREATES.get(key, ()))
    return {"name": name, "state": "absent",
            "evidence": "not in /proc/modules, /sys/module or modules.builtin"
                        + (f", no {creates}" if creates else "")}


# The verbs stack every RDMA job needs; the HCA driver (mlx5_ib, ...) is a site choice.
VERBS_STACK = ("ib_core", "ib_uverbs", "rdma_ucm")
PRESENT = ("loaded", "builtin")
STATE_WORDS = {"loaded": "loaded", "builtin": "built into the kernel",
               "absent": "not in the kernel"}


def describe(status: dict) -> str:
    """'ib_uverbs built into the kernel' — how every command prints one module's state."""
    return f"{status['name']} {STATE_WORDS.get(status['state'], status['state'])}"


def summary(statuses: list) -> str:
    """'loaded: mlx5_ib; built in: ib_core, ib_uverbs; absent: nvidia_peermem' (one table cell)."""
    groups: dict = {}
    for st in statuses:
        groups.setdefault(st["state"], []).append(st["name"])
    label = {"builtin": "built in"}
    return "; ".join(f"{label.get(state, state)}: {', '.join(names)}"
                     for state, names in groups.items()) or "none asked"


NVIDIA_VENDOR = "0x10de"


def nvidia_pci_gpus(root: str = "/") -> dict:
    """{PCI address: bound driver or None} of NVIDIA display/3D functions (vendor 0x10de,
    class 0x03xxxx; an NVSwitch is a bridge, 0x0680) in /sys/bus/pci/devices."""
    devs = os.path.join(root, "sys/bus/pci/devices")
    try:
        names = sorted(os.listdir(devs))
    except OSError:
        return {}
    out = {}
    for addr in names:
        if (_read(os.path.join(devs, addr, "vendor")) or "").strip() != NVIDIA_VENDOR or \
                not (_read(os.path.join(devs, addr, "class")) or "").startswith("0x03"):
            continue
        driver = os.path.join(devs, addr, "driver")
        out[addr.lower()] = (os.path.basename(os.path.realpath(driver))
                             if os.path.lexists(driver) else None)
    return out


def gpus(root: str = "/") -> dict:
    """NVIDIA GPUs as the driver shows them: /proc/driver/nvidia/gpus, else /dev/nvidiaN; and
    those on PCI that the driver does not list (``unprobed``: no driver bound, or nvidia bound
    without its procfs entry: a GPU that failed to probe), by PCI address and driver. A GPU
    given to another driver on purpose (vfio-pci for a VM) is listed in ``elsewhere``."""
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
    listed = {os.path.basename(os.path.dirname(p)).lower() for p in
              glob.glob(os.path.join(root, "proc/driver/nvidia/gpus/*/information"))}
    unprobed, elsewhere = [], []
    # With the driver's list, a GPU on PCI it lacks failed to probe; with no GPU from the
    # driver at all, the PCI list tells a GPU node whose driver is not loaded from a node
    # without GPUs (on_pci 0); None when PCI is not readable here.
    on_pci = None
    if listed or not count:
        pci = nvidia_pci_gpus(root)
        on_pci = len(pci) if os.path.isdir(os.path.join(root, "sys/bus/pci/devices")) else None
        for addr, driver in pci.items():
            if addr in listed:
                continue
            if driver in (None, "nvidia"):
                unprobed.append({"address": addr, "driver": driver})
            else:
                elsewhere.append({"address": addr, "driver": driver})
    return {"count": count, "models": models, "devices": devices,
            "driver_version": version, "source": source, "unprobed": unprobed,
            "elsewhere": elsewhere, "on_pci": on_pci}


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
