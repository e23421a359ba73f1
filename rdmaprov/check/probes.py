"""Read this node's state for ``rdmaprov check``: files under /sys and /proc, getrlimit, and
(for RoCE QoS only) ``mlnx_qos``/``dcb`` with a short timeout. Nothing here writes anything.

Every reader takes ``root`` so that unit tests hand it a fake tree. The result is one plain
dict (``NodeState``) that rdmaprov.check.judge compares with the expectations.

RDMA ports come in the rdma_facts contract's shape (docs/CONTRACTS.md), read by the collection's
own sysfs reader (plugins/module_utils/rdma_sysfs.py, what the rdma_facts module runs), through
its sysfs-only functions: no version tools, so no subprocess and no delay.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from pathlib import Path
from typing import Any

from rdmaprov import collection
from rdmaprov.check.expect import PEERMEM_MODULES, Expectations

# A prolog must not hang on a wedged driver: each external tool gets this long.
TOOL_TIMEOUT_S = 1.5


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def root_problem(root: str = "/") -> str | None:
    """Why ``root`` is not a node's root, or None. A root has sys/ and proc/, and at least one of
    sys/class/net and proc/modules reads (every kernel has netdevs; the lab's has no
    /proc/modules). A wrong --sysroot (a container whose host mount is missing) must be a
    configuration error, not "no RDMA devices": that would drain every node."""
    base = Path(root)
    missing = [d for d in ("sys", "proc") if not (base / d).is_dir()]
    if missing:
        gone = " and no ".join(m + "/" for m in missing)
        return f"--sysroot {root}: not a node's root (no {gone})"
    try:
        next(iter((base / "sys/class/net").iterdir()), None)
        return None
    except OSError:
        pass
    if _read(base / "proc/modules") is not None:
        return None
    return (f"--sysroot {root}: not a node's root (neither sys/class/net nor proc/modules "
            "can be read)")


def rdma(root: str = "/") -> dict[str, Any]:
    """{kernel: {uverbs, reason, modules}, source, devices: [{name, ports: [...]}]} (contract
    shape), read the way the rdma_facts module reads it."""
    sysfs = collection.rdma_sysfs
    sys_root = str(Path(root) / "sys")
    kernel = sysfs.kernel_support(sys_root)
    devices: list[dict[str, Any]] = []
    full = [sysfs.read_device(sys_root, name) for name in sysfs.list_devices(sys_root)]
    for dev in full:
        # The LID (InfiniBand: the SM's) and a RoCE port's GIDs (its routable addresses)
        # are read by read_port anyway; the judge needs them for an ACTIVE port's health.
        ports = [{**{key: p[key] for key in ("port", "state", "phys_state", "rate_gbps",
                                             "link_layer", "netdev", "admin_down", "lid")},
                  **({"gids": p["gids"], "enslaved": bool(p.get("netdev")) and os.path.lexists(
                      os.path.join(sys_root, "class/net", p["netdev"], "master"))}
                     if p.get("link_layer") == "Ethernet" else {})}
                 for p in dev["ports"]]
        if ports:
            # The card's model and whether it is an SR-IOV VF: what makes ports peers (rails).
            vf = os.path.lexists(os.path.join(sys_root, "class/infiniband", dev["name"],
                                              "device/physfn"))
            devices.append({"name": dev["name"], "board_id": dev.get("board_id"),
                            "fw_ver": dev.get("fw_ver"),
                            "hca_type": dev.get("hca_type"), "vf": vf, "ports": ports})
    # Error counters per port ({"dev/port": {state, counters}}), for the judgement over time.
    counters = collection.link_counters.snapshot(full)
    # The netdevs RoCE traffic crosses besides the port's own: VLANs on top, bond members below.
    datapath = {f"{dev['name']}/{p['port']}": sysfs.roce_datapath(sys_root, dev["name"], p)
                for dev in full for p in dev["ports"] if p.get("link_layer") == "Ethernet"}
    return {"kernel": kernel, "source": "sysfs" if devices else "none", "devices": devices,
            "counters": counters, "datapath": datapath}


def modules(names: list[str], root: str = "/") -> dict[str, dict[str, str]]:
    """{module: {name, state: loaded|builtin|absent, evidence}}: kernel_caps.module_status,
    the answer probe, status and the rdma_modules role give too."""
    caps = collection.kernel_caps
    return {n: caps.module_status(n, root) for n in names}


def module_support(root: str = "/") -> dict[str, Any]:
    """{can_load, reason, by}: whether modules can be loaded here (kernel_caps.module_loading)."""
    caps = collection.kernel_caps
    return dict(caps.module_loading(root, caps.kernel_release(root)))


def gpus(root: str = "/") -> dict[str, Any]:
    return dict(collection.kernel_caps.gpus(root))


def mtus(interfaces: list[str], root: str = "/") -> dict[str, int | None]:
    """{interface: MTU or None when the interface does not exist}."""
    out: dict[str, int | None] = {}
    for name in interfaces:
        text = _read(Path(root) / "sys/class/net" / name / "mtu")
        out[name] = int(text) if text and text.isdecimal() else None
    return out


def memlock() -> int | None:
    """This process's RLIMIT_MEMLOCK soft limit in bytes, None for unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else int(soft)


