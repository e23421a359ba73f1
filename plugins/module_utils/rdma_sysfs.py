# Copyright: rdmaprov developers
# Apache-2.0
"""RDMA facts read from sysfs (/sys/class/infiniband, /sys/class/infiniband_verbs, /sys/class/net).

Pure functions over a sysfs root, so unit tests hand them fixture trees; the rdma_facts module
uses them with "/sys" and `rdmaprov probe` imports them directly. Attribute formats follow the
kernel's drivers/infiniband/core/sysfs.c (state "4: ACTIVE", phys_state "5: LinkUp",
rate "400 Gb/sec (4X NDR)", lid "0xc", GIDs printed with %pI6, gid_attrs/types "IB/RoCE v1" or
"RoCE v2") and mlx5's own device attributes (fw_ver, board_id, hca_type).
Return shape: docs/CONTRACTS.md, "rdma_facts module".
"""

from __future__ import annotations

import os
import re

from ansible_collections.rdmaprov.cluster.plugins.module_utils import kernel_caps, rdma_ports
from ansible_collections.rdmaprov.cluster.plugins.module_utils.driver_versions import (
    parse_ofed_info,
)

IB_MTUS = (256, 512, 1024, 2048, 4096)
PORT_STATES = ("NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER")
PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
               5: "LinkUp", 6: "LinkErrorRecovery", 7: "Phy Test"}
ZERO_GID = rdma_ports.ZERO_GID
# Counters worth carrying into facts: the PMA error counters (ports/N/counters/) and mlx5's
# RoCE congestion / loss counters (ports/N/hw_counters/). Everything else there is traffic volume.
ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                  "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
                  "port_xmit_discards", "port_xmit_constraint_errors",
                  "port_rcv_constraint_errors", "local_link_integrity_errors",
                  "excessive_buffer_overrun_errors", "VL15_dropped", "port_xmit_wait")
ROCE_HW_COUNTERS = ("np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled",
                    "rp_cnp_ignored", "out_of_sequence", "packet_seq_err", "out_of_buffer",
                    "local_ack_timeout_err", "implied_nak_seq_err", "duplicate_request",
                    "rnr_nak_retry_err", "req_cqe_error", "resp_cqe_error")

# The port reader every command, module and the validation worker share (module_utils/rdma_ports.py).
read = rdma_ports.read
_listdir = rdma_ports.listdir
parse_rate = rdma_ports.parse_rate
parse_state = rdma_ports.parse_state
_counters = rdma_ports.counters
normalise_gid_type = rdma_ports.normalise_gid_type
gid_kind = rdma_ports.gid_kind
read_gids = rdma_ports.read_gids


def port_netdev(sysfs_root: str, device: str, port: int) -> str | None:
    """The netdev of a port (rdma_ports.port_netdev under this sysfs root)."""
    return rdma_ports.port_netdev(os.path.join(sysfs_root, rdma_ports.IB_CLASS), device, port)


def _sorted_numeric(names: list[str]) -> list[str]:
    return sorted((n for n in names if n.isdigit()), key=int)


def parse_lid(text: str | None) -> int | None:
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def roce_active_mtu(netdev_mtu: int | None) -> int | None:
    """The IB MTU a RoCE port uses for a netdev MTU: the largest one that fits after the RoCE
    v2 headers (the kernel's iboe_get_mtu subtracts GRH+UDP+BTH+XRC+AtomicETH+ICRC = 96 bytes)."""
    if not netdev_mtu:
        return None
    room = netdev_mtu - 96
    fitting = [m for m in IB_MTUS if m <= room]
    return fitting[-1] if fitting else None


def ipoib_active_mtu(netdev_mtu: int | None, mode: str | None) -> int | None:
    """In datagram mode an IPoIB netdev's MTU is the IB MTU less its 4-byte header; connected
    mode (MTU up to 65520) says nothing about the link's MTU."""
    if not netdev_mtu or mode != "datagram":
        return None
    return netdev_mtu + 4 if netdev_mtu + 4 in IB_MTUS else None


def kernel_support(sysfs_root: str = "/sys") -> dict:
    """{"uverbs": bool, "reason": str, "modules": {name: {state, evidence}}}: can user space
    (NCCL, pyverbs) do RDMA on this kernel, and the verbs stack's modules as
    kernel_caps.module_status sees them (loaded, built in or absent).

    A sysfs root named `sys` is read with its siblings (proc/, dev/, lib/modules/: "/sys" with
    "/", a fixture root's sys/ with that root); any other directory is a sysfs-only tree.
    """
    norm = os.path.normpath(sysfs_root)
    root = (os.path.dirname(norm) or "/") if os.path.basename(norm) == "sys" else None
    modules = {name: {k: v for k, v in kernel_caps.module_status(name, root, sysfs_root).items()
                      if k != "name"}
               for name in kernel_caps.VERBS_STACK}
    uverbs = modules["ib_uverbs"]["state"] in kernel_caps.PRESENT
    word = kernel_caps.STATE_WORDS.get(modules["ib_uverbs"]["state"], modules["ib_uverbs"]["state"])
    has_devices = bool(_listdir(os.path.join(sysfs_root, "class/infiniband")))
    if not uverbs:
        if has_devices:
            reason = ("RDMA devices exist but there is no /sys/class/infiniband_verbs: "
                      "ib_uverbs is not in the kernel, so user space (NCCL) cannot use them")
        else:
            reason = "no /sys/class/infiniband_verbs: the kernel has no RDMA (ib_uverbs) support"
    elif not has_devices:
        reason = (f"ib_uverbs is {word} but /sys/class/infiniband is empty: no RDMA devices "
                  "(no HCA here, or no driver for it such as mlx5_ib)")
    else:
        reason = f"ib_uverbs is {word} and RDMA devices are present"
    return {"uverbs": uverbs, "reason": reason, "modules": modules}


