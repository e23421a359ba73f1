"""`rdmaprov bootstrap` against real lab nodes over SSH: converge, idempotence, check mode,
input errors that contact no host, and an unreachable node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.hostlist import fold

pytestmark = pytest.mark.lab

RDMAPROV = [sys.executable, "-m", "rdmaprov"]
# Task results per host of a no-change re-run of site.yml on the lab (167 before the roles probed
# once and acted only on drift, 21 before the site plan read every role in one task, 5 now:
# check_vars, preflight's two, the site plan; bench/RESULTS.md has the figures).
NO_CHANGE_TASKS = 6


def bootstrap(inventory: Path, *extra: str, timeout: int = 900) -> tuple[int, dict, str]:
    proc = subprocess.run([*RDMAPROV, "bootstrap", str(inventory), "--json", *extra],
                          capture_output=True, text=True, timeout=timeout, check=False)
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, doc, proc.stderr




@pytest.fixture(scope="module")
def converged(lab):
    """The first bootstrap of the session's lab (the other tests build on its state)."""
    rc, doc, err = bootstrap(lab.inventory)
    return rc, doc, err


def test_first_run_converges_every_node(lab, converged):
    rc, doc, err = converged
    assert rc == 0, f"bootstrap failed: {doc.get('failures')} {err[-2000:]}"
    assert set(doc["hosts"]) == set(lab.nodes)
    for node, counts in doc["hosts"].items():
        assert counts["failed"] == 0 and counts["unreachable"] == 0, node
        assert counts["ok"] > 0, node


def test_second_run_changes_nothing(lab, converged):
    assert converged[0] == 0
    rc, doc, err = bootstrap(lab.inventory)
    assert rc == 0, err[-2000:]
    changed = {node: c["changed"] for node, c in doc["hosts"].items() if c["changed"]}
    assert changed == {}, f"second run changed something: {changed}"
    # Nothing changed, so nothing is proven again (--validate always would).
    assert doc["validation"] is None, doc["validation"]
    # What a user sees: one line for the nodes in line, no node's report (-v prints them).
    said = err.splitlines()
    folded = fold(lab.nodes)
    assert any(line.startswith(f"in line: {folded}: nothing changed (") and
               line.endswith(" report lines each; -v shows them)") for line in said), err[-2000:]
    assert not {f"{n}:" for n in [*lab.nodes, folded]} & set(said), err[-2000:]
    # Probe once, act only on drift: a converged host costs a few task results per role.
    results = {node: c["ok"] + c["skipped"] for node, c in doc["hosts"].items()}
    assert max(results.values()) <= NO_CHANGE_TASKS, results


def test_check_mode_changes_nothing_on_the_nodes(lab, converged):
    assert converged[0] == 0
    node = lab.nodes[0]
    # Plant drift the roles own, so check mode has something to report.
    lab.exec(node, ["sh", "-c", "rm -f /etc/modules-load.d/rdmaprov.conf"])
    before = {n: lab.etc_digest(n) for n in lab.nodes}
    rc, doc, err = bootstrap(lab.inventory, "--check")
    after = {n: lab.etc_digest(n) for n in lab.nodes}
    assert before == after, "--check changed files under /etc"
    assert rc == 0, err[-2000:]
    assert doc["hosts"][node]["changed"] > 0, "--check did not report the planted drift"
    # Put it back for the tests that follow.
    rc, doc, err = bootstrap(lab.inventory, "--limit", node)
    assert rc == 0, err[-2000:]


def test_the_node_side_rdmaprov_is_on_path_after_bootstrap(lab, converged):
    """site.yml's node_tool role: `rdmaprov` runs on every node from PATH (root's login PATH),
    the controller's version, with the check's own verdict on a lab node (no RDMA: exit 2,
    a config finding), and the host's report says where it is."""
    from rdmaprov import __version__

    rc, doc, err = converged
    assert rc == 0, err[-2000:]
    for node in lab.nodes:
        assert lab.exec(node, ["rdmaprov", "--version"]).stdout.strip() == f"rdmaprov {__version__}"
        lines = [line for item in doc["reports"][node] for line in item["lines"]]
        assert (f"/usr/local/bin/rdmaprov: rdmaprov {__version__} (venv /opt/rdmaprov/venv)"
                in lines), lines
    node = lab.nodes[0]
    assert lab.exec(node, ["rdmaprov", "check", "--help"]).returncode == 0
    check = lab.exec(node, ["rdmaprov", "check"], check=False)
    assert check.returncode == 2, check.stderr
    assert check.stdout.splitlines()[-1].startswith("UNHEALTHY: [config] no RDMA devices"), \
        check.stdout
    # probe and explain run there too (rich and PyYAML are the distribution's).
    assert "No RDMA devices" in lab.exec(node, ["rdmaprov", "probe"]).stdout
    explained = lab.exec(node, ["rdmaprov", "explain", "-"],
                         input="NCCL WARN NET/IB : No device found.\n")
    assert "NCCL warning" in explained.stdout


