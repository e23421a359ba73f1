# Copyright: rdmaprov developers
# Apache-2.0
"""What `rdmaprov status` shows of one node, read with the readers the roles and `probe` use.

The drivers come from rdma_sysfs.stack_versions (the rdma_ofed role's and `probe`'s answer),
the MTUs, RDMA devices and GPUs from rdma_sysfs and kernel_caps, the kernel modules from
kernel_caps.module_status (the kernel_modules module's answer). What only status shows (what
the QoS boot unit logged per NIC, a one-line firewall summary, the runtime's version, the last
validation's exit code on this node) is read here, once. Read-only: nothing is written.

``run(argv) -> (rc, stdout)`` runs a read-only command (``run`` below by default); a missing
command answers (127, ""), as rdma_sysfs.stack_versions takes it.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess

from ansible_collections.rdmaprov.cluster.plugins.module_utils import container_runtime_probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import kernel_caps, rdma_sysfs

QOS_UNIT = "rdmaprov-roce-qos.service"
QOS_SCRIPT = "/usr/local/sbin/rdmaprov-roce-qos"
# What the unit's script logs per interface (roles/roce_qos/templates/rdmaprov-roce-qos.sh.j2).
QOS_LINE = re.compile(r"^rdmaprov-roce-qos: (\S+): "
                      r"(not capable: .*|DCB settings applied|no such interface)$")
VALIDATE_DIR = "/var/tmp/rdmaprov-validate"


MISSING = (127, "")


def run(argv: list) -> tuple:
    """(rc, stdout) of a read-only command in the C locale; MISSING when it is not installed
    or hangs for 10 s (a status must answer for the rest of the node)."""
    if shutil.which(argv[0]) is None:
        return MISSING
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False,
                              env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return MISSING
    return proc.returncode, proc.stdout


def qos_results(journal: str) -> dict:
    """{interface: what the unit's last run logged for it}, from the unit's journal lines."""
    lines = journal.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Starting ")]
    found = {}
    for line in lines[starts[-1] if starts else 0:]:
        m = QOS_LINE.match(line.strip())
        if m:
            found[m.group(1)] = m.group(2)
    return found


def qos(run, root: str = "/") -> dict:
    """The boot unit's state and, where it is loaded, what its last run did per NIC (an active
    oneshot unit only says that the script ran)."""
    answer = run(["systemctl", "show", "-p", "LoadState,ActiveState", QOS_UNIT])
    props = dict(ln.split("=", 1) for ln in answer[1].splitlines() if "=" in ln)
    loaded = props.get("LoadState") not in (None, "not-found")
    result = {"unit": props.get("ActiveState") if loaded else None,
              "script": os.path.exists(os.path.join(root, QOS_SCRIPT.lstrip("/"))),
              "nics": None}
    if loaded:
        journal = run(["journalctl", "-b", "-u", QOS_UNIT, "-o", "cat", "--no-pager", "-n", "500"])
        if journal[0] == 0:
            result["nics"] = qos_results(journal[1])
    return result


def firewall(run) -> str | None:
    """The firewall role's backend in one line: its firewalld policy, its ufw rules or its
    nftables table; None where none of the three tools is here."""
    answer = run(["firewall-cmd", "--policy=rdmaprov", "--list-rich-rules"])
    if answer[0] == 0:
        return "firewalld policy rdmaprov, %d rules" % len(answer[1].splitlines())
    answer = run(["ufw", "status"])
    if answer[0] == 0 and "# rdmaprov" in answer[1]:
        state = "active" if "Status: active" in answer[1] else "inactive"
        return "ufw %s, %d rdmaprov rules" % (state, answer[1].count("# rdmaprov"))
    answer = run(["nft", "list", "table", "inet", "rdmaprov"])
    if answer == MISSING:
        return None
    if answer[0] != 0:
        return "no rdmaprov table"
    text = answer[1]
    # A rule ends in its verdict; a base chain's header ("type filter hook input ...; policy
    # drop;") is no rule.
    rules = len([ln for ln in text.splitlines()
                 if re.search(r"\b(accept|drop|reject)\b", ln) and " hook " not in ln])
    policy = re.search(r"hook input .*policy (accept|drop);", text)
    return "rdmaprov table, %d rules%s" % (rules, ", policy " + policy.group(1) if policy else "")


def runtime(run) -> str | None:
    """The container engine a job would use here (docker before podman), with its client's
    version (``ENGINE --version``), read by container_runtime_probe.engine."""
    def ask(argv):
        rc, out = run(argv)
        return out if rc == 0 else None

    for name in ("docker", "podman"):
        # ``run`` answers a command that is not installed itself (MISSING): no lookup here.
        found = container_runtime_probe.engine(name, [name, "--version"], ask, which=str)
        if found and found["usable"]:
            m = re.search(r"(\d+\.\d+(\.\d+)?)", found["version"])
            return "%s %s" % (name, m.group(1) if m else "?")
    return None


def drivers(run) -> str | None:
    """MLNX_OFED/DOCA's version, else the distribution's rdma-core, as rdma_ofed reads them."""
    versions = rdma_sysfs.stack_versions(run)
    if versions["ofed_version"]:
        return versions["ofed_version"]
    if versions["rdma_core_version"]:
        return "rdma-core " + versions["rdma_core_version"]
    return None


def last_validation(root: str = "/") -> dict | None:
    """The newest worker run on this node: its label and exit code. Exit 0 says the worker ran,
    not that the run passed: the verdict is the judge's, on the controller."""
    rcs = glob.glob(os.path.join(root, VALIDATE_DIR.lstrip("/"), "*", "rc"))
    if not rcs:
        return None
    newest = max(rcs, key=os.path.getmtime)
    with open(newest, encoding="ascii", errors="replace") as fh:
        rc = fh.read().strip()
    return {"label": os.path.basename(os.path.dirname(newest)), "rc": rc,
            "mtime": int(os.path.getmtime(newest))}


def kernel_modules(names: list, root: str = "/", release: str | None = None) -> dict:
    """Each module loaded, built in or absent (kernel_caps.module_status, the kernel_modules
    module's answer), and whether this host could load one."""
    caps = kernel_caps.module_loading(root, release)
    return {"can_load": caps["can_load"], "reason": caps["reason"],
            "modules": [{"name": n, "state": kernel_caps.module_status(n, root)["state"]}
                        for n in names]}


def collect(run, modules: list, root: str = "/", release: str | None = None,
            nccl_conf: str = "") -> dict:
    """The status document of this node; ``nccl_conf``: NCCL's settings file to report as
    present or absent (whether its content is nccl_env's is the role's template's answer)."""
    sysfs = os.path.join(root, "sys")
    return {
        "drivers": drivers(run),
        "mtu": {name: rdma_sysfs.netdev_mtu(sysfs, name) or 0
                for name in rdma_sysfs.list_netdevs(sysfs) if name != "lo"},
        "qos": qos(run, root),
        "firewall": firewall(run),
        "runtime": runtime(run),
        "gpus": kernel_caps.gpus(root)["count"],
        "rdma_devices": rdma_sysfs.list_devices(sysfs),
        "validation": last_validation(root),
        "modules": kernel_modules(modules, root, release),
        "nccl_conf": ({"path": nccl_conf,
                       "exists": os.path.isfile(os.path.join(root, nccl_conf.lstrip("/")))}
                      if nccl_conf else None),
    }