def bond_of(sysfs_root: str, netdev: str | None) -> str | None:
    """The bond a netdev is, or is enslaved to; None for a plain interface."""
    if not netdev:
        return None
    net = os.path.join(sysfs_root, "class/net")
    if os.path.isdir(os.path.join(net, netdev, "bonding")):
        return netdev
    master = os.path.join(net, netdev, "master")
    if os.path.lexists(master):
        upper = os.path.basename(os.path.realpath(master)) if os.path.islink(master) \
            else (read(master) or "")
        if upper and os.path.isdir(os.path.join(net, upper, "bonding")):
            return upper
    return None


IFF_UP = 0x1  # include/uapi/linux/if.h; /sys/class/net/<if>/flags prints the flags as "%#x"


def netdev_flags(sysfs_root: str, netdev: str | None) -> int | None:
    """A netdev's interface flags ("0x1003" -> 0x1003); None when absent or unreadable."""
    text = read(os.path.join(sysfs_root, "class/net", netdev, "flags")) if netdev else None
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def admin_down(link_layer: str | None, phys_state: str | None, flags: int | None) -> bool:
    """Whether a port is down by choice, not by fault. InfiniBand: its PHY is Disabled
    (`ibportstate ... disable`). Ethernet: RoCE drivers (mlx5_query_port_roce, irdma, qedr,
    ocrdma, mana) report DOWN / Disabled for every netdev that is not running with carrier, a
    pulled cable as much as `ip link set down`, so only the netdev's IFF_UP says it was turned
    off; where its flags are not readable the PHY's word stands."""
    if link_layer == "Ethernet" and flags is not None:
        return not flags & IFF_UP
    return phys_state == "Disabled"


def read_port(sysfs_root: str, device: str, port: int) -> dict:
    port_dir = os.path.join(sysfs_root, "class/infiniband", device, "ports", str(port))
    link_layer = read(os.path.join(port_dir, "link_layer"))
    netdev = port_netdev(sysfs_root, device, port)
    net_mtu = None
    if netdev:
        mtu = read(os.path.join(sysfs_root, "class/net", netdev, "mtu"))
        net_mtu = int(mtu) if mtu and mtu.isdigit() else None
    if link_layer == "Ethernet":
        active_mtu = roce_active_mtu(net_mtu)
        lid = None
    else:
        mode = read(os.path.join(sysfs_root, "class/net", netdev, "mode")) if netdev else None
        active_mtu = ipoib_active_mtu(net_mtu, mode)
        lid = parse_lid(read(os.path.join(port_dir, "lid")))
    facts = {
        "port": port,
        "state": parse_state(read(os.path.join(port_dir, "state"))),
        "phys_state": parse_state(read(os.path.join(port_dir, "phys_state"))),
        "rate_gbps": parse_rate(read(os.path.join(port_dir, "rate"))),
        "link_layer": link_layer,
        "active_mtu": active_mtu,
        "lid": lid,
        "netdev": netdev,
        "gids": read_gids(port_dir, link_layer),
        # Beyond the contract's keys: extras that consumers may ignore.
        "bond": bond_of(sysfs_root, netdev),
        "netdev_mtu": net_mtu,
        "counters": _counters(os.path.join(port_dir, "counters"), ERROR_COUNTERS),
        "hw_counters": _counters(os.path.join(port_dir, "hw_counters"), ROCE_HW_COUNTERS),
    }
    facts["admin_down"] = admin_down(link_layer, facts["phys_state"],
                                     netdev_flags(sysfs_root, netdev))
    # The MTU of every netdev `rdmaprov check` compares for this port (mtu_netdevs): what
    # probe --write-expectations derives the expected MTU from, so the two cannot disagree.
    path = roce_datapath(sysfs_root, device, facts) if link_layer == "Ethernet" else {}
    facts["path_mtu"] = {name: (net_mtu if name == netdev else netdev_mtu(sysfs_root, name))
                         for name in mtu_netdevs(facts, path)}
    return facts


def netdev_mtu(sysfs_root: str, name: str) -> int | None:
    text = read(os.path.join(sysfs_root, "class/net", name, "mtu"))
    return int(text) if text and text.isdigit() else None


def mtu_netdevs(port: dict, datapath: dict) -> list:
    """The netdevs whose MTU `rdmaprov check` compares with its expected MTU for one port: the
    port's own netdev and, for RoCE, the VLANs on top and a bond's members (roce_datapath).
    The one rule: check's judge and the facts' path_mtu both call it."""
    names = [port.get("netdev"), *(datapath.get("vlans") or []), *(datapath.get("members") or [])]
    return list(dict.fromkeys(n for n in names if n))


