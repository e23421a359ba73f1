"""Reliability on real lab nodes: faults on some nodes (sshd gone, apt repository gone, disk
full, node killed mid-run) → the others finish, the summary names host and cause, exit 2, and
--retry-failed touches only the failed hosts. Bad input contacts no node. Secrets given with
-e do not land in kept artifacts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

RDMAPROV = [sys.executable, "-m", "rdmaprov"]
REPO_LIST = "/etc/apt/sources.list.d/rdmaprov-lab.list"


def bootstrap(inventory: Path, *extra: str, timeout: int = 900) -> tuple[int, dict, str]:
    proc = subprocess.run([*RDMAPROV, "bootstrap", str(inventory), "--json", *extra],
                          capture_output=True, text=True, timeout=timeout, check=False)
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, doc, proc.stderr



def failures(doc: dict) -> dict[str, dict]:
    return {f["host"]: f for f in doc.get("failures", [])}


@pytest.fixture(scope="module")
def converged(lab):
    # Converged is all these tests need: the proof of the fabric is test_bootstrap_lab's.
    rc, doc, err = bootstrap(lab.inventory, "--no-validate")
    assert rc == 0, f"bootstrap failed: {doc.get('failures')} {err[-2000:]}"


@pytest.fixture
def retry_dir(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("RDMAPROV_RETRY_DIR", str(tmp_path / "retry"))
    return tmp_path / "retry"


def test_sshd_stopped_and_apt_repo_gone(lab, converged, retry_dir: Path) -> None:
    dead, no_repo, healthy = lab.nodes[:3]
    original = lab.exec(no_repo, ["cat", REPO_LIST]).stdout
    lab.exec(dead, ["sh", "-c", "systemctl stop ssh.socket ssh 2>/dev/null; pkill -x sshd; true"])
    # perftest removed, so the driver role must install it, from a repository that is gone.
    lab.exec(no_repo, ["sh", "-c", f"dpkg -r perftest >/dev/null && echo "
                                   f"'deb [trusted=yes] file:/srv/no-such-repo ./' > {REPO_LIST}"])
    try:
        rc, doc, err = bootstrap(lab.inventory)
        assert rc == 2, err[-2000:]
        f = failures(doc)
        assert set(f) == {dead, no_repo}, doc["failures"]
        assert f[dead]["unreachable"] is True
        assert f[no_repo]["unreachable"] is False
        assert "no-such-repo" in f[no_repo]["message"] or "perftest" in f[no_repo]["message"], \
            f[no_repo]
        assert doc["hosts"][healthy]["failed"] == 0 and doc["hosts"][healthy]["ok"] > 0
        assert f"{dead}: unreachable at " in err and f"{no_repo}: failed at " in err
    finally:
        lab.exec(dead, ["systemctl", "start", "ssh"])
        lab.exec(no_repo, ["sh", "-c", f"printf '%s' '{original}' > {REPO_LIST}"])
    logins = lab.ssh_logins(healthy)
    rc, doc, err = bootstrap(lab.inventory, "--retry-failed")
    assert rc == 0, f"{doc.get('failures')} {doc.get('validation')}\n{err[-2000:]}"
    assert set(doc["hosts"]) == {dead, no_repo}
    # The repaired host (its driver role installed perftest) is proven alone: a one-host run.
    assert [h["host"] for h in doc["validation"]["hosts"]] == [no_repo], doc["validation"]
    assert doc["validation"]["passed"] is True, doc["validation"]
    assert lab.ssh_logins(healthy) == logins, "the retry touched a healthy host"
    assert "perftest" in lab.exec(no_repo, ["dpkg-query", "-W", "perftest"]).stdout


def test_full_disk(lab, converged, retry_dir: Path) -> None:
    full = lab.nodes[0]
    d = "/etc/modules-load.d"
    # A full filesystem under the file the role writes: a 16 KiB tmpfs, filled up.
    lab.exec(full, ["sh", "-c", f"cp -a {d} /root/mld.bak && mount -t tmpfs -o size=16k "
                                f"tmpfs {d} && (dd if=/dev/zero of={d}/fill bs=4k 2>/dev/null; "
                                "true)"])
    try:
        rc, doc, err = bootstrap(lab.inventory)
        assert rc == 2, err[-2000:]
        f = failures(doc)
        assert set(f) == {full}, doc["failures"]
        assert "space" in f[full]["message"].lower(), f[full]
        for n in lab.nodes[1:]:
            assert doc["hosts"][n]["failed"] == 0
    finally:
        lab.exec(full, ["sh", "-c", f"umount {d}; rm -rf /root/mld.bak"])
    rc, doc, err = bootstrap(lab.inventory, "--retry-failed")
    assert rc == 0, f"{doc.get('failures')}\n{err[-2000:]}"
    assert set(doc["hosts"]) == {full}


def test_node_killed_mid_run(lab, converged, retry_dir: Path) -> None:
    victim = lab.nodes[-1]
    # A converged host ends its play at the site plan, in seconds: drift every node's module
    # list, so that each runs its roles (and reads rdma_modules' file again) while the plug is
    # pulled on one.
    for node in lab.nodes:
        lab.exec(node, ["rm", "-f", "/etc/modules-load.d/rdmaprov.conf"])
    proc = subprocess.Popen([*RDMAPROV, "bootstrap", str(lab.inventory), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Wait until the run is well into the roles, then pull the plug on one node.
        deadline = time.monotonic() + 120
        seen = ""
        while time.monotonic() < deadline and "rdma_ofed" not in seen:
            line = proc.stderr.readline()
            if not line:
                break
            seen += line
        assert "rdma_ofed" in seen, f"the run never reached the roles:\n{seen[-2000:]}"
        pid = lab.lab.node_pid(victim)
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    try:
        doc = json.loads(out)
        assert proc.returncode == 2, err[-2000:]
        f = failures(doc)
        assert set(f) == {victim}, doc["failures"]
        assert f[victim]["message"]
        for n in lab.nodes[:-1]:
            assert doc["hosts"][n]["failed"] == 0 and doc["hosts"][n]["unreachable"] == 0
    finally:
        lab.lab.up(nodes=len(lab.nodes), log=lambda m: None)
    rc, doc, err = bootstrap(lab.inventory, "--retry-failed")
    assert rc == 0, f"{doc.get('failures')}\n{err[-2000:]}"
    assert set(doc["hosts"]) == {victim}


BAD_INVENTORIES = {
    "malformed INI": ("[gpu\nnode1\n", None),
    "malformed YAML": ("all:\n  hosts: [\n", "yml"),
    "duplicate host": ("[gpu]\n{n1}\n{n1}\n", None),
    "unknown child group": ("[gpu:children]\nnosuchgroup\n[gpu:vars]\nnet_mtu_default=9000\n"
                            "[x]\n{n1}\n", None),
    "wrong type": ("[gpu]\n{n1}\n[gpu:vars]\nrdma_modules_ipoib=maybe\n", None),
    "MTU out of range": ("[gpu]\n{n1}\n[gpu:vars]\nnet_mtu_default=10000\n", None),
    "PFC out of range": ("[gpu]\n{n1}\n[gpu:vars]\nroce_qos_pfc_priority=8\n", None),
    "port out of range": ("[gpu]\n{n1}\n[gpu:vars]\nfirewall_ssh_port=70000\n", None),
    "unknown variable": ("[gpu]\n{n1}\n[gpu:vars]\nnet_mtu_defualt=9000\n", None),
}
EXPECTED = {
    "malformed INI": "", "malformed YAML": "", "duplicate host": "listed twice",
    "unknown child group": "", "wrong type": "is not a boolean",
    "MTU out of range": "not a valid MTU", "PFC out of range": "not a valid PFC priority",
    "port out of range": "not a valid TCP/UDP port",
    "unknown variable": "did you mean net_mtu_default?",
}


@pytest.mark.parametrize("case", sorted(BAD_INVENTORIES))
@pytest.mark.parametrize("command", ["bootstrap", "reconfigure"])
def test_bad_input_contacts_no_node(lab, tmp_path: Path, case: str, command: str) -> None:
    text, ext = BAD_INVENTORIES[case]
    node = lab.nodes[0]
    line = lab.inventory.read_text().splitlines()
    n1 = next(ln for ln in line if ln.startswith(f"{node} "))
    vars_ = lab.inventory.read_text().split("[lab:vars]", 1)[1]
    body = text.replace("{n1}", n1)
    if not ext:
        body += "[all:vars]" + vars_
    inv = tmp_path / f"inventory.{ext or 'ini'}"
    inv.write_text(body)
    before = lab.ssh_logins(node)
    proc = subprocess.run([*RDMAPROV, command, str(inv)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1, (case, proc.stdout[-500:], proc.stderr[-500:])
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert EXPECTED[case] in proc.stderr, proc.stderr
    assert lab.ssh_logins(node) == before, f"{case}: a node was contacted"


def test_secrets_stay_out_of_artifacts(lab, converged, tmp_path: Path) -> None:
    secret = "S3cr3t-t0ken-" + os.urandom(6).hex()
    keep = tmp_path / "artifacts"
    rc, _doc, err = bootstrap(lab.inventory, "--limit", lab.nodes[0], "--keep-artifacts",
                              str(keep), "-e", f"repo_token={secret}", "-vv")
    assert rc == 0, err[-2000:]
    assert secret not in err
    leaks = [str(p) for p in keep.rglob("*") if p.is_file()
             and secret.encode() in p.read_bytes()]
    assert leaks == [], f"secret written to {leaks}"