def _plant_drift(lab, node: str) -> None:
    """Drift in three roles' files on one node: rdma_modules, nccl_env, container_runtime."""
    lab.exec(node, ["sh", "-c", "rm -f /etc/modules-load.d/rdmaprov.conf; "
                    "echo NCCL_IB_HCA=mlx5_9 >> /etc/nccl.conf; "
                    "chmod 0600 /etc/security/limits.d/90-rdmaprov-memlock.conf"])


def test_mitogen_and_linear_give_the_same_results(lab, converged):
    """The default strategy where mitogen is installed: every host's changed, failed and
    unreachable counts are those of the linear strategy, on a converged run and on a repair."""
    pytest.importorskip("ansible_mitogen")  # the optional 'fast' extra, not rdmaprov
    assert converged[0] == 0
    node = lab.nodes[0]
    counts = {}
    for strategy in ("linear", "mitogen"):
        _plant_drift(lab, node)
        rc, doc, err = bootstrap(lab.inventory, "--no-validate", "--strategy", strategy)
        assert rc == 0, err[-2000:]
        assert doc["strategy"] == strategy
        counts[strategy] = {h: (c["changed"], c["failed"], c["unreachable"])
                            for h, c in doc["hosts"].items()}
    assert counts["linear"][node][0] > 0, "the planted drift was not repaired"
    assert counts["mitogen"] == counts["linear"]
    rc, doc, err = bootstrap(lab.inventory, "--no-validate", "--strategy", "auto")
    assert rc == 0 and doc["strategy"] == "mitogen", err[-2000:]
    assert all(c["changed"] == 0 for c in doc["hosts"].values()), doc["hosts"]


# Drift a hand or another tool leaves, one per role, on one node: (role, shell command).
EVERY_ROLE_DRIFT = [
    ("rdma_modules", "sed -i '/^ib_uverbs$/d' /etc/modules-load.d/rdmaprov.conf"),
    ("net_mtu", "ip link set eth1 mtu 1500; systemctl disable --quiet rdmaprov-mtu.service"),
    ("roce_qos", "echo '# edited by hand' >> /usr/local/sbin/rdmaprov-roce-qos"),
    ("firewall", "nft delete table inet rdmaprov"),
    ("container_runtime",
     "echo '# edited by hand' >> /etc/containers/containers.conf.d/90-rdmaprov.conf"),
    ("nccl_env", "echo NCCL_DEBUG=TRACE >> /etc/nccl.conf"),
    ("node_tool", "rm /opt/rdmaprov/venv/lib/python3*/site-packages/rdmaprov/cli/check.py"),
]


def test_planted_drift_in_every_role_is_reported_exactly_then_repaired(lab, converged):
    """Probe once, act only on drift, and still miss nothing: drift in every role on one node is
    each reported by --check --diff (which changes nothing), on that node only; the next run
    repairs it there only, and the run after changes nothing."""
    assert converged[0] == 0
    node = lab.nodes[-1]
    lab.exec(node, ["sh", "-c", "; ".join(cmd for _, cmd in EVERY_ROLE_DRIFT)])
    before = {n: lab.etc_digest(n) for n in lab.nodes}
    rc, doc, err = bootstrap(lab.inventory, "--check", "--diff")
    assert {n: lab.etc_digest(n) for n in lab.nodes} == before, "--check changed files under /etc"
    assert rc == 0, err[-2000:]
    assert {h: c["changed"] for h, c in doc["hosts"].items() if c["changed"]}.keys() == {node}
    drifted = {row["setting"].split(" : ")[0] for row in doc["drift"] if row["host"] == node}
    assert drifted >= {role for role, _ in EVERY_ROLE_DRIFT}, doc["drift"]
    assert lab.exec(node, ["nft", "list", "table", "inet", "rdmaprov"], check=False).returncode
    rc, doc, err = bootstrap(lab.inventory, "--validate", "never")
    assert rc == 0, err[-2000:]
    assert {h: c["changed"] for h, c in doc["hosts"].items() if c["changed"]}.keys() == {node}
    link = json.loads(lab.exec(node, ["ip", "-j", "link", "show", "eth1"]).stdout)[0]
    assert link["mtu"] == 9000
    assert "ib_uverbs" in lab.exec(node, ["cat", "/etc/modules-load.d/rdmaprov.conf"]).stdout
    assert "NCCL_DEBUG" not in lab.exec(node, ["cat", "/etc/nccl.conf"]).stdout
    lab.exec(node, ["nft", "list", "table", "inet", "rdmaprov"])
    rc, doc, err = bootstrap(lab.inventory, "--validate", "never")
    assert rc == 0, err[-2000:]
    assert all(c["changed"] == 0 for c in doc["hosts"].values()), doc["hosts"]


