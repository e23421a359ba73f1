#!/usr/bin/python3
"""Read-only probe of what a host offers containers: engines, GPUs, RDMA devices, locked memory.

Prints one JSON document. Changes nothing: the memlock test raises the limit in a forked child
that exits at once.
"""
import glob
import json
import os
import resource
import shutil
import subprocess

INF = resource.RLIM_INFINITY
CAP_SYS_RESOURCE = 24


def run(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
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
    _, status = os.waitpid(pid, 0)
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


def engines():
    out = {}
    for name in ("docker", "podman", "enroot"):
        path = shutil.which(name)
        if not path:
            continue
        fmt = {"docker": ["docker", "version", "--format", "{{.Server.Version}}"],
               "podman": ["podman", "version", "--format", "{{.Client.Version}}"],
               "enroot": ["enroot", "version"]}[name]
        version = run(fmt)
        out[name] = {"path": path, "version": version,
                     # docker's client answers without a daemon only for the client part
                     "usable": version is not None}
    return out


def pids_controller():
    for path in ("/sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup/unified/cgroup.controllers"):
        try:
            with open(path) as f:
                return "pids" in f.read().split()
        except OSError:
            continue
    return os.path.isdir("/sys/fs/cgroup/pids")


def main():
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
    }
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