SLURM_CONFS = ("etc/slurm/slurm.conf", "etc/slurm-llnl/slurm.conf")


def _limit(text: str) -> int | None:
    return None if text == "unlimited" else int(text)


def slurmd_memlock(root: str = "/") -> dict[str, Any] | None:
    """slurmd's RLIMIT_MEMLOCK {pid, soft, hard} (bytes, None = unlimited) from
    /proc/<pid>/limits of the process whose comm is slurmd; None when no slurmd runs here."""
    proc = Path(root) / "proc"
    try:
        pids = [e.name for e in proc.iterdir() if e.name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        if _read(proc / pid / "comm") != "slurmd":
            continue
        for line in (_read(proc / pid / "limits") or "").splitlines():
            if line.startswith("Max locked memory"):
                words = line.split()
                try:
                    return {"pid": int(pid), "soft": _limit(words[3]), "hard": _limit(words[4])}
                except (IndexError, ValueError):
                    return None
    return None


def memlock_propagated(root: str = "/") -> tuple[bool, str]:
    """(whether srun hands the submitting shell's MEMLOCK limit to the job, where that was
    read). slurm.conf's PropagateResourceLimits defaults to ALL; PropagateResourceLimitsExcept
    =MEMLOCK (or a list without it) makes the job inherit slurmd's own limit."""
    for rel in SLURM_CONFS:
        text = _read(Path(root) / rel)
        if text is None:
            continue
        values: dict[str, str] = {}
        for line in text.splitlines():
            key, _, value = line.split("#", 1)[0].strip().partition("=")
            if key.strip().lower() in ("propagateresourcelimits",
                                       "propagateresourcelimitsexcept"):
                values[key.strip().lower()] = value.strip().upper()
        where = "/" + rel
        if "MEMLOCK" in values.get("propagateresourcelimitsexcept", "").split(","):
            return False, f"{where}: PropagateResourceLimitsExcept=MEMLOCK"
        prop = values.get("propagateresourcelimits", "ALL")
        if prop == "NONE" or (prop != "ALL" and "MEMLOCK" not in prop.split(",")):
            return False, f"{where}: PropagateResourceLimits={prop}"
        return True, f"{where}: PropagateResourceLimits={prop}"
    return True, "no slurm.conf: Slurm's default PropagateResourceLimits=ALL"


def job_memlock(root: str = "/") -> dict[str, Any]:
    """The memlock a job will get, and where that was read: under Slurm, slurmd's limit when
    MEMLOCK is not propagated, else the submitting shell's (unknown here; slurmd's hard limit
    caps it); without slurmd, this process's own limit."""
    slurmd = slurmd_memlock(root)
    if slurmd is None and os.path.realpath(root) != "/":
        # Under --sysroot this process's limit is the checker's, not the root's jobs'.
        return {"bytes": None, "unknown": True, "propagated": None,
                "source": f"no slurmd in {Path(root) / 'proc'}, and this process's own limit "
                          "is not the root's (--sysroot)"}
    if slurmd is None:
        return {"bytes": memlock(), "source": "this process's limit (no slurmd running)",
                "propagated": None}
    propagated, where = memlock_propagated(root)
    limits = f"/proc/{slurmd['pid']}/limits"
    if propagated:
        return {"bytes": slurmd["hard"], "propagated": True,
                "source": f"slurmd's hard limit ({limits}) caps it; {where}: the job gets the "
                          "submitting shell's limit (PropagateResourceLimitsExcept=MEMLOCK "
                          "gives it slurmd's)"}
    return {"bytes": slurmd["soft"], "propagated": False,
            "source": f"slurmd's limit ({limits}; {where})"}


def _tool(argv: list[str]) -> dict[str, Any] | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                           check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"rc": 124, "stdout": "", "stderr": f"{argv[0]}: no answer in {TOOL_TIMEOUT_S} s"}
    return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}


