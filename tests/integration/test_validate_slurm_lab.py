"""Validation as a Slurm job on the lab's real Slurm (issue 16, item 5): `rdmaprov validate
--launcher slurm --partition lab`, run on node1 as on a login node (rdmaprov installed there by
the slurm_health role from a wheelhouse), salloc's the nodes and srun's the worker on them, no
Ansible. The lab has no GPU: gloo over the fabric (eth1), torch from /opt/rdmaprov-torch.
- every node healthy: PASS, the role's results directory, and `--judge` on a copy of it gives
  the same verdict on the control host;
- one node's eth1 throttled (tc tbf): that node is named by the pair rounds and, with --drain,
  drained with rdmaprov's reason; drained by an administrator during the run, it keeps the
  administrator's reason.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import subprocess
import tarfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_slurm_lab import BIN, ROOT, play  # same directory (rootdir import)

from rdmaprov.cli import main
from rdmaprov.lab import Lab
from rdmaprov.lab import slurm as lab_slurm

pytestmark = pytest.mark.lab
LAB_NAME = os.environ.get("RDMAPROV_SLURM_LAB", "vslurm")
NODES = 3
RDMAPROV = "/opt/rdmaprov/bin/rdmaprov"
VARS = {"nccl_validate_pythonpath": ["/opt/rdmaprov-torch"], "nccl_validate_backend": "gloo",
        "nccl_validate_env": {"GLOO_SOCKET_IFNAME": "eth1"},
        "nccl_validate_worker_args": ["--max-bytes", "4M", "--iters", "5"],
        "nccl_validate_timeout": 240}
ADMIN = "hardware swap ticket 5678"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if os.geteuid() != 0:
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail("the lab needs root")
        pytest.skip("the lab needs root")
    lab = Lab(LAB_NAME)
    lab.up(nodes=NODES, log=lambda msg: None)
    try:
        lab_slurm.setup(lab, log=lambda msg: None)
        work = tmp_path_factory.mktemp("slurm-validate")
        wheels = work / "wheelhouse"
        subprocess.run([str(BIN / "pip"), "wheel", "-q", "-w", str(wheels), str(ROOT)],
                       check=True, capture_output=True, timeout=600)
        (work / "ansible_collections/rdmaprov").mkdir(parents=True)
        (work / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
        book = work / "play.yml"
        # rdmaprov on the submit host only (node1): the worker needs python3 and torch alone.
        book.write_text(
            "- hosts: node1\n  gather_facts: false\n  become: true\n  roles:\n"
            "    - role: rdmaprov.cluster.slurm_health\n      vars:\n"
            # validate on a login node needs rdmaprov whole (its dependencies too): the
            # wheelhouse route, not the node-side tool.
            "        slurm_health_install: wheelhouse\n"
            f"        slurm_health_wheelhouse: {wheels}\n"
            f"        slurm_health_rdmaprov: {RDMAPROV}\n"
            "        slurm_health_verify: false\n")
        env = {"lab": lab, "work": work, "book": book}
        done = play(env)
        assert done.returncode == 0, done.stdout[-3000:]
        lab.exec("node1", ["sh", "-c", "cat > /tmp/validate-vars.json"], input=json.dumps(VARS))
        yield env
    finally:
        if os.environ.get("RDMAPROV_KEEP_LAB") != "1":
            lab.down(log=lambda msg: None)


def validate(env: dict[str, Any], *args: str) -> tuple[int, dict[str, Any], str]:
    """rdmaprov validate --launcher slurm on node1: exit code, --json report, stderr."""
    p = env["lab"].exec("node1", [RDMAPROV, "validate", "--launcher", "slurm", "--partition",
                                  lab_slurm.PARTITION, "-e", "@/tmp/validate-vars.json",
                                  "--json", *args], check=False, timeout=600)
    try:
        report = json.loads(p.stdout)
    except ValueError:
        raise AssertionError(f"no JSON report (rc {p.returncode}): {p.stderr[-3000:]}") from None
    return p.returncode, report, p.stderr


def states(env: dict[str, Any]) -> dict[str, tuple[str, str]]:
    out = env["lab"].exec(lab_slurm.CONTROLLER, ["sinfo", "-h", "-N", "-o", "%N|%t|%E"]).stdout
    return {n: (s, r) for n, s, r in (line.split("|", 2) for line in out.splitlines())}


@contextlib.contextmanager
def throttled(env: dict[str, Any], node: str) -> Iterator[None]:
    # The bucket must hold a whole frame at the fabric's MTU.
    env["lab"].exec(node, ["tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "200mbit",
                           "burst", "16kb", "latency", "400ms"])
    try:
        yield
    finally:
        env["lab"].exec(node, ["tc", "qdisc", "del", "dev", "eth1", "root"], check=False)


def test_validate_as_a_slurm_job_passes(cluster: dict[str, Any], tmp_path: Path) -> None:
    # No --nodes: the partition's idle nodes, all of them here.
    code, report, err = validate(cluster, "--pairwise", "never", "--results",
                                 "/tmp/slurm-results", "--junit", "/tmp/slurm-results/junit.xml")
    assert code == 0, (report, err[-2000:])
    assert report["passed"] and report["backend"] == "gloo"
    assert report["world_size"] == NODES and report["busbw_GBps"] > 0
    nodes = sorted(cluster["lab"].addresses)
    assert sorted(h["host"] for h in report["hosts"] if h["passed"]) == nodes
    assert "slurm: job" in err and "(srun)" in err
    # The role's results directory, fetched to the control host and judged there again.
    tar_b64 = cluster["lab"].exec("node1", ["sh", "-c", "tar -cz -C /tmp slurm-results | "
                                            "base64"]).stdout
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(tar_b64))) as tar:
        tar.extractall(tmp_path)
    results = tmp_path / "slurm-results"
    run = json.loads((results / "fabric/run.json").read_text())
    assert run["hosts"] == nodes and run["master"] == "node1" and run["slurm_job"]
    for n in nodes:
        have = sorted(f.name for f in (results / "fabric" / n).iterdir())
        assert have == ["argv.txt", "counters_after.json", "counters_before.json", "rc",
                        "result.json", "worker.log"], have
        assert (results / "fabric" / n / "rc").read_text().strip() == "0"
        # The rail round ran in the job step, as with the role: no HCA here, so each node says
        # why it has none, and that came back with the files.
        assert sorted(f.name for f in (results / "rails" / n).iterdir()) == ["skipped"], n
        assert (results / "rails" / n / "skipped").read_text() == \
            "not applicable: no RDMA device\n"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        again = main(["validate", "--judge", str(results), "--json"])
    judged = json.loads(buf.getvalue())
    assert again == 0
    assert [(h["host"], h["passed"]) for h in judged["hosts"]] == \
        [(h["host"], h["passed"]) for h in report["hosts"]]
    assert judged["busbw_GBps"] == report["busbw_GBps"]
    [rails] = [c for c in judged["checks"] if c["name"] == "rails"]
    assert (rails["status"], rails["reason"]) == ("skip", "no rail round: " + "; ".join(
        f"{n}: not applicable: no RDMA device" for n in nodes))
    # The same reports as the Ansible path: JUnit with a case per host.
    junit = ET.parse(results / "junit.xml").getroot()
    assert junit.tag == "testsuites" and junit.get("failures") == "0"
    cases = {c.get("name") for c in junit.iter("testcase")}
    assert set(nodes) <= cases, cases


def test_throttled_node_is_named_and_drained(cluster: dict[str, Any]) -> None:
    slow = "node3"
    try:
        with throttled(cluster, slow):
            code, report, err = validate(cluster, "--nodes", str(NODES), "--drain")
        assert code == 2, err[-2000:]
        failed = {h["host"]: h["reasons"] for h in report["hosts"] if not h["passed"]}
        assert list(failed) == [slow], report
        assert list(report["pairwise"]["blamed"]) == [slow]
        assert "slow with every partner" in failed[slow][0]
        state, reason = states(cluster)[slow]
        assert state == "drain" and reason.startswith("rdmaprov: validate: slow with every "
                                                      "partner (node1+node3"), (state, reason)
        assert {n: s for n, (s, _) in states(cluster).items() if n != slow} == \
            {"node1": "idle", "node2": "idle"}
    finally:
        cluster["lab"].exec("node1", ["scontrol", "update", f"nodename={slow}",
                                      "state=resume"], check=False)


def test_an_admin_drain_during_the_run_keeps_its_reason(cluster: dict[str, Any]) -> None:
    slow = "node3"
    lab = cluster["lab"]
    lab_slurm.wait_idle(lab, sorted(lab.addresses), timeout=60)
    out: dict[str, Any] = {}

    def run() -> None:
        out["result"] = validate(cluster, "--nodes", str(NODES), "--drain")

    try:
        with throttled(cluster, slow):
            t = threading.Thread(target=run)
            t.start()
            # Once the job runs on the node, an administrator drains it for their own reason.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and t.is_alive():
                jobs = lab.exec("node1", ["squeue", "-h", "-n", "rdmaprov-validate", "-t", "R",
                                          "-o", "%i"]).stdout.split()
                if jobs:
                    break
                time.sleep(0.5)
            assert jobs, "the validation job never ran"
            lab.exec("node1", ["scontrol", "update", f"nodename={slow}", "state=drain",
                               f"reason={ADMIN}"])
            t.join(timeout=600)
        code, report, err = out["result"]
        assert code == 2
        assert list(report["pairwise"]["blamed"]) == [slow], report
        assert states(cluster)[slow] == ("drain", ADMIN)
        assert f"slurm {slow}: drained by someone else ({ADMIN}); reason kept" in err
    finally:
        lab.exec("node1", ["scontrol", "update", f"nodename={slow}", "state=resume"],
                 check=False)
