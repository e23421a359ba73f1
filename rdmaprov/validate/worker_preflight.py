"""The worker's node preflight: the usual reasons NCCL falls back to Socket (what this host or
image offers NCCL's IB transport) and what torch offers, read before NCCL starts (worker.py
--preflight, and each rank's document).

Standard library only (torch where it is asked about); copied beside worker.py
(rdmaprov.validate.slurm.worker_files()).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # from the rdmaprov package (tests, python -m)
    from . import worker_base as base
else:  # a file beside worker.py on a host or in an image, where rdmaprov is not installed
    import worker_base as base

PREFLIGHT_SCHEMA = "rdmaprov.validate.preflight/1"


def _can_load(names: tuple[str, ...]) -> str | None:
    """The first of these shared libraries this process can dlopen, or None."""
    import ctypes

    for name in names:
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            continue
    return None


def _verbs_device_count(name: str) -> int | None:
    """How many devices libibverbs lists (ibv_get_device_list): a device appears only when a
    provider for it loads, so fewer than /sys/class/infiniband has means a missing provider."""
    import ctypes

    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    count = ctypes.c_int(0)
    lib.ibv_get_device_list.restype = ctypes.c_void_p
    lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.ibv_free_device_list.argtypes = [ctypes.c_void_p]
    devices = lib.ibv_get_device_list(ctypes.byref(count))
    if not devices:
        return 0
    lib.ibv_free_device_list(devices)
    return int(count.value)


def _ib_ports(root: str = base._SYS_IB) -> list[dict[str, Any]]:
    return list(base._ports().ports(root, with_counters=False))


def hca_filter_matches(spec: str, devices: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Which (device, port) NCCL_IB_HCA selects, following NCCL's syntax: comma-separated
    names with optional :port; a leading '^' excludes the listed ones, a leading '=' asks
    for exact names (otherwise a name matches every device it is a prefix of)."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    spec = spec.lstrip("=")
    wanted = []
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, _, port = item.partition(":")
        wanted.append((name, int(port) if port.isdecimal() else None))

    def hit(dev: str, port: int) -> bool:
        return any((dev == n if exact else dev.startswith(n)) and (p is None or p == port)
                   for n, p in wanted)

    return [(d, p) for d, p in devices if hit(d, p) != exclude]


# NCCL's own file, read after the user's (NCCL_CONF_FILE, else ~/.nccl.conf); a variable
# already set wins over both (NCCL sets none it finds set).
NCCL_SYSTEM_CONF = "/etc/nccl.conf"
_CONF_MAX = 65536  # a settings file is a few lines; more is not one


def nccl_seen(environ: Any = None) -> dict[str, Any]:
    """What NCCL would take its settings from in this process: its NCCL_* environment and the
    text of each file NCCL reads, in NCCL's order (``files``: [[path, text or None]], the
    user's first, then /etc/nccl.conf). The judge reads them with the collection's one
    nccl.conf reader (rdmaprov.validate.nccl_settings.worker_applied)."""
    env = os.environ if environ is None else environ
    user = env.get("NCCL_CONF_FILE") or os.path.join(os.path.expanduser("~"), ".nccl.conf")
    files = []
    for path in dict.fromkeys((user, NCCL_SYSTEM_CONF)):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                files.append([path, fh.read(_CONF_MAX)])
        except OSError:
            files.append([path, None])
    return {"env": {k: v for k, v in sorted(env.items()) if k.startswith("NCCL_")},
            "files": files}


def preflight(root: str = base._SYS_IB, dev: str = "/dev/infiniband") -> dict[str, Any]:
    """What this host (or container) offers NCCL's IB transport, and what stands in its way.

    ``problems`` are one-line causes that make NCCL fall back to Socket or run without GDR;
    the verdict quotes them when NCCL's log shows the fallback.
    """
    import resource

    problems: list[str] = []
    verbs = _can_load(("libibverbs.so.1", "libibverbs.so"))
    if verbs is None:
        problems.append("no libibverbs.so.1 in this image/host: NCCL cannot use IB")
    uverbs = sorted(d for d in (os.listdir(dev) if os.path.isdir(dev) else [])
                    if d.startswith("uverbs"))
    if not uverbs:
        problems.append(f"no {dev}/uverbs*: RDMA devices not passed in "
                        "(container: --device /dev/infiniband) or none on the host")
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    memlock = "unlimited" if soft == resource.RLIM_INFINITY else soft
    if memlock != "unlimited":
        problems.append(f"ulimit -l is {soft // 1024} KiB, not unlimited "
                        "(container: --ulimit memlock=-1)")
    ports = _ib_ports(root)
    hcas = sorted(os.listdir(root)) if os.path.isdir(root) else []
    verbs_devices = _verbs_device_count(verbs) if verbs and hcas else None
    if verbs_devices is not None and verbs_devices < len(hcas):
        problems.append(f"libibverbs lists {verbs_devices} of {len(hcas)} HCA(s): no provider "
                        "for the others in this image/host")
    active = [(p["device"], p["port"]) for p in ports if p["state"] == "ACTIVE"]
    if not ports:
        problems.append(f"no RDMA device in {root}")
    elif not active:
        problems.append("no ACTIVE RDMA port")
    if os.environ.get("NCCL_IB_DISABLE", "0").strip() not in ("", "0"):
        problems.append(f"NCCL_IB_DISABLE={os.environ['NCCL_IB_DISABLE']} turns IB off")
    hca = os.environ.get("NCCL_IB_HCA")
    if hca and active and not hca_filter_matches(hca, active):
        problems.append(f"NCCL_IB_HCA={hca} matches no ACTIVE port "
                        f"({', '.join(f'{d}:{p}' for d, p in active)})")
    peermem = next((m for m in ("nvidia_peermem", "nv_peer_mem")
                    if os.path.isdir(f"/sys/module/{m}")), None)
    return {
        "hostname": socket.gethostname(),
        "libibverbs": verbs,
        "librdmacm": _can_load(("librdmacm.so.1", "librdmacm.so")),
        "uverbs_devices": uverbs,
        "hcas": hcas,
        "verbs_devices": verbs_devices,
        "memlock": memlock,
        "ports": ports,
        "nccl_ib_disable": os.environ.get("NCCL_IB_DISABLE"),
        "nccl_ib_hca": hca,
        # GDR needs peermem, or DMA-BUF (newer kernels and drivers), which NCCL logs itself.
        "peermem_module": peermem,
        # The NCCL settings this process gives NCCL: the job's path is judged from them.
        "nccl": nccl_seen(),
        "problems": problems,
    }


def _versions(torch: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "nccl": None}
    if torch.cuda.is_available():
        # A build without NCCL raises here; the key then stays null.
        with contextlib.suppress(Exception):
            out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    return out


def preflight_document(backend: str) -> dict[str, Any]:
    """The image preflight (--preflight): preflight() plus what torch offers here. Run by the
    role in the very container (or host) the run will use, before anything is timed."""
    return {"schema": PREFLIGHT_SCHEMA, "hostname": socket.gethostname(), "backend": backend,
            "preflight": preflight(), "torch": _torch_facts(backend)}


def _torch_facts(backend: str) -> dict[str, Any]:
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install's OSError
        return {"error": base.one_line(exc), "version": None}
    out: dict[str, Any] = {"error": None, "version": torch.__version__, "libuv": _has_libuv()}
    if backend == "nccl":
        out["cuda_devices"] = torch.cuda.device_count()
        out.update({k: v for k, v in _versions(torch).items() if k in ("cuda", "nccl")})
    return out


def _has_libuv() -> bool | None:
    """Can this torch make a libuv TCPStore (what torchrun's rendezvous asks for)? Distribution
    builds without libuv (Debian 13's python3-torch) cannot. None when it cannot be told."""
    try:
        from torch.distributed import TCPStore

        TCPStore("127.0.0.1", 0, 1, True, timeout=_dt.timedelta(seconds=5),
                 wait_for_workers=False, use_libuv=True)
    except Exception as exc:
        return False if "libuv" in str(exc) else None
    return True


def _safe_preflight() -> dict[str, Any] | None:
    try:
        return preflight()
    except Exception:  # an error report must not fail on its own extras
        return None
