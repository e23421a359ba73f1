"""A real Slurm cluster in the lab: `rdmaprov lab up --slurm`.

Debian's munge, slurmctld (node1), slurmd (every node) and slurm-client, installed inside the
nodes with apt from a flat repository built on the host (nodes have no internet), one generated
slurm.conf and one shared munge key; done when `sinfo` shows every node idle.

Process tracking is proctrack/linuxproc (parent/child process tree, no kernel interface needed)
and there is no task/cgroup plugin: Slurm 22.05's cgroup/v2 support creates its own scopes
through systemd over D-Bus and needs a delegated cgroup subtree, which the lab's nodes were
never set up or tested for. Nothing the pre-job check does depends on it. slurmd still loads a
cgroup plugin at start, and its autodetection stops with "fatal: Hybrid mode is not supported"
on a host with cgroup v1 hierarchies next to the unified one (this machine): there cgroup.conf
names cgroup/v1, which then only has to load, since no plugin above uses it.
"""

from __future__ import annotations

import base64
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rdmaprov.errors import UserError
from rdmaprov.lab import Lab
from rdmaprov.lab import base as lab_base

# Installed from the lab's Slurm repository (python3-venv, which slurm_health's wheelhouse route
# needs, is in every lab's repository: base.REPO_PACKAGES).
PACKAGES = ("munge", "slurmctld", "slurmd", "slurm-client")
CONTROLLER = "node1"
PARTITION = "lab"
SLURM_CONF = "/etc/slurm/slurm.conf"
CGROUP_CONF = "/etc/slurm/cgroup.conf"
SOURCES = "/etc/apt/sources.list.d/rdmaprov-slurm.list"


def _distro(lab: Lab) -> tuple[lab_base.Distro, Path]:
    state = lab._load()
    if state is None or not state.base:
        raise UserError(f"lab {lab.name!r} is not up: run 'rdmaprov lab up --name {lab.name}'")
    base = Path(state.base)
    suite = base.name.split("-")[1]  # base-<suite>-<digest>
    mirror = (base / ".rdmaprov-done").read_text().strip()
    return lab_base.Distro(suite=suite, mirror=mirror), base


def ensure_repo(lab: Lab, log: Path) -> str:
    """The Slurm package set as a flat repository the nodes see; returns its path in a node."""
    distro, base = _distro(lab)
    repo = lab_base.ensure_repo(distro, base, log, packages=PACKAGES)
    shared = next(host for host, node in lab_base.shared_dirs().items()
                  if node == lab_base.EXTRA_REPOS_NODE_DIR)
    target = shared / repo.name
    if not (target / "Packages").is_file():
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(repo, tmp, copy_function=os.link)  # same filesystem: no copy
        tmp.rename(target)
    return f"{lab_base.EXTRA_REPOS_NODE_DIR}/{repo.name}"