def same_netdev_here(interface: str, root: str) -> bool:
    """Whether ``interface`` of the root is the very netdev this process's network namespace
    has under that name (a check in a container run with the host's network and --sysroot of
    the host's root): the same MAC address (not all zeroes) and, where both read, the same
    ifindex. Then mlnx_qos and dcb, which ask this namespace's kernel, answer for it."""
    def attrs(base: Path) -> tuple[str | None, str | None]:
        net = base / "sys/class/net" / interface
        return _read(net / "address"), _read(net / "ifindex")

    (mac, index), (mac_here, index_here) = attrs(Path(root)), attrs(Path("/"))
    if not mac or mac != mac_here or not mac.strip("0:"):
        return False
    return index is None or index_here is None or index == index_here


def qos(interface: str, root: str = "/") -> dict[str, Any]:
    """PFC/trust state of one RoCE interface, through the roce_qos role's own parser."""
    qos_mod = collection.netcfg_qos
    exists = (Path(root) / "sys/class/net" / interface).exists()
    probe: dict[str, Any] = {"name": interface, "exists": exists}
    if exists and os.path.realpath(root) != "/" and not same_netdev_here(interface, root):
        # mlnx_qos and dcb ask this namespace's kernel, which does not have the root's netdev
        # (same_netdev_here): say so, judge nothing.
        state = dict(qos_mod.qos_state(probe))
        state["reason"] = (f"{interface}: PFC not read under --sysroot (mlnx_qos and dcb read "
                           "the running kernel, not the root's)")
        return state
    if exists:
        mq = _tool(["mlnx_qos", "-i", interface])
        if mq is not None:
            probe["mlnx_qos"] = mq
        if mq is None or mq["rc"] != 0:
            probe["dcb_pfc"] = _tool(["dcb", "-j", "pfc", "show", "dev", interface])
            probe["dcb_app"] = _tool(["dcb", "-j", "-N", "app", "show", "dev", interface])
    return dict(qos_mod.qos_state(probe))


def _memlock_state(root: str) -> dict[str, Any]:
    job = job_memlock(root)
    return {"memlock": job["bytes"], "memlock_source": job["source"],
            "memlock_unknown": bool(job.get("unknown"))}


def gather(exp: Expectations, root: str = "/") -> dict[str, Any]:
    """Everything the judge needs, in one dict (also what ``--json`` shows as ``state``)."""
    from rdmaprov.check.judge import _mtu_interfaces, qos_interfaces

    state: dict[str, Any] = {"rdma": rdma(root)}
    sysfs = collection.rdma_sysfs
    topo = sysfs.pcie_topology(root)
    state.update({
        "module_support": module_support(root),
        "modules": modules(list(dict.fromkeys([*exp.modules, *PEERMEM_MODULES])), root),
        "gpus": gpus(root),
        "nvidia_versions": {"kernel": sysfs.nvidia_module(root)["version"],
                            "user": sysfs.nvidia_userspace(root)},
        "gpudirect": collection.rdma_sysfs.gpudirect(root),
        "pcie": topo,
        # The HCAs' and GPUs' own PCI functions (what the pcie item names), no others.
        "aer": {"counts": sysfs.aer_counts(str(Path(root) / "sys"), [
            *(h["address"] for h in topo["hcas"].values() if h), *topo["gpus"]])},
        "identity": collection.rdma_sysfs.hca_identity(root, exp.hca_pci),
        "verbs": collection.rdma_sysfs.verbs_devices(root),
        "unprobed": collection.rdma_sysfs.cards_without_rdma(root),
        "mtu": mtus(_mtu_interfaces(state, exp), root),
        **_memlock_state(root),
        # DCB tools only when PFC is expected: they are the slow part of a check.
        "qos": {i: qos(i, root) for i in qos_interfaces(state, exp)}
        if exp.pfc_priority is not None else {},
    })
    return state
