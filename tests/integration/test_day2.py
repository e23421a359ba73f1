"""Day-2 on real lab nodes: `reconfigure --check --diff` reports planted drift and leaves
every node's /etc byte-identical; a rollout stops at --max-fail and --retry-failed touches
only the failed host; `status` reads every node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

RDMAPROV = [sys.executable, "-m", "rdmaprov"]


def rdmaprov(*args: str, timeout: int = 900) -> tuple[int, dict, str]:
    proc = subprocess.run([*RDMAPROV, *args, "--json"], capture_output=True, text=True,
                          timeout=timeout, check=False)
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, doc, proc.stderr




def stop_sshd(lab, node: str) -> None:
    # Killing the sessions too: rdmaprov's ControlPersist masters would otherwise carry on.
    lab.exec(node, ["sh", "-c", "systemctl stop ssh.socket ssh 2>/dev/null; pkill -x sshd; true"])


def start_sshd(lab, node: str) -> None:
    lab.exec(node, ["systemctl", "start", "ssh"])


@pytest.fixture(scope="module")
def converged(lab):
    # Converged is all these tests need: the proof of the fabric is test_bootstrap_lab's.
    rc, doc, err = rdmaprov("bootstrap", str(lab.inventory), "--no-validate")
    assert rc == 0, f"bootstrap failed: {doc.get('failures')} {err[-2000:]}"
    return doc


def test_check_diff_reports_drift_and_changes_nothing(lab, converged) -> None:
    node = lab.nodes[1]
    conf = "/etc/modules-load.d/rdmaprov.conf"
    # Planted drift the rdma_modules role owns: a module line removed by hand.
    lab.exec(node, ["sed", "-i", "/^ib_uverbs$/d", conf])
    before = {n: lab.etc_digest(n) for n in lab.nodes}
    rc, doc, err = rdmaprov("reconfigure", str(lab.inventory), "--set", "rdma_modules_ipoib=true",
                            "--check", "--diff", "--batch", "2")
    after = {n: lab.etc_digest(n) for n in lab.nodes}
    assert before == after, "--check changed files under /etc"
    assert rc == 0, err[-2000:]
    assert doc["roles"] == ["rdma_modules"] and len(doc["batches"]) == 2
    rows = {(r["host"], r["current"].split(" ")[0]): r for r in doc["drift"]}
    for n in lab.nodes:
        assert "+ib_ipoib" in rows[n, conf]["wanted"], doc["drift"]
    assert "+ib_uverbs" in rows[node, conf]["wanted"], "planted drift not reported"
    # Converge the planted drift back for the tests that follow.
    rc, doc, err = rdmaprov("reconfigure", str(lab.inventory), "--set",
                            "rdma_modules_ipoib=false", "--limit", node)
    assert rc == 0, err[-2000:]
    assert "ib_uverbs" in lab.exec(node, ["cat", conf]).stdout


def test_rollout_stops_at_max_fail_and_retry_touches_only_the_failed(lab, converged,
                                                                      tmp_path: Path,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("RDMAPROV_RETRY_DIR", str(tmp_path))
    first, *others = lab.nodes
    stop_sshd(lab, first)
    try:
        rc, doc, err = rdmaprov("reconfigure", str(lab.inventory), "--set",
                                "rdma_modules_ipoib=false", "--batch", "1")
        assert rc == 2, err[-2000:]
        assert doc["stopped"] is True and doc["not_run"] == others
        assert doc["failed_hosts"] == [first]
        failure = doc["failures"][0]
        assert failure["host"] == first and failure["unreachable"] is True
        assert failure["message"], "the summary does not say why"
        assert f"{first}: unreachable" in err
    finally:
        start_sshd(lab, first)
    logins = {n: lab.ssh_logins(n) for n in others}
    rc, doc, err = rdmaprov("reconfigure", str(lab.inventory), "--set",
                            "rdma_modules_ipoib=false", "--retry-failed")
    assert rc == 0, err[-2000:]
    assert list(doc["hosts"]) == [first]
    assert {n: lab.ssh_logins(n) for n in others} == logins, "retry touched a healthy host"
    assert not list(tmp_path.iterdir()), "the retry file outlived a successful retry"


def test_status_reads_every_node(lab, converged) -> None:
    before = {n: lab.etc_digest(n) for n in lab.nodes}
    rc, doc, err = rdmaprov("status", str(lab.inventory))
    assert rc == 0, err[-2000:]
    assert set(doc["nodes"]) == set(lab.nodes)
    for state in doc["nodes"].values():
        assert state["drivers"].startswith("rdma-core "), state
        assert state["modules"]["can_load"] is False  # the lab kernel loads no modules
        assert "eth0" in state["mtu"]
    assert before == {n: lab.etc_digest(n) for n in lab.nodes}
