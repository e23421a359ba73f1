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


def test_firewall_drift_is_read_from_the_live_table(lab, converged) -> None:
    """The user's path (issue 37): another tool flushes our table and deletes a set element. The
    table and its `rdmaprov sha1=` comment stay, yet `--check --diff` names what the live table
    lacks, a real bootstrap loads the table again, and a --check rerun is in line. One node
    (--limit), one plant and one repair keep it short; a single deleted rule is the unit tests'
    (tests/fixtures/firewall/, listings from a lab node)."""
    node, inv = lab.nodes[0], str(lab.inventory)

    def listing() -> str:
        return lab.exec(node, ["nft", "list", "table", "inet", "rdmaprov"]).stdout

    def firewall_lines(doc: dict) -> str:
        return "\n".join(line for report in doc["reports"].get(node, [])
                         if report["task"].startswith("firewall :") for line in report["lines"])

    converged_table = listing()
    assert "reject with tcp reset" in converged_table, converged_table
    elems = json.loads(lab.exec(node, ["nft", "-j", "list", "set", "inet", "rdmaprov",
                                       "cluster_ipv4"]).stdout)
    elem = next(i["set"]["elem"][0] for i in elems["nftables"] if "set" in i)
    subnet = f"{elem['prefix']['addr']}/{elem['prefix']['len']}" if isinstance(elem, dict) \
        else str(elem)
    lab.exec(node, ["nft", "flush", "table", "inet", "rdmaprov"])
    lab.exec(node, ["nft", "delete", "element", "inet", "rdmaprov", "cluster_ipv4",
                    f"{{ {subnet} }}"])
    assert 'comment "rdmaprov sha1=' in listing() and "ct state" not in listing()
    rc, doc, err = rdmaprov("bootstrap", inv, "--check", "--diff", "--limit", node)
    assert rc == 0, err[-2000:]  # --check --diff reports drift and exits 0 (docs/own-cluster.md)
    said = firewall_lines(doc)
    assert f"{node}: drift: " in said, said
    assert "live table inet rdmaprov lacks 8 rules (chain input): ct state established" in said
    assert f"set cluster_ipv4 lacks 1 element: {subnet}" in said, said
    assert doc["drift"] and {r["host"] for r in doc["drift"]} == {node}, doc["drift"]
    assert "ct state" not in listing(), "--check changed the table"

    rc, doc, err = rdmaprov("bootstrap", inv, "--limit", node, "--no-validate")
    assert rc == 0, err[-2000:]
    assert listing() == converged_table, "a real bootstrap did not load the table again"

    rc, doc, err = rdmaprov("bootstrap", inv, "--check", "--diff", "--limit", node)
    assert rc == 0 and doc["drift"] == [], doc.get("drift")
    assert doc["hosts"][node]["changed"] == 0, doc["hosts"]


def test_write_keeps_a_reconfigured_value_through_the_next_bootstrap(lab) -> None:
    """The user's path (issue 39, item 4): net_mtu_default is refused where the lab's own
    net_mtu_interfaces gives eth1 its MTU, naming it; the change given there with --write
    goes into the lab's group_vars/lab.yml, and the next bootstrap keeps it (in line, eth1
    still at 4000). Only the net_mtu role runs; the lab's MTU is put back after."""
    inv = str(lab.inventory)
    lab_yml = lab.dir / "group_vars" / "lab.yml"
    original = lab_yml.read_text()
    logins = {n: lab.ssh_logins(n) for n in lab.nodes}
    rc, _doc, err = rdmaprov("reconfigure", inv, "--set", "net_mtu_default=4000")
    assert rc == 1 and "--set net_mtu_default=4000 has no effect on eth1 of " in err, err
    assert f"net_mtu_interfaces sets its mtu ({lab_yml})" in err, err
    assert {n: lab.ssh_logins(n) for n in lab.nodes} == logins, "a refused --set reached a node"
    try:
        rc, doc, err = rdmaprov("reconfigure", inv, "--set",
                                "net_mtu_interfaces=[{name: eth1, mtu: 4000}]",
                                "--write", str(lab_yml))
        assert rc == 0 and doc["written"] == str(lab_yml), err[-2000:]
        old_mtu = next(line for line in original.splitlines() if line.strip().startswith("mtu:"))
        assert lab_yml.read_text() == original.replace(old_mtu, old_mtu.split(":")[0] + ": 4000")
        rc, doc, err = rdmaprov("bootstrap", inv, "--tags", "net_mtu", "--no-validate")
        assert rc == 0, err[-2000:]
        assert {h: r["changed"] for h, r in doc["hosts"].items()} == {n: 0 for n in lab.nodes}
        for n in lab.nodes:
            assert " mtu 4000 " in lab.exec(n, ["ip", "-o", "link", "show", "eth1"]).stdout
    finally:
        lab_yml.write_text(original)
        rdmaprov("bootstrap", inv, "--tags", "net_mtu", "--no-validate")