def gpu_summary(sysfs_root: str = "/sys") -> dict | None:
    """{"count": GPUs the driver shows (what check counts), "on_pci": NVIDIA GPUs on PCI,
    "models": [...]} of the host whose sysfs this is (kernel_caps.gpus); None for a bare
    sysfs tree (no root around it to read /proc and /dev from)."""
    norm = os.path.normpath(sysfs_root)
    if os.path.basename(norm) != "sys":
        return None
    root = os.path.dirname(norm) or "/"
    seen = kernel_caps.gpus(root)
    return {"count": seen["count"], "on_pci": len(kernel_caps.nvidia_pci_gpus(root)),
            "models": sorted(set(seen["models"]))}


def read_device(sysfs_root: str, name: str) -> dict:
    base = os.path.join(sysfs_root, "class/infiniband", name)
    ports = [read_port(sysfs_root, name, int(p))
             for p in _sorted_numeric(_listdir(os.path.join(base, "ports")))]
    return {
        "name": name,
        "fw_ver": read(os.path.join(base, "fw_ver")),
        "board_id": read(os.path.join(base, "board_id")),
        "node_guid": read(os.path.join(base, "node_guid")),
        "hca_type": read(os.path.join(base, "hca_type")),
        "ports": ports,
    }


def list_devices(sysfs_root: str = "/sys") -> list[str]:
    return sorted(_listdir(os.path.join(sysfs_root, "class/infiniband")))


def stack_versions(run=None) -> dict:
    """{"rdma_core_version", "ofed_version"} from `ofed_info -s` and the package database.

    `run(argv) -> (rc, stdout)` runs a read-only command (the module's run_command, or
    subprocess for the local probe); None, or a command that is missing, gives nulls.
    """
    result = {"rdma_core_version": None, "ofed_version": None}
    if run is None:
        return result
    rc, out = run(["ofed_info", "-s"])
    if rc == 0:
        parsed = parse_ofed_info(out)
        if parsed:
            result["ofed_version"] = parsed["full"]
    rc, out = run(["dpkg-query", "-W", "-f=${Version}\\t${db:Status-Abbrev}", "rdma-core"])
    if rc == 0 and "\t" in out:
        version, status = out.split("\t", 1)
        if status.startswith("ii"):
            result["rdma_core_version"] = upstream_version(version)
    if result["rdma_core_version"] is None:
        rc, out = run(["rpm", "-q", "--qf", "%{VERSION}", "rdma-core"])
        if rc == 0 and out.strip() and "not installed" not in out:
            result["rdma_core_version"] = upstream_version(out.strip())
    return result


def upstream_version(package_version: str) -> str:
    """'44.0-2' -> '44.0'; '2404mlnx51-1.2404066' -> '2404mlnx51' (MLNX_OFED's rdma-core):
    the part before the packaging revision, without an epoch."""
    version = package_version.strip().split(":", 1)[-1]
    return version.split("-", 1)[0]


def collect(sysfs_root: str = "/sys", run=None) -> dict:
    """The whole `rdma` fact from sysfs (see docs/CONTRACTS.md)."""
    devices = [read_device(sysfs_root, name) for name in list_devices(sysfs_root)]
    facts = {"kernel": kernel_support(sysfs_root)}
    facts.update(stack_versions(run))
    facts["source"] = "sysfs" if devices else "none"
    facts["devices"] = devices
    facts["gpus"] = gpu_summary(sysfs_root)
    return facts


def list_netdevs(sysfs_root: str = "/sys") -> list[str]:
    """Network interfaces of this host (what NCCL_SOCKET_IFNAME can name)."""
    return sorted(_listdir(os.path.join(sysfs_root, "class/net")))


# -- GPUDirect RDMA: by capability, not by module ---------------------------------------------
# Two paths let an HCA read and write GPU memory (NVIDIA's GPUDirect RDMA documentation):
# - nvidia_peermem (or MOFED's legacy nv_peer_mem) loaded: the peer-memory path;
# - DMA-BUF: the NVIDIA open kernel module (R515 and later export GPU memory as dma-buf), a
#   kernel >= 5.12 whose RDMA core imports dma-bufs (ib_umem_dmabuf: CONFIG_INFINIBAND_USER_MEM,
#   which selects DMA_SHARED_BUFFER since 5.12, so any kernel with ib_uverbs has it; an older
#   kernel only where it exports ib_umem_dmabuf_get, a backport), and an
#   rdma-core with ibv_reg_dmabuf_mr (libibverbs symbol version IBVERBS_1.12, rdma-core 34;
#   the library file is libibverbs.so.1.<abi>.<rdma-core version>). NCCL >= 2.13 uses it by
#   default (NCCL_DMABUF_ENABLE). No peermem is needed then.
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
DMABUF_MIN_KERNEL = (5, 12)
DMABUF_MIN_NVIDIA = 515
DMABUF_MIN_VERBS_ABI = 12
LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib",
            "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib64", "lib")
_NV_VERSION = re.compile(r"NVRM version:\s*NVIDIA UNIX (Open )?.*?Kernel Module.*?\s(\d+)\.(\d+)"
                         r"(?:\.(\d+))?\s")
_VERBS_LIB = re.compile(r"^libibverbs\.so\.1\.(\d+)\.(\S+)$")


