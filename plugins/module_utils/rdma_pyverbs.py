# Copyright: rdmaprov developers
# Apache-2.0
"""RDMA facts through pyverbs (rdma-core's Python binding of libibverbs): the verbs' own view of
each port (state, active MTU, LID, GID table and GID types), which sysfs only approximates.
sysfs still supplies what verbs do not report: board_id, hca_type, netdevs, bonds, counters.

pyverbs is imported lazily and passed in as a namespace, so the unit tests can drive this code
with a stand-in that behaves like pyverbs (PyverbsRDMAError on a kernel without uverbs).
"""

from __future__ import annotations

import ipaddress

from ansible_collections.rdmaprov.cluster.plugins.module_utils import rdma_sysfs

# libibverbs enums (infiniband/verbs.h): ibv_port_state, ibv_mtu, link layer, speeds, widths.
_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
_MTUS = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
_LINK_LAYERS = {0: "InfiniBand", 1: "InfiniBand", 2: "Ethernet"}  # 0 = unspecified = IB
# Per-lane Gb/s as the kernel's sysfs rate attribute counts them (SDR 2.5 ... XDR 200).
_SPEEDS = {1: 2.5, 2: 5, 4: 10, 8: 10, 16: 14, 32: 25, 64: 50, 128: 100, 256: 200}
_WIDTHS = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
# ibv_query_gid_type answers the sysfs flavour: 0 = "IB/RoCE v1", 1 = "RoCE v2".
_GID_TYPES = {0: "IB/RoCE v1", 1: "RoCE v2"}


class NoRdma(Exception):
    """pyverbs cannot list devices: this kernel (or container) has no usable RDMA."""


def load():
    """The pyverbs modules this code needs, or None when pyverbs is not installed."""
    try:
        from pyverbs import device
        from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
    except ImportError:
        return None
    return {"device": device, "PyverbsRDMAError": PyverbsRDMAError, "PyverbsError": PyverbsError}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def format_gid(value) -> str:
    """Any spelling of a GID -> the eight zero-padded groups sysfs prints (%pI6)."""
    packed = ipaddress.IPv6Address(_text(value).strip()).packed
    return ":".join(packed[i:i + 2].hex() for i in range(0, 16, 2))


def format_guid(value) -> str | None:
    """node_guid as sysfs prints it (four colon-separated 16-bit groups)."""
    if value is None:
        return None
    if isinstance(value, int):
        text = f"{value:016x}"
        return ":".join(text[i:i + 4] for i in range(0, 16, 4))
    return _text(value)


def rate_gbps(speed: int, width: int) -> int | float | None:
    if speed not in _SPEEDS or width not in _WIDTHS:
        return None
    value = _SPEEDS[speed] * _WIDTHS[width]
    return int(value) if float(value).is_integer() else value


def list_devices(pv) -> list[str]:
    """Device names; NoRdma when the verbs layer is missing (PyverbsRDMAError on listing)."""
    try:
        devices = pv["device"].get_device_list()
    except pv["PyverbsRDMAError"] as exc:
        raise NoRdma(f"no RDMA support in this kernel (pyverbs could not list devices: {exc})") \
            from exc
    return [_text(d.name) for d in devices]


def _port(ctx, pv, port: int, sysfs_port: dict) -> dict:
    attr = ctx.query_port(port)
    link_layer = _LINK_LAYERS.get(getattr(attr, "link_layer", 1), "InfiniBand")
    gids = []
    for index in range(getattr(attr, "gid_tbl_len", 0)):
        try:
            gid = format_gid(ctx.query_gid(port, index).gid)
        except (pv["PyverbsRDMAError"], pv["PyverbsError"], ValueError):
            continue  # an unpopulated RoCE GID entry answers EINVAL
        if rdma_sysfs.gid_kind(gid) in ("zero", "invalid"):
            continue
        try:
            raw = _GID_TYPES.get(ctx.query_gid_type(port, index))
        except (pv["PyverbsRDMAError"], pv["PyverbsError"]):
            raw = None
        entry = {"index": index, "gid": gid,
                 "type": rdma_sysfs.normalise_gid_type(raw, link_layer)}
        ndev = next((g.get("netdev") for g in sysfs_port.get("gids", [])
                     if g["index"] == index and g.get("netdev")), None)
        if ndev:
            entry["netdev"] = ndev
        gids.append(entry)
    phys = getattr(attr, "phys_state", None)
    lid = getattr(attr, "lid", 0)
    facts = {
        "port": port,
        "state": _STATES.get(attr.state, str(attr.state)),
        "phys_state": rdma_sysfs.PHYS_STATES.get(phys, sysfs_port.get("phys_state")),
        "rate_gbps": rate_gbps(getattr(attr, "active_speed", 0), getattr(attr, "active_width", 0))
        or sysfs_port.get("rate_gbps"),
        "link_layer": link_layer,
        "active_mtu": _MTUS.get(attr.active_mtu),
        "lid": lid if link_layer == "InfiniBand" else None,
        "netdev": sysfs_port.get("netdev"),
        "gids": gids,
    }
    for extra in ("bond", "netdev_mtu", "counters", "hw_counters", "path_mtu", "admin_down"):
        facts[extra] = sysfs_port.get(extra, {} if extra.endswith("counters") else None)
    return facts


