"""What a training container needs on this host: `rdmaprov probe --container`.

The exact `docker run` / `podman run` flags (the RDMA CDI device where the engine reads the
spec, else the same edits by hand), the NCCL settings the container gets through the device,
and what a multi-node job adds itself. The spec and the flags come from the collection's
cdi_spec module_util, the one place the role's spec comes from too.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import tomllib
from typing import Any

from rdmaprov import collection

SPEC_PATH = "/etc/cdi/rdmaprov-rdma.yaml"
CONF_PATH = "/etc/nccl.conf"
# What every multi-node job sets itself; NCCL_IB_ENABLE, which popular guides set, does not exist.
JOB_ENV = {
    "MASTER_ADDR": "the address of rank 0's host (torchrun --master-addr)",
    "MASTER_PORT": "a free TCP port on it, the same on every host (torchrun --master-port)",
    "NCCL_DEBUG": "INFO, once: the log then shows 'Using network IB' (not 'Socket')",
}


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


# containers.conf(5): the system files in order, each drop-in directory's *.conf by name; a
# later file's default_ulimits replaces an earlier one's. CONTAINERS_CONF names the one file.
PODMAN_CONF_FILES = ("/usr/share/containers/containers.conf",
                     "/usr/share/containers/containers.conf.d",
                     "/etc/containers/containers.conf", "/etc/containers/containers.conf.d")
DOCKER_DAEMON_JSON = "/etc/docker/daemon.json"
UNLIMITED = "unlimited"


def _kib(value: int) -> int | str:
    return UNLIMITED if value in (-1, resource.RLIM_INFINITY) else int(value) // 1024


def _ulimit_value(text: str) -> int:
    return -1 if text.strip() in ("-1", "unlimited") else int(text)


def podman_conf_files(environ: Any = None, root: str = "/") -> list[str]:
    """The containers.conf files podman reads, in its order (the system ones; root's)."""
    env = os.environ if environ is None else environ
    if env.get("CONTAINERS_CONF"):
        return [env["CONTAINERS_CONF"]]
    out = []
    for entry in PODMAN_CONF_FILES:
        path = os.path.join(root, entry.lstrip("/"))
        if entry.endswith(".d"):
            out += sorted(glob.glob(os.path.join(path, "*.conf")))
        elif os.path.isfile(path):
            out.append(path)
    if env.get("CONTAINERS_CONF_OVERRIDE"):
        out.append(env["CONTAINERS_CONF_OVERRIDE"])
    return out


def _limit(soft: int, hard: int, source: str) -> dict[str, Any]:
    return {"soft_kib": _kib(soft), "hard_kib": _kib(hard), "source": source,
            "unlimited": _kib(soft) == UNLIMITED}


def _own_limit(why: str) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return _limit(soft, hard, why)


def podman_memlock(files: list[str]) -> dict[str, Any]:
    """The locked-memory limit a podman container gets here, from the engine's effective
    configuration: containers.conf's default_ulimits (the last file that sets it), else the
    limit podman itself runs with, which it passes on (this process's, started from the same
    shell). {soft_kib, hard_kib, unlimited, source}; source says where it was read."""
    found, where, bad = None, "", []
    for path in files:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except FileNotFoundError:
            continue
        except (OSError, tomllib.TOMLDecodeError) as exc:
            bad.append(f"{path} unreadable ({getattr(exc, 'strerror', None) or exc})")
            continue
        limits = (doc.get("containers") or {}).get("default_ulimits")
        if isinstance(limits, list):
            found, where = limits, path
    for item in found or []:
        name, _eq, value = str(item).partition("=")
        if name.strip() != "memlock":
            continue
        soft, _colon, hard = value.partition(":")
        try:
            lo = _ulimit_value(soft)
            return _limit(lo, _ulimit_value(hard) if hard else lo,
                          f"default_ulimits {item!s} in {where}")
        except ValueError:
            bad.append(f"{where}: default_ulimits {item!s} is not a limit")
    read = ", ".join(files) or "none there"
    note = f"; {'; '.join(bad)}" if bad else ""
    return _own_limit(f"no memlock in containers.conf's default_ulimits (read: {read}){note}: "
                      "a container gets the limit podman runs with, this shell's")


def docker_memlock(path: str = DOCKER_DAEMON_JSON, proc: str = "/proc") -> dict[str, Any]:
    """The same for docker: daemon.json's default-ulimits.memlock, else dockerd's own limit
    (/proc/PID/limits of the running daemon), which its containers inherit."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        doc, why = {}, f"no {path}"
    except (OSError, ValueError) as exc:
        doc, why = {}, f"{path} unreadable ({getattr(exc, 'strerror', None) or exc})"
    else:
        why = f"no default-ulimits memlock in {path}"
    mem = ((doc.get("default-ulimits") if isinstance(doc, dict) else None) or {}).get("memlock")
    if isinstance(mem, dict) and "Soft" in mem:
        try:
            soft = int(mem["Soft"])
            return _limit(soft, int(mem.get("Hard", soft)), f"default-ulimits memlock in {path}")
        except (TypeError, ValueError):
            why = f"{path}: default-ulimits memlock is not a limit"
    for comm in glob.glob(os.path.join(proc, "[0-9]*", "comm")):
        try:
            with open(comm) as fh:
                if fh.read().strip() != "dockerd":
                    continue
            with open(os.path.join(os.path.dirname(comm), "limits")) as fh:
                row = next(line for line in fh if line.startswith("Max locked memory"))
        except (OSError, StopIteration):
            continue
        soft_text, hard_text = row.split()[3:5]
        return _limit(_ulimit_value(soft_text), _ulimit_value(hard_text),
                      f"{why}: a container gets dockerd's own limit "
                      f"(pid {os.path.basename(os.path.dirname(comm))})")
    return {"soft_kib": None, "hard_kib": None, "unlimited": False,
            "source": f"{why}, and dockerd is not running: its limit cannot be read"}


def memlock_line(engine: str, m: dict[str, Any]) -> str:
    """One line of what a container of ``engine`` gets, and what to do when not unlimited."""
    if m["soft_kib"] is None:
        return f"{engine}: unknown ({m['source']})"
    value = ("unlimited" if m["unlimited"]
             else f"{m['soft_kib']} KiB (hard {m['hard_kib']}"
             + (" KiB)" if m["hard_kib"] != UNLIMITED else ")"))
    fix = ("" if m["unlimited"] else "; RDMA needs unlimited: run bootstrap with "
           "container_runtime_memlock: unlimited, or give the job --ulimit memlock=-1:-1")
    return f"{engine}: {value}: {m['source']}{fix}"


def advice(sysfs_root: str = "/sys", spec_path: str = SPEC_PATH,
           conf_path: str = CONF_PATH) -> dict[str, Any]:
    cdi = collection.cdi_spec
    crp = collection.container_runtime_probe
    root = os.path.dirname(os.path.abspath(sysfs_root))
    dev_root = os.path.join(root, "dev") if os.path.basename(sysfs_root.rstrip("/")) == "sys" \
        and root != "/" else "/dev"
    facts = cdi.read_facts(sysfs_root, dev_root, conf_path)
    current = _read(spec_path)
    planned = cdi.plan(facts, {"conf_path": conf_path, "current": current, "path": spec_path})
    found = crp.engines()
    gpus = len(glob.glob("/proc/driver/nvidia/gpus/*"))
    engines = {}
    for name in ("docker", "podman"):
        version = (found.get(name) or {}).get("version")
        flags, why = cdi.run_flags(name, version, planned, current is not None, gpus)
        engines[name] = {"installed": name in found, "version": version,
                         "argv": [name, "run", *flags, "IMAGE"], "why": why}
        if name in found:
            engines[name]["memlock"] = (podman_memlock(podman_conf_files()) if name == "podman"
                                        else docker_memlock())
    return {"spec": spec_path, "installed": current is not None, "drift": planned["drift"],
            "report": planned["report"], "gpus": gpus, "engines": engines,
            "nccl_conf": facts["nccl_conf"], "job_env": JOB_ENV}
