"""rdmaprov validate on real lab nodes (gloo on CPU, transport Socket expected):
green on the host runtime, the throttled node named, and the worker inside real podman
containers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_container_runtime import LAB_VARS, apply  # same directory (rootdir import)

from rdmaprov.cli import main

pytestmark = pytest.mark.lab

HOST_RUNTIME = {
    "nccl_validate_runtime": "host",
    "nccl_validate_backend": "gloo",
    "nccl_validate_pythonpath": ["/opt/rdmaprov-torch"],
    "nccl_validate_worker_args": ["--max-bytes", "4M"],
    "nccl_validate_timeout": 240,
}


def _validate(lab, tmp: Path, variables: dict, *extra: str) -> tuple[int, dict]:
    vars_file = tmp / "vars.json"
    vars_file.write_text(json.dumps(variables))
    out = tmp / "report.json"
    junit = tmp / "junit.xml"
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["validate", str(lab.inventory), "-e", f"@{vars_file}", "--json",
                     "--junit", str(junit), "--results", str(tmp / "results"), *extra])
    out.write_text(buf.getvalue())
    return code, json.loads(buf.getvalue())


def test_host_runtime_green(lab, tmp_path: Path) -> None:
    code, report = _validate(lab, tmp_path, HOST_RUNTIME)
    assert code == 0, report
    assert report["passed"] and report["backend"] == "gloo"
    assert report["world_size"] == len(lab.nodes)
    assert report["busbw_GBps"] > 0.05
    assert {h["host"] for h in report["hosts"] if h["passed"]} == set(lab.nodes)
    # No threshold known: pairwise rounds ran and blamed nobody.
    assert report["pairwise"] and not report["pairwise"]["blamed"]
    assert (tmp_path / "results/fabric/node1/worker.log").is_file()


def test_throttled_node_is_named(lab, tmp_path: Path) -> None:
    slow = lab.nodes[-1]
    # The bucket must hold a whole frame: the fabric runs at MTU 9000 once bootstrapped.
    lab.exec(slow, ["tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "50mbit",
                    "burst", "16kb", "latency", "400ms"])
    try:
        code, report = _validate(lab, tmp_path, HOST_RUNTIME)
    finally:
        lab.exec(slow, ["tc", "qdisc", "del", "dev", "eth1", "root"], check=False)
    assert code == 2
    failed = {h["host"]: h["reasons"] for h in report["hosts"] if not h["passed"]}
    assert list(failed) == [slow], report
    assert "slow in every pair" in failed[slow][0]
    assert list(report["pairwise"]["blamed"]) == [slow]


def test_unreachable_rendezvous_is_one_line_per_host(lab, tmp_path: Path) -> None:
    # An address inside the lab's own subnet that no node holds: nothing leaves the lab.
    first = lab.addresses[lab.nodes[0]]
    nobody = first.rsplit(".", 1)[0] + ".200"
    variables = {**HOST_RUNTIME, "nccl_validate_master_addr": nobody}
    code, report = _validate(lab, tmp_path, variables)
    assert code == 2
    for h in report["hosts"]:
        assert not h["passed"]
        assert len(h["reasons"]) == 1
        assert nobody in h["reasons"][0] or "not launched" in h["reasons"][0]


def test_missing_engine_and_bad_image(lab, tmp_path: Path) -> None:
    no_engine = {**HOST_RUNTIME, "nccl_validate_runtime": "container",
                 "nccl_validate_engine": "docker"}
    code, report = _validate(lab, tmp_path, no_engine)
    assert code == 2
    for h in report["hosts"]:
        assert "no container engine: docker is installed" in h["reasons"][0]


@pytest.fixture(scope="module")
def podman_nodes(lab, tmp_path_factory):
    result = apply(lab, tmp_path_factory.mktemp("cr"), LAB_VARS)
    assert result.ok, {h: r.failure for h, r in result.hosts.items()}
    return lab


def test_worker_in_podman_containers(podman_nodes, tmp_path: Path) -> None:
    variables = {**HOST_RUNTIME, "nccl_validate_runtime": "container",
                 "nccl_validate_engine": "podman",
                 "nccl_validate_image": "localhost/rdmaprov-lab-worker:latest",
                 "nccl_validate_memlock": "host"}
    code, report = _validate(podman_nodes, tmp_path, variables, "--pairwise", "never")
    assert code == 0, report
    argv = (tmp_path / "results/fabric/node1/argv.txt").read_text().splitlines()
    assert argv[:2] == ["podman", "run"]
    for flag in ("--network", "--ipc", "--cap-add"):
        assert flag in argv
    assert "--privileged" not in argv
    assert report["world_size"] == len(podman_nodes.nodes)


def test_bad_image_is_one_line_per_host(podman_nodes, tmp_path: Path) -> None:
    variables = {**HOST_RUNTIME, "nccl_validate_runtime": "container",
                 "nccl_validate_engine": "podman",
                 "nccl_validate_image": "localhost/no-such-image:1",
                 "nccl_validate_pull_timeout": 30,
                 "nccl_validate_memlock": "host"}
    code, report = _validate(podman_nodes, tmp_path, variables)
    assert code == 2
    for h in report["hosts"]:
        assert h["reasons"][0].startswith("image localhost/no-such-image:1: not on this host")