def nvidia_module(root: str) -> dict:
    """{"open": bool|None, "version": str|None, "why": str} from /proc/driver/nvidia/version
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
    for the open module; "NVIDIA UNIX x86_64 Kernel Module  535.104.05 ..." for the
    proprietary one), else /sys/module/nvidia/version for the version alone."""
    text = read(os.path.join(root, "proc/driver/nvidia/version"))
    m = _NV_VERSION.search(text or "")
    if m:
        version = ".".join(g for g in m.group(2, 3, 4) if g)
        flavour = "open" if m.group(1) else "proprietary"
        return {"open": bool(m.group(1)), "version": version,
                "why": f"NVIDIA {flavour} kernel module {version} (/proc/driver/nvidia/version)"}
    version = read(os.path.join(root, "sys/module/nvidia/version")) or None
    if version:
        return {"open": None, "version": version,
                "why": f"NVIDIA kernel module {version}; its flavour (open or proprietary) is "
                       "not readable: no /proc/driver/nvidia/version"}
    return {"open": None, "version": None,
            "why": "no NVIDIA kernel module (no /proc/driver/nvidia/version)"}


def _release_tuple(release: str | None) -> tuple[int, int] | None:
    m = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


# The RDMA core's dma-buf import (drivers/infiniband/core/umem_dmabuf.c): a kernel that has it
# exports this symbol, whatever its version says (enterprise kernels older than 5.12 carry
# backports of the RDMA subsystem).
DMABUF_SYMBOL = "ib_umem_dmabuf_get"


