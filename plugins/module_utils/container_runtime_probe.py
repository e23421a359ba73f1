# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Read-only probe of what a host offers containers (module container_runtime_probe): engines,
GPUs, RDMA devices, locked memory, and the filesystem under podman's storage. Changes nothing: the
memlock test raises the limit in a forked child that exits at once."""
from __future__ import annotations

import glob
import os
import resource
import shutil
import subprocess

from ansible_collections.rdmaprov.cluster.plugins.module_utils import cdi_spec

INF = resource.RLIM_INFINITY
CAP_SYS_RESOURCE = 24


def run(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def kib(value):
    return "unlimited" if value == INF else value // 1024


def can_raise_memlock():
    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (INF, INF))
            os._exit(0)
        except (ValueError, OSError):
            os._exit(1)
    _pid, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def has_cap(bit):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except OSError:
        pass
    return False


# How engines() asks each engine its version: docker's daemon (docker's client answers without
# a daemon only for the client part, so a docker without its daemon is not usable), podman's
# and enroot's own.
VERSION_ARGV = {"docker": ["docker", "version", "--format", "{{.Server.Version}}"],
                "podman": ["podman", "version", "--format", "{{.Client.Version}}"],
                "enroot": ["enroot", "version"]}


def engine(name, argv=None, ask=None, which=None):
    """One container engine here, the one reader of them (engines() below, and node_state's
    runtime for `rdmaprov status`): {path, version, usable}, or None where ``which``
    (shutil.which by default) does not find it. ``argv`` asks its version (VERSION_ARGV's by
    default) through ``ask`` (run above by default: stdout, or None when the command fails);
    usable when it answered."""
    path = (which or shutil.which)(name)
    if not path:
        return None
    version = (ask or run)(argv or VERSION_ARGV[name])
    return {"path": path, "version": version, "usable": version is not None}


def engines():
    out = {}
    for name in ("docker", "podman", "enroot"):
        found = engine(name)
        if found:
            out[name] = found
    return out


def pids_controller():
    for path in ("/sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup/unified/cgroup.controllers"):
        try:
            with open(path) as f:
                return "pids" in f.read().split()
        except OSError:
            continue
    return os.path.isdir("/sys/fs/cgroup/pids")


def mount_of(path):
    """(mount point, filesystem type) of the filesystem that holds path (or its nearest parent
    that exists), from /proc/self/mountinfo; the last of stacked mounts wins."""
    path = os.path.realpath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    best = ("/", "unknown")
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                point = fields[4].replace("\\040", " ")
                fstype = fields[fields.index("-") + 1]
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[0]):
                    best = (point, fstype)
    except (OSError, ValueError, IndexError):
        pass
    return best


def storage_conf(path):
    """The [storage] keys of a containers-storage storage.conf that decide the driver."""
    out = {"path": path, "exists": os.path.isfile(path)}
    section = ""
    try:
        with open(path) as f:
            for line in f:
                text = line.split("#", 1)[0].strip()
                if text.startswith("["):
                    section = text.strip("[] ")
                elif section == "storage" and "=" in text:
                    key, value = (x.strip() for x in text.split("=", 1))
                    if key in ("driver", "graphroot", "runroot"):
                        out[key] = value.strip("\"'")
    except OSError:
        pass
    return out


def storage(conf_path):
    """Where podman keeps images, on which filesystem, and the driver that works there: podman's
    overlay driver cannot stack on overlayfs (a container's or live image's root)."""
    conf = storage_conf(conf_path)
    graphroot = conf.get("graphroot") or "/var/lib/containers/storage"
    point, fstype = mount_of(graphroot)
    fuse = shutil.which("fuse-overlayfs") if os.path.exists("/dev/fuse") else None
    if fstype != "overlay":
        auto, why = "", f"{graphroot} is on {fstype} ({point})"
    elif fuse:
        auto, why = "fuse-overlayfs", (f"{graphroot} is on overlayfs ({point}), where podman's "
                                       f"overlay driver cannot work; {fuse} is installed")
    else:
        auto, why = "vfs", (f"{graphroot} is on overlayfs ({point}), where podman's overlay "
                            "driver cannot work, and fuse-overlayfs is not installed")
    return {"conf": conf, "graphroot": graphroot, "mount": point, "fstype": fstype,
            "fuse_overlayfs": fuse, "auto_driver": auto, "auto_why": why}


def probe(conf_path="/etc/containers/storage.conf"):
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    gpus = sorted(glob.glob("/proc/driver/nvidia/gpus/*")) or sorted(glob.glob("/dev/nvidia[0-9]*"))
    ib = sorted(glob.glob("/dev/infiniband/*"))
    doc = {
        "engines": engines(),
        "nvidia": {
            "gpus": len(gpus),
            "driver": os.path.isdir("/proc/driver/nvidia"),
            "ctk": shutil.which("nvidia-ctk"),
            "peermem": os.path.isdir("/sys/module/nvidia_peermem"),
        },
        "infiniband_devices": ib,
        "memlock": {
            "soft_kib": kib(soft),
            "hard_kib": kib(hard),
            "unlimited": soft == INF and hard == INF,
            "cap_sys_resource": has_cap(CAP_SYS_RESOURCE),
            "can_raise": hard == INF or can_raise_memlock(),
        },
        "pids_controller": pids_controller(),
        "systemd": os.path.isdir("/run/systemd/system"),
        "storage": storage(conf_path),
    }
    return doc


def images_missing(engine, names):
    """The images ENGINE does not have (`ENGINE image inspect NAME` fails), in order."""
    if engine not in ("podman", "docker") or not names or not shutil.which(engine):
        return list(names) if engine in ("podman", "docker") else []
    return [name for name in names
            if subprocess.run([engine, "image", "inspect", name], capture_output=True,
                              check=False).returncode != 0]


def rdma_cdi(settings, found_engines):
    """The RDMA CDI plan for this host (cdi_spec.plan) with the spec file now on it, and
    whether podman and docker read CDI specs here (docker from 25)."""
    path = settings.get("path") or cdi_spec.SPEC_PATH
    try:
        with open(path, encoding="utf-8") as fh:
            current = fh.read()
    except OSError:
        current = None
    facts = cdi_spec.read_facts(conf_path=settings.get("conf_path") or "")
    out = cdi_spec.plan(facts, {**settings, "path": path, "current": current})
    out["present"] = current is not None
    out["engines"] = {}
    for name in ("podman", "docker"):
        version = (found_engines.get(name) or {}).get("version")
        ok, why = cdi_spec.engine_cdi(name, version)
        if name not in found_engines:
            why = (f"{name} is not installed yet: whether it reads the spec shows once it is "
                   "(the next run)")
        out["engines"][name] = {"cdi": ok, "why": why, "version": version}
    # daemon.json's features.cdi: on unless docker is known to be older than 25 (an engine the
    # role installs in this run has no version yet; an older docker ignores the key).
    major = cdi_spec.docker_major(out["engines"]["docker"]["version"])
    out["docker_feature"] = major is None or major >= cdi_spec.DOCKER_CDI_MIN
    # enroot (Pyxis) where it is installed: its mounts.d/environ.d files, relative paths.
    enroot = (cdi_spec.enroot_files(settings.get("conf_path") or "", settings.get("env"))
              if "enroot" in found_engines else {})
    out["enroot"] = {os.path.join(settings.get("enroot_dir") or "/etc/enroot", rel): text
                     for rel, text in enroot.items()}
    out["hcas"] = [h["name"] for h in facts["hcas"]]
    out["nccl_conf"] = facts["nccl_conf"]
    return out


def apt_candidate(package):
    """Whether apt's index has a candidate for PACKAGE (a fresh image's index can be recent by
    its date and list nothing); False where apt-cache is missing or fails."""
    out = run(["apt-cache", "policy", package]) if shutil.which("apt-cache") else None
    return bool(out) and "Candidate:" in out and "Candidate: (none)" not in out


def read_text(path):
    """{text} of a file, {text: None} when absent, {error} when unreadable (daemon.json)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return {"text": fh.read()}
    except FileNotFoundError:
        return {"text": None}
    except (OSError, UnicodeDecodeError) as exc:
        return {"error": getattr(exc, "strerror", None) or str(exc)}
