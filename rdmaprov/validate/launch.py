"""Launcher helpers: the argv that starts the worker on a host, and reading back what it left.

The playbook that runs these on every host is Ansible's job; this module only builds argument
lists (never shell strings, so no quoting bugs) and turns each host's stdout/stderr into the
inputs of verdict.fabric_verdict.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.validate import verdict

# Where the worker is mounted inside the image; its directory holds nothing else.
WORKER_IN_IMAGE = "/opt/rdmaprov/worker.py"

# NCCL writes its log to stdout by default; the worker moves fd 1 to stderr, so INFO here
# lands in the host's stderr, which the launcher keeps as that host's NCCL log.
DEFAULT_NCCL_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}

# Single-node NIC loopback: make NCCL leave the host through its NIC rather than NVLink/PCIe.
LOOPBACK_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}

ENGINES = ("docker", "podman", "enroot", "host")


@dataclass(frozen=True)
class Rendezvous:
    addr: str
    port: int = 29500
    nnodes: int = 1
    nproc_per_node: int = 1
    run_id: str = "rdmaprov"
    timeout_s: int = 300

    def __post_init__(self) -> None:
        if not self.addr:
            raise ValueError("rendezvous address is empty")
        if not 0 < self.port < 65536:
            raise ValueError(f"rendezvous port out of range: {self.port}")
        if self.nnodes < 1 or self.nproc_per_node < 1:
            raise ValueError("nnodes and nproc_per_node must be >= 1")


def torchrun_argv(rdzv: Rendezvous, node_rank: int, worker: str = WORKER_IN_IMAGE,
                  worker_args: Sequence[str] = (), python: str = "python3") -> list[str]:
    """torchrun with a static rendezvous: every host knows its node_rank from the inventory,
    so no elastic store or etcd is involved, and a missing host fails at the timeout."""
    if not 0 <= node_rank < rdzv.nnodes:
        raise ValueError(f"node_rank {node_rank} outside 0..{rdzv.nnodes - 1}")
    return [python, "-m", "torch.distributed.run",
            f"--nnodes={rdzv.nnodes}", f"--nproc_per_node={rdzv.nproc_per_node}",
            f"--node_rank={node_rank}", f"--master_addr={rdzv.addr}",
            f"--master_port={rdzv.port}", "--max_restarts=0",
            worker, "--timeout", str(rdzv.timeout_s), *worker_args]


@dataclass(frozen=True)
class Container:
    engine: str  # docker | podman | enroot | host
    image: str = "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"
    worker_on_host: str = "/opt/rdmaprov/worker.py"
    ib_devices: tuple[str, ...] = ("/dev/infiniband",)
    gpus: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    name: str = "rdmaprov-validate"

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"container engine must be one of {', '.join(ENGINES)}")


def container_argv(c: Container, inner: Sequence[str]) -> list[str]:
    """The engine's argv around ``inner`` (the torchrun argv).

    What RDMA in a container needs, and nothing more (never --privileged): the host's network
    (NCCL binds the HCAs' netdevs and the rendezvous port), the host's IPC namespace (NCCL's
    shared memory), the verbs devices, unlimited locked memory (NCCL registers buffers), and
    IPC_LOCK (so that the memlock limit applies in the container).
    """
    env = {**DEFAULT_NCCL_ENV, **c.env}
    if c.engine == "host":
        return ["env", *(f"{k}={v}" for k, v in env.items()), *inner]
    if c.engine == "enroot":
        # enroot shares the host's network and IPC and keeps the host's devices and limits.
        argv = ["enroot", "start", "--rw",
                "--mount", f"{c.worker_on_host}:{WORKER_IN_IMAGE}"]
        for k, v in env.items():
            argv += ["--env", f"{k}={v}"]
        return [*argv, c.image, *inner]
    argv = [c.engine, "run", "--rm", "--name", c.name, "--network", "host", "--ipc", "host",
            "--ulimit", "memlock=-1:-1", "--cap-add", "IPC_LOCK",
            "-v", f"{c.worker_on_host}:{WORKER_IN_IMAGE}:ro"]
    for dev in c.ib_devices:
        argv += ["--device", dev]
    if c.gpus:
        # docker: the NVIDIA runtime's --gpus; podman: the CDI spec nvidia-ctk generates.
        argv += ["--gpus", "all"] if c.engine == "docker" else ["--device", "nvidia.com/gpu=all"]
    for k, v in env.items():
        argv += ["-e", f"{k}={v}"]
    return [*argv, c.image, *inner]


def shell_line(argv: Iterable[str]) -> str:
    """For the report and for a user to paste: the exact command, quoted."""
    return shlex.join(list(argv))


class WorkerOutputError(ValueError):
    """The worker's stdout was not one JSON document (a crash, an image without python...)."""


def read_document(stdout: str) -> dict[str, Any]:
    """The worker's one JSON document from a host's stdout."""
    text = stdout.strip()
    if not text:
        raise WorkerOutputError("worker printed nothing on stdout")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        first = text.splitlines()[0][:120]
        raise WorkerOutputError(f"worker stdout is not one JSON document ({exc.msg}); "
                                f"it starts: {first!r}") from None
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith(
            "rdmaprov.validate.worker/"):
        raise WorkerOutputError("worker stdout is JSON but not a worker document")
    return doc


def stderr_errors(stderr: str) -> list[dict[str, Any]]:
    """The one-line JSON errors that failing ranks wrote on stderr."""
    out = []
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith('{"schema": "rdmaprov.validate.worker/') and '"ok": false' in line:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


@dataclass
class HostRun:
    """What one host's launch left: exit status and both streams."""

    host: str
    rc: int
    stdout: str
    stderr: str


def judge(runs: Sequence[HostRun], parse_log: Any,
          facts: Mapping[str, Mapping[str, Any]] | None = None,
          policy: verdict.Policy | None = None) -> verdict.FabricVerdict:
    """Every host's run -> one fabric verdict.

    The document comes from the host holding global rank 0; each host's stderr is its own NCCL
    log, parsed with ``parse_log(lines)`` (the NCCL log parser's entry point). Hosts are named
    as the inventory names them; a worker that reports other hostnames is mapped back by
    position of its ranks when the names differ.
    """
    docs = []
    for run in runs:
        try:
            docs.append((run.host, read_document(run.stdout)))
        except WorkerOutputError:
            continue
    reports = {run.host: parse_log(run.stderr.splitlines()) for run in runs}
    if not docs:
        per_host = {run.host: stderr_errors(run.stderr) for run in runs}
        errors = [f"{h}: {e['error']}" for h, errs in per_host.items() for e in errs[:1]]
        why = "; ".join(errors) or "no host printed the worker's document"
        res = verdict.fabric_verdict({"ok": False, "error": why}, reports, facts, policy)
        res.hosts = [verdict.host_verdict(r.host, "nccl", reports[r.host],
                                          (facts or {}).get(r.host), policy or verdict.Policy(),
                                          preflight=next((e.get("preflight") for e in
                                                          per_host[r.host]), None))
                     for r in runs]
        return res
    _, doc = docs[0]
    doc = dict(doc)
    # Judge by inventory names: the hostnames the ranks saw may be short names.
    seen = doc.get("preflight") or {}
    doc["preflight"] = {run.host: seen[name] for run in runs
                        if (name := match_host(run.host, seen)) is not None}
    doc["hosts"] = [run.host for run in runs]
    return verdict.fabric_verdict(doc, reports, facts, policy)


def match_host(inventory_name: str, seen: Iterable[str]) -> str | None:
    """The hostname a rank reported for this inventory host: the same name, or the same first
    label ('gpu1' for 'gpu1.cluster.local', and the other way round)."""
    seen = list(seen)
    if inventory_name in seen:
        return inventory_name
    short = inventory_name.split(".")[0]
    hits = [s for s in seen if s.split(".")[0] == short]
    return hits[0] if len(hits) == 1 else None