def test_drift_in_one_role_alone_is_found_and_repaired(lab, converged):
    """The site plan reads every role in one task and ends the play of a host in line: drift in
    any one role alone must still send the host through the roles. Each role's drift on its own,
    on one node: that run repairs it there (changed), and the node's results are more than a
    host in line costs; the other nodes stay in line."""
    assert converged[0] == 0
    node = lab.nodes[0]
    for role, command in EVERY_ROLE_DRIFT:
        lab.exec(node, ["sh", "-c", command])
        rc, doc, err = bootstrap(lab.inventory, "--validate", "never")
        assert rc == 0, f"{role}: {err[-2000:]}"
        changed = {h: c["changed"] for h, c in doc["hosts"].items() if c["changed"]}
        assert changed.keys() == {node}, f"{role}: {changed}"
        costs = {h: c["ok"] + c["skipped"] for h, c in doc["hosts"].items()}
        assert costs[node] > NO_CHANGE_TASKS, f"{role}: {costs}"
        assert all(v <= NO_CHANGE_TASKS for h, v in costs.items() if h != node), (role, costs)
        # The in-line nodes still report what their roles found (the site plan's reports).
        for other in lab.nodes[1:]:
            labels = [item["task"] for item in doc["reports"].get(other, [])]
            assert any(lbl.startswith("container_runtime : ") for lbl in labels), labels
    rc, doc, err = bootstrap(lab.inventory, "--validate", "never")
    assert rc == 0 and all(c["changed"] == 0 for c in doc["hosts"].values()), doc["hosts"]


@pytest.mark.parametrize("inventory_text, variables, expected", [
    ("[lab\nnode1 ansible_host=10.0.0.1\n", None, "inventory"),
    (None, "net_mtu_default: 9k\n", "net_mtu_default"),
    (None, "rdma_modules_laod: [ib_core]\n", "did you mean rdma_modules_load"),
])
def test_bad_input_is_one_line_and_contacts_no_host(lab, converged, tmp_path, inventory_text,
                                                    variables, expected):
    inventory = tmp_path / "inventory.ini"
    if inventory_text is not None:
        inventory.write_text(inventory_text)
    else:
        inventory.write_text(lab.inventory.read_text())
        (tmp_path / "group_vars").mkdir()
        (tmp_path / "group_vars" / "all.yml").write_text("---\n" + variables)
    logins = {n: lab.ssh_logins(n) for n in lab.nodes}
    proc = subprocess.run([*RDMAPROV, "bootstrap", str(inventory)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert expected in lines[0].lower() or expected in lines[0]
    assert {n: lab.ssh_logins(n) for n in lab.nodes} == logins, "a node saw an SSH login"


def test_a_node_without_sshd_is_named_unreachable(lab, converged):
    assert converged[0] == 0
    down = lab.nodes[-1]
    # Stop the listener and the open sessions: rdmaprov keeps ControlPersist masters across
    # runs, which would otherwise hide the fault.
    lab.exec(down, ["sh", "-c", "systemctl stop ssh.service; pkill -x sshd; true"])
    try:
        rc, doc, err = bootstrap(lab.inventory, timeout=600)
        assert rc == 2, err[-2000:]
        assert doc["hosts"][down]["unreachable"] > 0
        failures = {f["host"]: f for f in doc["failures"]}
        assert set(failures) == {down}
        assert failures[down]["unreachable"] is True
        for node in lab.nodes[:-1]:
            assert doc["hosts"][node]["failed"] == 0 and doc["hosts"][node]["unreachable"] == 0
        assert down in err  # the human summary on stderr names it too
    finally:
        lab.exec(down, ["systemctl", "start", "ssh.service"])


def test_kept_artifacts_hold_the_run_and_its_settings(lab, converged, tmp_path):
    assert converged[0] == 0
    rc, _doc, err = bootstrap(lab.inventory, "--keep-artifacts", str(tmp_path / "art"),
                              "--limit", lab.nodes[0], "--tags", "preflight")
    assert rc == 0, err[-2000:]
    envvars = list((tmp_path / "art").rglob("envvars"))
    assert envvars, "no env/envvars in the kept artifacts"
    text = envvars[0].read_text()
    assert "ANSIBLE_PIPELINING" in text and "ANSIBLE_HOST_KEY_CHECKING" in text