def kernel_symbol(root: str, release: str | None, symbol: str) -> tuple[bool | None, str]:
    """Whether the running kernel has ``symbol``: in a module (depmod's
    /lib/modules/<release>/modules.symbols, "alias symbol:NAME MODULE") or loaded or built in
    (/proc/kallsyms, "ADDR T NAME" and a tab and "[MODULE]" for a module's). (True/False, the
    file that said so), or (None, "") when neither file is readable. Reading kallsyms costs
    ~50 ms (153,000 lines on an H100 host, 6.18), so callers ask only where they must."""
    name = re.escape(symbol)
    sources = [("/proc/kallsyms", re.compile(rf" {name}(?:\s|$)"))]
    if release:
        sources.insert(0, (f"/lib/modules/{release}/modules.symbols",
                           re.compile(rf"^alias symbol:{name} ", re.M)))
    seen = False
    for path, pattern in sources:
        try:
            with open(os.path.join(root, path.lstrip("/")), encoding="utf-8",
                      errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        seen = True
        if pattern.search(text):
            return True, path
    return (False, "modules.symbols and /proc/kallsyms") if seen else (None, "")


def kernel_config(root: str, release: str | None, option: str) -> str | None:
    """'y', 'm' or 'n' for a CONFIG_ option from /boot/config-<release> or /proc/config.gz;
    None when neither is readable."""
    import gzip

    texts = []
    if release:
        texts.append(read(os.path.join(root, "boot", f"config-{release}")))
    try:
        with gzip.open(os.path.join(root, "proc/config.gz"), "rt", errors="replace") as fh:
            texts.append(fh.read())
    except (OSError, EOFError):
        pass
    for text in texts:
        if not text:
            continue
        for line in text.splitlines():
            if line.startswith(option + "="):
                return line.split("=", 1)[1].strip()
            if line.strip() == f"# {option} is not set":
                return "n"
    return None


def libibverbs(root: str) -> dict | None:
    """{"path", "abi", "version"} of the newest libibverbs.so.1.<abi>.<version> under the
    root's library directories; None when there is none."""
    best = None
    for d in LIB_DIRS:
        for name in _listdir(os.path.join(root, d)):
            m = _VERBS_LIB.match(name)
            if m and (best is None or int(m.group(1)) > best["abi"]):
                best = {"path": "/" + os.path.join(d, name), "abi": int(m.group(1)),
                        "version": m.group(2)}
    return best


def gpudirect(root: str = "/") -> dict:
    """Can an HCA reach GPU memory here, and by which path? {"path": "peermem" | "dmabuf" |
    None, "why": one line, "peermem": {...}, "dmabuf": {"available", "parts": {...}}}."""
    peer = {m: kernel_caps.module_status(m, root) for m in PEERMEM_MODULES}
    loaded = [m for m, s in peer.items() if s["state"] in kernel_caps.PRESENT]
    nv = nvidia_module(root)
    release = kernel_caps.kernel_release(root)
    parts: dict = {"nvidia": {"ok": False, "why": nv["why"]}}
    major = int(nv["version"].split(".")[0]) if nv["version"] else None
    if nv["open"] and major is not None and major >= DMABUF_MIN_NVIDIA:
        parts["nvidia"]["ok"] = True
    elif nv["open"] is False:
        parts["nvidia"]["why"] += ": the proprietary module exports no dma-buf (the open one does)"
    elif nv["open"] and major is not None:
        parts["nvidia"]["why"] += f": dma-buf needs R{DMABUF_MIN_NVIDIA} or later"
    rel = _release_tuple(release)
    config = kernel_config(root, release, "CONFIG_DMA_SHARED_BUFFER")
    uverbs = kernel_caps.module_status("ib_uverbs", root)["state"] in kernel_caps.PRESENT
    if rel is None:
        kern = {"ok": False, "why": "kernel release not readable"}
    elif rel < DMABUF_MIN_KERNEL:
        # Read only here (kallsyms is large; the pre-job check has 0.1 s): 5.12 and later have it.
        has, where = kernel_symbol(root, release, DMABUF_SYMBOL)
        if has:
            kern = {"ok": True, "why": f"Linux {release} with the RDMA dma-buf import backported "
                                       f"({DMABUF_SYMBOL} in {where})"}
        elif has is False:
            kern = {"ok": False, "why": f"Linux {release} is older than 5.12 and has no "
                                        f"{DMABUF_SYMBOL} (no RDMA dma-buf import)"}
        else:
            kern = {"ok": False, "why": f"Linux {release} is older than 5.12 (no RDMA dma-buf "
                                        "import)"}
    elif config == "y":
        kern = {"ok": True, "why": f"Linux {release} with CONFIG_DMA_SHARED_BUFFER=y"}
    elif config is not None:
        kern = {"ok": False, "why": f"Linux {release} without CONFIG_DMA_SHARED_BUFFER"}
    elif uverbs:
        kern = {"ok": True, "why": f"Linux {release} with ib_uverbs (its INFINIBAND_USER_MEM "
                                   "selects DMA_SHARED_BUFFER since 5.12)"}
    else:
        kern = {"ok": False, "why": f"Linux {release} without ib_uverbs"}
    parts["kernel"] = kern
    lib = libibverbs(root)
    if lib is None:
        # NCCL loads libibverbs where the job runs (in a container: the image's own), so a
        # host without one does not rule the path out; the job's must have the symbol.
        parts["rdma_core"] = {"ok": True, "why": "no libibverbs on this root: the job's own "
                                                 "(its image's) needs rdma-core >= 34"}
    elif lib["abi"] >= DMABUF_MIN_VERBS_ABI:
        parts["rdma_core"] = {"ok": True, "why": f"rdma-core {lib['version']} "
                                                 f"({lib['path']}: ibv_reg_dmabuf_mr)"}
    else:
        parts["rdma_core"] = {"ok": False, "why": f"rdma-core {lib['version']} ({lib['path']}) "
                                                  "has no ibv_reg_dmabuf_mr (needs 34+)"}
    dmabuf_ok = all(p["ok"] for p in parts.values())
    dmabuf = {"available": dmabuf_ok, "parts": parts}
    if loaded:
        why = f"{loaded[0]} {kernel_caps.STATE_WORDS.get(peer[loaded[0]]['state'], 'loaded')}"
        return {"path": "peermem", "why": why, "peermem": peer[loaded[0]], "dmabuf": dmabuf}
    if dmabuf_ok:
        why = ("DMA-BUF: " + "; ".join(p["why"] for p in parts.values())
               + " (no nvidia_peermem needed)")
        return {"path": "dmabuf", "why": why, "peermem": None, "dmabuf": dmabuf}
    missing = "; ".join(p["why"] for p in parts.values() if not p["ok"])
    return {"path": None, "why": f"neither nvidia_peermem loaded nor DMA-BUF: {missing}",
            "peermem": None, "dmabuf": dmabuf}


# -- PCIe: link training and GPU <-> NIC topology ------------------------------------------------
# /sys/bus/pci/devices/<addr>/{current,max}_link_{speed,width} (drivers/pci/pci-sysfs.c): speed
# "32.0 GT/s PCIe" (older kernels "8 GT/s"; "Unknown" when the link is down or virtual), width
# a number ("16"). /sys/bus/pci/slots/<name>/address holds "dddd:bb:dd" (no function).
_PCI_ADDR = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")


def parse_link_speed(text: str | None) -> float | None:
    """'32.0 GT/s PCIe' -> 32.0; '2.5 GT/s' -> 2.5; 'Unknown' or garbage -> None."""
    m = _SPEED.match(text or "")
    return float(m.group(1)) if m else None


def parse_link_width(text: str | None) -> int | None:
    """'16' -> 16; '0' (no link) or garbage -> None."""
    return int(text) if text and text.strip().isdigit() and int(text) > 0 else None


def pci_chain(sysfs_root: str, addr: str) -> list[str]:
    """The PCI addresses from the root port down to ``addr`` (its bridges, then itself), from
    the device's real path under /sys/devices/pci<domain>:<bus>/..."""
    real = os.path.realpath(os.path.join(sysfs_root, "bus/pci/devices", addr))
    return [part for part in real.split(os.sep) if _PCI_ADDR.match(part)]


def pci_slots(sysfs_root: str) -> dict:
    """{"dddd:bb:dd": slot name} from /sys/bus/pci/slots/*/address."""
    out = {}
    for name in sorted(_listdir(os.path.join(sysfs_root, "bus/pci/slots"))):
        address = read(os.path.join(sysfs_root, "bus/pci/slots", name, "address"))
        if address:
            out[address.lower()] = name
    return out


def pci_link(sysfs_root: str, addr: str, slots: dict | None = None) -> dict:
    """One PCI function's link: its speed and width now and at most, the upstream port's
    maxima (a card is no faster than its slot), NUMA node and slot."""
    base = os.path.join(sysfs_root, "bus/pci/devices", addr)
    chain = pci_chain(sysfs_root, addr)
    upstream = chain[-2] if len(chain) >= 2 else None
    up = os.path.join(sysfs_root, "bus/pci/devices", upstream) if upstream else None
    numa = read(os.path.join(base, "numa_node"))
    slots = pci_slots(sysfs_root) if slots is None else slots
    return {
        "address": addr,
        "slot": slots.get(addr.rsplit(".", 1)[0]),
        "numa_node": int(numa) if numa and numa.lstrip("-").isdigit() and int(numa) >= 0
        else None,
        "current_speed": parse_link_speed(read(os.path.join(base, "current_link_speed"))),
        "max_speed": parse_link_speed(read(os.path.join(base, "max_link_speed"))),
        "current_width": parse_link_width(read(os.path.join(base, "current_link_width"))),
        "max_width": parse_link_width(read(os.path.join(base, "max_link_width"))),
        "upstream": upstream,
        "upstream_max_speed": parse_link_speed(read(os.path.join(up, "max_link_speed")))
        if up else None,
        "upstream_max_width": parse_link_width(read(os.path.join(up, "max_link_width")))
        if up else None,
        "chain": chain,
    }


def pcie_trained_down(link: dict, idle_downclock: bool) -> str | None:
    """Why a link runs below what the device and its slot can do, or None.

    Width is judged strictly: a link trains to its width once and keeps it (x16 -> x8 halves
    the bandwidth, a reseat or a bad riser). Speed is judged only for devices that keep their
    speed when idle: NVIDIA GPUs drop to 2.5 GT/s (Gen1) when idle to save power and return to
    full speed under load (nvidia-smi's "PCIe Generation Current 1, Max 5" on an idle GPU),
    so a GPU's speed is reported, never failed; an HCA (ConnectX) keeps its trained speed.
    The expected value is the smaller of the device's and its upstream port's maximum: a Gen5
    card in a Gen4 slot at 16 GT/s is as built, not trained down."""
    def limit(own, up):
        return min(v for v in (own, up) if v is not None) if (own or up) else None

    want_w = limit(link.get("max_width"), link.get("upstream_max_width"))
    have_w = link.get("current_width")
    if want_w and have_w and have_w < want_w:
        return f"x{have_w} of x{want_w}"
    want_s = limit(link.get("max_speed"), link.get("upstream_max_speed"))
    have_s = link.get("current_speed")
    if not idle_downclock and want_s and have_s and have_s < want_s:
        return f"{have_s:g} GT/s of {want_s:g} GT/s"
    return None


def _common(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def pci_distance(a: list[str], b: list[str]) -> int | None:
    """Hops between two devices through their common upstream bridge (PCIe switch); None when
    they share none (different root ports: the path crosses the CPU's root complex)."""
    common = _common(a, b)
    if common == 0:
        return None
    return (len(a) - common) + (len(b) - common)


def hca_pci_address(sysfs_root: str, device: str) -> str | None:
    real = os.path.realpath(os.path.join(sysfs_root, "class/infiniband", device, "device"))
    name = os.path.basename(real)
    return name if _PCI_ADDR.match(name) else None


def gpu_pci_addresses(root: str) -> list[str]:
    """NVIDIA GPUs' PCI addresses: /proc/driver/nvidia/gpus/<addr>, else the PCI devices of
    vendor 0x10de and a display class (0x03xxxx)."""
    found = [n.lower() for n in _listdir(os.path.join(root, "proc/driver/nvidia/gpus"))
             if _PCI_ADDR.match(n.lower())]
    if found:
        return sorted(found)
    return sorted(kernel_caps.nvidia_pci_gpus(root))


ACS_CAP_ID = 0x000D
ACS_REDIRECT = {0x04: "RR (P2P request redirect)", 0x08: "CR (P2P completion redirect)",
                0x10: "UF (upstream forwarding)"}


def acs_state(sysfs_root: str, addr: str) -> dict:
    """{"readable": bool, "enabled": [bits that redirect peer-to-peer] , "why"} from the
    bridge's config space: the ACS extended capability (ID 0x000D) control register. Beyond
    the first 64 bytes config space is readable by root only; a short read says so."""
    path = os.path.join(sysfs_root, "bus/pci/devices", addr, "config")
    try:
        with open(path, "rb") as fh:
            data = fh.read(4096)
    except OSError as exc:
        return {"readable": False, "enabled": [], "why": f"config space not readable: "
                                                         f"{exc.strerror}"}
    if len(data) < 0x104:
        return {"readable": False, "enabled": [],
                "why": "extended config space not readable (root only)"}
    offset, seen = 0x100, 0
    while offset and offset + 8 <= len(data) and seen < 64:
        header = int.from_bytes(data[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == ACS_CAP_ID:
            control = int.from_bytes(data[offset + 6:offset + 8], "little")
            on = [name for bit, name in ACS_REDIRECT.items() if control & bit]
            return {"readable": True, "enabled": on,
                    "why": f"ACS redirects peer-to-peer: {', '.join(on)}" if on
                    else "ACS present, no peer-to-peer redirect"}
        offset, seen = (header >> 20) & 0xFFC, seen + 1
    return {"readable": True, "enabled": [], "why": "no ACS capability"}


def pcie_topology(root: str = "/") -> dict:
    """{"hcas": {name: link}, "gpus": {addr: link}, "affinity": [{gpu, nic, distance,
    same_numa}], "acs": {bridge: acs_state}} for the check's PCIe item."""
    sysfs_root = os.path.join(root, "sys")
    slots = pci_slots(sysfs_root)
    hcas = {}
    for name in list_devices(sysfs_root):
        addr = hca_pci_address(sysfs_root, name)
        hcas[name] = pci_link(sysfs_root, addr, slots) if addr else None
    gpus = {addr: pci_link(sysfs_root, addr, slots) for addr in gpu_pci_addresses(root)}
    affinity, bridges = [], []
    for addr, g in gpus.items():
        best = None
        for name, h in hcas.items():
            if not h:
                continue
            dist = pci_distance(g["chain"], h["chain"])
            key = (dist is None, dist or 0, name)
            if best is None or key < best[0]:
                best = (key, name, dist, h)
        if best is None:
            continue
        _rank, name, dist, h = best
        affinity.append({"gpu": addr, "nic": name, "distance": dist,
                         "same_numa": (g["numa_node"] == h["numa_node"]
                                       if None not in (g["numa_node"], h["numa_node"])
                                       else None)})
        if dist is not None:  # the downstream ports below the common bridge carry P2P
            common = _common(g["chain"], h["chain"])
            bridges += [b for b in g["chain"][common:-1] + h["chain"][common:-1]
                        if b not in bridges]
    acs = {b: acs_state(sysfs_root, b) for b in bridges}
    # A PCIe switch's uplink: the first bridge below the root port, above an HCA or a GPU (the
    # root port's only child is the switch's upstream port). Its link carries every device
    # below it; trained down (x4 of x16) it throttles them all while each reads x16 itself.
    uplinks: dict = {}
    for name, link in [*hcas.items(), *gpus.items()]:
        chain = (link or {}).get("chain") or []
        if len(chain) > 2:
            up = uplinks.setdefault(chain[1], {"link": None, "below": []})
            up["below"].append(name)
    for addr, up in uplinks.items():
        up["link"] = pci_link(sysfs_root, addr, slots)
    return {"hcas": hcas, "gpus": gpus, "affinity": affinity, "acs": acs, "uplinks": uplinks}


def hca_identity(root: str, addresses: list) -> dict:
    """For each expected HCA PCI address: {"device": RDMA name or None, "on_pci": bool,
    "slot": name or None, "driver": bound driver or None}. Names shift when a card fails to
    probe (mlx5_7 becomes mlx5_6); the PCI address and slot do not."""
    sysfs_root = os.path.join(root, "sys")
    by_addr = {hca_pci_address(sysfs_root, n): n for n in list_devices(sysfs_root)}
    slots = pci_slots(sysfs_root)
    out = {}
    for addr in addresses:
        addr = addr.lower()
        base = os.path.join(sysfs_root, "bus/pci/devices", addr)
        driver = os.path.join(base, "driver")
        out[addr] = {"device": by_addr.get(addr), "on_pci": os.path.exists(base),
                     "slot": slots.get(addr.rsplit(".", 1)[0]),
                     "driver": os.path.basename(os.path.realpath(driver))
                     if os.path.lexists(driver) else None}
    return out


def verbs_devices(root: str) -> dict:
    """{RDMA device: {"uverbs": "uverbsN" or None, "node": bool}}: the verbs character device
    each HCA has (/sys/class/infiniband_verbs/uverbsN/ibdev names its device) and whether
    /dev/infiniband/uverbsN exists. A process needs it to open the HCA at all. {} when there
    is no /dev/infiniband (this check runs where the host's /dev is not: not judged)."""
    sysfs_root = os.path.join(root, "sys")
    cls = os.path.join(sysfs_root, "class/infiniband_verbs")
    mapped = {}
    for entry in _listdir(cls):
        ibdev = read(os.path.join(cls, entry, "ibdev"))
        if entry.startswith("uverbs") and ibdev:
            mapped[ibdev] = entry
    if not os.path.isdir(os.path.join(root, "dev/infiniband")):
        return {}  # no /dev/infiniband here at all (a container without it): nothing to judge
    return {name: {"uverbs": mapped.get(name),
                   "node": bool(mapped.get(name)) and os.path.exists(
                       os.path.join(root, "dev/infiniband", mapped[name]))}
            for name in list_devices(sysfs_root)}


def bond_members(sysfs_root: str, bond: str) -> list:
    """The interfaces enslaved to ``bond``: bonding/slaves ("ens1f0np0 ens1f1np1"), else its
    lower_<if> links."""
    net = os.path.join(sysfs_root, "class/net", bond)
    text = read(os.path.join(net, "bonding/slaves"))
    if text:
        return text.split()
    lower = sorted(n[len("lower_"):] for n in _listdir(net) if n.startswith("lower_"))
    if lower:
        return lower
    return [n for n in list_netdevs(sysfs_root) if n != bond and bond_of(sysfs_root, n) == bond]


def roce_datapath(sysfs_root: str, device: str, port: dict) -> dict:
    """The netdevs RoCE traffic of one port really crosses: the VLANs on top (the netdevs of
    its GIDs other than the port's own: a RoCE GID per VLAN address) and, for a bond (RoCE
    LAG), each member below. MTU matters on all of them; PFC is set on the physical ports."""
    netdev = port.get("netdev")
    vlans = sorted({g["netdev"] for g in port.get("gids") or []
                    if g.get("netdev") and g["netdev"] != netdev})
    members = bond_members(sysfs_root, netdev) if netdev and port.get("bond") == netdev else []
    return {"netdev": netdev, "vlans": vlans, "members": members,
            "link_layer": port.get("link_layer")}


MELLANOX_VENDOR = "0x15b3"


def cards_without_rdma(root: str) -> list:
    """Mellanox/NVIDIA network functions on PCI (vendor 0x15b3, class Ethernet 0x0200xx or
    InfiniBand 0x0207xx, not a virtual function) that no RDMA device sits on: a card that did
    not probe. [{address, slot, driver}]. Only a hint for naming a missing card: an
    Ethernet-only ConnectX (a management NIC) is legitimate on its own."""
    sysfs_root = os.path.join(root, "sys")
    devs = os.path.join(sysfs_root, "bus/pci/devices")
    used = {hca_pci_address(sysfs_root, n) for n in list_devices(sysfs_root)}
    slots = None
    out = []
    for addr in sorted(_listdir(devs)):
        if addr in used or read(os.path.join(devs, addr, "vendor")) != MELLANOX_VENDOR:
            continue
        if not (read(os.path.join(devs, addr, "class")) or "").startswith(("0x0200", "0x0207")):
            continue
        if os.path.lexists(os.path.join(devs, addr, "physfn")):
            continue
        slots = pci_slots(sysfs_root) if slots is None else slots
        driver = os.path.join(devs, addr, "driver")
        out.append({"address": addr, "slot": slots.get(addr.rsplit(".", 1)[0]),
                    "driver": os.path.basename(os.path.realpath(driver))
                    if os.path.lexists(driver) else None})
    return out


# -- PCIe AER: the kernel's per-device error counters --------------------------------------------
# /sys/bus/pci/devices/<addr>/aer_dev_{correctable,nonfatal,fatal} (drivers/pci/pcie/aer.c,
# Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, kernel 4.19+): one "NAME COUNT"
# line per error kind the AER capability defines ("RxErr 0", "BadTLP 3", "CmpltTO 1", ...),
# then "TOTAL_ERR_COR N" / "TOTAL_ERR_NONFATAL N" / "TOTAL_ERR_FATAL N". The counts start when
# the device is enumerated (boot or hot-plug) and only grow. A device without the AER
# capability, an older kernel or a VM has no such files.
AER_CLASSES = {"correctable": ("aer_dev_correctable", "TOTAL_ERR_COR"),
               "nonfatal": ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
               "fatal": ("aer_dev_fatal", "TOTAL_ERR_FATAL")}


def parse_aer(text: str | None) -> dict | None:
    """One aer_dev_* file -> {"total": N, "kinds": {name: count > 0}}; None when unreadable.
    The TOTAL_ERR_* line is the total; without it, the sum of the kinds."""
    if text is None:
        return None
    total, kinds = None, {}
    for line in text.splitlines():
        words = line.split()
        if len(words) != 2 or not words[1].isdigit():
            continue
        if words[0].startswith("TOTAL_ERR_"):
            total = int(words[1])
        elif int(words[1]):
            kinds[words[0]] = int(words[1])
    if total is None and not kinds and not text.strip():
        return None
    return {"total": sum(kinds.values()) if total is None else total, "kinds": kinds}


def aer_counts(sysfs_root: str, addresses: list) -> dict:
    """{address: {"correctable"|"nonfatal"|"fatal": parse_aer(...)}} for the PCI functions
    that have AER statistics; a function without them is left out."""
    out = {}
    for addr in addresses:
        base = os.path.join(sysfs_root, "bus/pci/devices", addr)
        counts = {cls: parse_aer(read(os.path.join(base, name)))
                  for cls, (name, _total) in AER_CLASSES.items()}
        if any(v is not None for v in counts.values()):
            out[addr] = {cls: v for cls, v in counts.items() if v is not None}
    return out


# -- NVIDIA kernel module vs user-space driver ---------------------------------------------------
# The user-space driver's libraries are named by their version (libnvidia-ml.so.580.159.04;
# libnvidia-ml.so.1 links to it, as the driver's installer and packages lay them out). NVML and
# CUDA refuse a kernel module of another version ("Failed to initialize NVML: Driver/library
# version mismatch"): the driver was upgraded and the old module is still loaded.

_NVML_LIB = re.compile(r"^libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$")


def nvidia_userspace(root: str) -> dict:
    """{"version": str|None, "path": str|None}: the user-space driver's version from the
    libnvidia-ml.so.1 link in the root's library directories; None when not found."""
    for d in LIB_DIRS:
        link = os.path.join(root, d, "libnvidia-ml.so.1")
        try:
            target = os.readlink(link)
        except OSError:
            continue
        m = _NVML_LIB.match(os.path.basename(target))
        if m:
            return {"version": m.group(1), "path": "/" + os.path.join(d, os.path.basename(target))}
    return {"version": None, "path": None}