def read_device(pv, name: str, sysfs_root: str = "/sys") -> dict:
    sysfs = rdma_sysfs.read_device(sysfs_root, name)
    sysfs_ports = {p["port"]: p for p in sysfs["ports"]}
    with pv["device"].Context(name=name) as ctx:
        attr = ctx.query_device()
        ports = [_port(ctx, pv, n, sysfs_ports.get(n, {}))
                 for n in range(1, attr.phys_port_cnt + 1)]
        fw_ver = _text(attr.fw_ver) if getattr(attr, "fw_ver", None) else sysfs["fw_ver"]
        guid = format_guid(getattr(attr, "node_guid", None)) or sysfs["node_guid"]
    return {"name": name, "fw_ver": fw_ver, "board_id": sysfs["board_id"],
            "node_guid": guid, "hca_type": sysfs["hca_type"], "ports": ports}


def collect(pv, sysfs_root: str = "/sys", run=None) -> dict:
    """The `rdma` fact through pyverbs; NoRdma when the kernel has no verbs support."""
    names = list_devices(pv)
    facts = {"kernel": rdma_sysfs.kernel_support(sysfs_root)}
    facts.update(rdma_sysfs.stack_versions(run))
    facts["source"] = "pyverbs" if names else "none"
    facts["devices"] = [read_device(pv, name, sysfs_root) for name in names]
    facts["gpus"] = rdma_sysfs.gpu_summary(sysfs_root)
    return facts


class PyverbsMissing(Exception):
    """use_pyverbs=yes on a host without pyverbs."""


def gather(sysfs_root: str = "/sys", use_pyverbs: str = "auto", run=None, loader=load) -> dict:
    """The `rdma` fact: pyverbs first when allowed and importable, sysfs otherwise.

    use_pyverbs: "yes" (pyverbs or PyverbsMissing), "no" (sysfs only), "auto" (pyverbs when
    importable and sysfs_root is the real /sys: pyverbs always reads the running kernel, so a
    fixture tree must not be mixed with it).
    """
    if use_pyverbs == "no" or (use_pyverbs == "auto" and sysfs_root.rstrip("/") != "/sys"):
        return rdma_sysfs.collect(sysfs_root, run)
    pv = loader()
    if pv is None:
        if use_pyverbs == "yes":
            raise PyverbsMissing("use_pyverbs=yes but pyverbs is not importable "
                                 "(install python3-pyverbs / rdma-core's python bindings)")
        return rdma_sysfs.collect(sysfs_root, run)
    try:
        return collect(pv, sysfs_root, run)
    except NoRdma as exc:
        facts = rdma_sysfs.collect(sysfs_root, run)
        facts["kernel"] = {**facts["kernel"], "uverbs": False, "reason": str(exc)}
        # The verbs layer is unusable, so whatever sysfs lists cannot carry NCCL traffic.
        facts["source"] = "sysfs" if facts["devices"] else "none"
        return facts


def module_runner(module):
    """The read-only command runner gather() takes, on an AnsibleModule: a missing tool is an
    answer (rc 127, "not installed"), not an error."""
    import subprocess

    def run(argv):
        if not module.get_bin_path(argv[0]):
            return 127, ""
        try:
            rc, out, _err = module.run_command(argv, environ_update={"LC_ALL": "C"})
        except (OSError, subprocess.SubprocessError):
            return 127, ""
        return rc, out

    return run