def slurm_conf(lab_name: str, nodes: list[dict], cpus: int, extra: str = "") -> str:
    """The lab cluster's slurm.conf: every node by name and lab address, one partition."""
    ctl = next(n for n in nodes if n["name"] == CONTROLLER)
    lines = [
        "# Written by 'rdmaprov lab up --slurm'.",
        f"ClusterName=rdmaprov-{lab_name}",
        f"SlurmctldHost={ctl['name']}({ctl['address']})",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        "CryptoType=crypto/munge",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        # See the module docstring: no cgroup plugins in a lab node.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        # A job whose prolog failed (a node the pre-job check drained) starts elsewhere at once
        # instead of waiting held for an administrator.
        "SchedulerParameters=nohold_on_prolog_fail",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        # A node that was DOWN for not responding comes back by itself once slurmd answers.
        "ReturnToService=2",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=5",
        *[f"NodeName={n['name']} NodeAddr={n['address']} CPUs={cpus} State=UNKNOWN"
          for n in nodes],
        f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n" + extra


def setup(lab: Lab, log: Callable[[str], object] = print, timeout: float = 120) -> None:
    """Install and start Slurm in every node of a running lab; return once all are idle."""
    state = lab._load()
    if state is None or not state.nodes:
        raise UserError(f"lab {lab.name!r} is not up")
    nodes = state.nodes
    if CONTROLLER not in {n["name"] for n in nodes}:
        raise UserError(f"lab {lab.name!r} has no {CONTROLLER}")
    for n in nodes:
        if lab.exec(n["name"], ["test", "-d", lab_base.EXTRA_REPOS_NODE_DIR],
                    check=False).returncode != 0:
            raise UserError(f"lab {lab.name!r}: {n['name']} was started without "
                            f"{lab_base.EXTRA_REPOS_NODE_DIR}; run 'rdmaprov lab down --name "
                            f"{lab.name}' and bring it up again")
    started = time.monotonic()
    log(f"slurm: building the package repository ({', '.join(PACKAGES)})")
    node_repo = ensure_repo(lab, lab.dir / "build.log")

    def install(entry: dict) -> None:
        name = entry["name"]
        pkgs = [p for p in PACKAGES if p != "slurmctld" or name == CONTROLLER]
        lab.exec(name, ["sh", "-c", f"cat > {SOURCES}"],
                 input=f"deb [trusted=yes] file:{node_repo} ./\n")
        lab.exec(name, ["apt-get", "-q", "update"], timeout=300)
        lab.exec(name, ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y",
                        "--no-install-recommends", "install", *pkgs], timeout=600)

    log(f"slurm: installing in {len(nodes)} nodes")
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        list(pool.map(install, nodes))

    key_file = lab.dir / "munge.key"
    if not key_file.is_file():
        key_file.write_bytes(os.urandom(1024))
        key_file.chmod(0o600)
    key_b64 = base64.b64encode(key_file.read_bytes()).decode() + "\n"
    cpus = int(lab.exec(CONTROLLER, ["nproc"]).stdout.strip())
    conf = slurm_conf(lab.name, nodes, cpus)
    own = lab.exec(CONTROLLER, ["cat", "/proc/self/cgroup"]).stdout.splitlines()
    hybrid = any(not line.startswith("0::") for line in own if line.strip())
    cgroup_conf = ("# Written by 'rdmaprov lab up --slurm' (see rdmaprov/lab/slurm.py).\n"
                   f"CgroupPlugin={'cgroup/v1' if hybrid else 'autodetect'}\n")
    for n in nodes:
        name = n["name"]
        lab.exec(name, ["sh", "-c", "base64 -d > /etc/munge/munge.key && "
                        "chown munge:munge /etc/munge/munge.key && "
                        "chmod 0400 /etc/munge/munge.key"], input=key_b64)
        lab.exec(name, ["sh", "-c", f"cat > {SLURM_CONF}.tmp && mv {SLURM_CONF}.tmp "
                        f"{SLURM_CONF}"], input=conf)
        lab.exec(name, ["sh", "-c", f"cat > {CGROUP_CONF}"], input=cgroup_conf)
        lab.exec(name, ["systemctl", "restart", "munge"])
    # A fresh cluster each time: no drain, job or node state recovered from an earlier run.
    lab.exec(CONTROLLER, ["systemctl", "stop", "slurmctld"])
    lab.exec(CONTROLLER, ["sh", "-c", "rm -rf /var/lib/slurm/slurmctld/*"])
    lab.exec(CONTROLLER, ["systemctl", "enable", "--now", "slurmctld"])
    for n in nodes:
        lab.exec(n["name"], ["systemctl", "enable", "slurmd"])
        lab.exec(n["name"], ["systemctl", "restart", "slurmd"])
    wait_idle(lab, [n["name"] for n in nodes], timeout)
    log(f"slurm: {len(nodes)} nodes idle in partition {PARTITION!r} "
        f"({time.monotonic() - started:.1f}s)")


def node_states(lab: Lab) -> dict[str, str]:
    """sinfo's compact state per node, as the controller sees it (e.g. idle, drain, alloc)."""
    out = lab.exec(CONTROLLER, ["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout
    return dict(line.split(None, 1) for line in out.splitlines() if line.strip())


def wait_idle(lab: Lab, names: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = node_states(lab)
        if all(states.get(n) == "idle" for n in names):
            return
        time.sleep(1)
    log_tail = lab.exec(CONTROLLER, ["tail", "-n", "5", "/var/log/slurm/slurmctld.log"],
                        check=False).stdout.strip().replace("\n", " | ")
    raise RuntimeError(f"slurm: nodes not idle after {timeout:.0f}s: {states or 'no sinfo'}; "
                       f"slurmctld.log: {log_tail}")
