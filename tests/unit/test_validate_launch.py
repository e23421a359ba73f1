"""Launcher helpers: argv for torchrun and the container engines; reading a host's output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaprov.validate import launch as L
from rdmaprov.validate import verdict as v

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
DOC = (FIXTURES / "h200-nccl2.28.9-1rank-socket-fallback.worker.json").read_text()
LOG = (FIXTURES / "h200-nccl2.28.9-1rank-socket-fallback.log").read_text()


def test_torchrun_static_rendezvous():
    argv = L.torchrun_argv(L.Rendezvous("10.0.0.1", 29501, nnodes=4, nproc_per_node=8), 3,
                           worker_args=["--max-bytes", "1G"])
    assert argv[:3] == ["python3", "-m", "torch.distributed.run"]
    assert "--nnodes=4" in argv and "--node_rank=3" in argv and "--master_port=29501" in argv
    assert argv[-5:] == [L.WORKER_IN_IMAGE, "--timeout", "300", "--max-bytes", "1G"]
    with pytest.raises(ValueError):
        L.torchrun_argv(L.Rendezvous("10.0.0.1", nnodes=2), 2)
    with pytest.raises(ValueError):
        L.Rendezvous("")


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_container_has_rdma_needs_and_no_privileged(engine):
    argv = L.container_argv(L.Container(engine, env={"NCCL_IB_HCA": "mlx5_0"}), ["torchrun"])
    line = L.shell_line(argv)
    for part in ("--network host", "--ipc host", "--ulimit memlock=-1:-1", "--cap-add IPC_LOCK",
                 "--device /dev/infiniband", "-e NCCL_DEBUG=INFO", "-e NCCL_IB_HCA=mlx5_0",
                 f"/opt/rdmaprov/worker.py:{L.WORKER_IN_IMAGE}:ro"):
        assert part in line, part
    assert "--privileged" not in argv
    assert argv[-1] == "torchrun"
    gpu = ["--gpus", "all"] if engine == "docker" else ["--device", "nvidia.com/gpu=all"]
    assert any(argv[i:i + 2] == gpu for i in range(len(argv)))


def test_cpu_host_gets_no_gpu_flags_and_host_runtime_is_env():
    argv = L.container_argv(L.Container("podman", gpus=False), ["x"])
    assert "nvidia.com/gpu=all" not in argv
    assert L.container_argv(L.Container("host"), ["python3", "w.py"]) == [
        "env", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET,ENV", "python3", "w.py"]
    with pytest.raises(ValueError):
        L.Container("lxc")


def test_read_document():
    assert L.read_document(DOC)["backend"] == "nccl"
    with pytest.raises(L.WorkerOutputError, match="printed nothing"):
        L.read_document("\n")
    # What stdout held before the worker claimed it: NCCL's log ahead of the document.
    with pytest.raises(L.WorkerOutputError, match="it starts: 'vm:478:478"):
        L.read_document("vm:478:478 [0] NCCL INFO Bootstrap: Using eth0\n" + DOC)
    with pytest.raises(L.WorkerOutputError, match="not a worker document"):
        L.read_document('{"a": 1}')


def test_stderr_errors():
    err = json.loads((FIXTURES / "h200-nccl2.28.9-duplicate-gpu.rank0.worker.json").read_text())
    stderr = "junk\n" + json.dumps(err) + "\n[W] torch warning\n"
    assert [e["rank"] for e in L.stderr_errors(stderr)] == [0]


def _fixed_report(_lines):
    return {"network": "Socket", "fallback_to_socket": True,
            "fallback_cause": "NET/IB : No device found", "hcas": [], "gdr": "disabled"}


def test_judge_names_hosts_by_inventory():
    runs = [L.HostRun("gpu-node-1", 0, DOC, LOG)]
    res = L.judge(runs, _fixed_report)
    assert res.reasons == ["gpu-node-1: NCCL fell back to Socket (NET/IB : No device found)"]
    assert L.judge(runs, _fixed_report, policy=v.Policy(allow_socket=True)).passed


def test_judge_without_any_document_says_why_per_host():
    err = (FIXTURES / "h200-nccl2.28.9-duplicate-gpu.rank0.log").read_text()
    err_doc = json.loads((FIXTURES / "h200-nccl2.28.9-duplicate-gpu.rank0.worker.json")
                         .read_text())
    runs = [L.HostRun("a", 1, "", err + json.dumps(err_doc) + "\n"), L.HostRun("b", 124, "", "")]
    res = L.judge(runs, _fixed_report)
    assert not res.passed
    assert res.reasons[0].startswith("worker failed: a: DistBackendError: Duplicate GPU detected")
    assert [h.host for h in res.hosts] == ["a", "b"]


def test_judge_with_the_real_parser():
    nccl_log = pytest.importorskip("rdmaprov.parsers.nccl_log")
    res = L.judge([L.HostRun("vm", 0, DOC, LOG)], nccl_log.parse_nccl_log)
    assert res.reasons == ["vm: NCCL fell back to Socket (NET/IB : No device found)"]
