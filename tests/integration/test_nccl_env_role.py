"""nccl_env and `rdmaprov probe` against lab nodes (no RDMA there: the kernel has no uverbs).

/etc/nccl.conf is written with the socket interface and the plain reason, a second run changes
nothing, --check reports no drift, and a bad extra setting fails with the lint's one line.
`rdmaprov probe INVENTORY` says per node that there are no RDMA devices and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.lab import Lab

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parents[2]
LAB_NAME = os.environ.get("RDMAPROV_NCCL_LAB", "d")
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def lab2(tmp_path_factory):
    if os.geteuid() != 0:
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail("the lab needs root")
        pytest.skip("the lab needs root")
    lab = Lab(LAB_NAME)
    lab.up(nodes=2, log=lambda msg: None)
    work = tmp_path_factory.mktemp("nccl_env")
    (work / "ansible_collections/rdmaprov").mkdir(parents=True)
    (work / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
    book = work / "play.yml"
    book.write_text("- hosts: all\n  gather_facts: false\n  become: true\n"
                    "  roles: [rdmaprov.cluster.nccl_env]\n")
    for node in lab.addresses:
        lab.exec(node, ["rm", "-f", "/etc/nccl.conf"])
    try:
        yield {"lab": lab, "work": work, "book": book}
    finally:
        if os.environ.get("RDMAPROV_KEEP_LAB") != "1":
            lab.down(log=lambda msg: None)


def play(env, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "ansible-playbook"), "-i", str(env["lab"].inventory), str(env["book"]), *args]
    run_env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(env["work"]), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, env=run_env, timeout=300,
                          check=False)


def recap(out: str) -> dict[str, tuple[int, int]]:
    rows = [line for line in out.splitlines() if " : ok=" in line]
    return {r.split()[0]: (int(r.split("changed=")[1].split()[0]),
                           int(r.split("failed=")[1].split()[0])) for r in rows}


def test_conf_written_idempotent_and_check_clean(lab2):
    lab = lab2["lab"]
    first = play(lab2)
    assert first.returncode == 0, first.stdout[-4000:]
    assert set(recap(first.stdout).values()) == {(1, 0)}, first.stdout[-3000:]
    for node in lab.addresses:
        text = lab.exec(node, ["cat", "/etc/nccl.conf"]).stdout
        # The fabric interface the lab's group_vars declare (nccl_env_socket_ifname: eth1), named
        # exactly: a job's NCCL uses the interface validate proves, not eth0 (SSH).
        assert "NCCL_SOCKET_IFNAME==eth1\n" in text
        assert "# note: no RDMA devices: no /sys/class/infiniband_verbs" in text
        assert "NCCL_IB_HCA" not in text
        mode = lab.exec(node, ["stat", "-c", "%a %U", "/etc/nccl.conf"]).stdout.split()
        assert mode == ["644", "root"]
    second = play(lab2)
    assert second.returncode == 0 and set(recap(second.stdout).values()) == {(0, 0)}, \
        second.stdout[-3000:]
    check = play(lab2, "--check")
    assert check.returncode == 0 and set(recap(check.stdout).values()) == {(0, 0)}, \
        check.stdout[-3000:]


def test_drift_is_repaired(lab2):
    lab = lab2["lab"]
    node = next(iter(lab.addresses))
    lab.exec(node, ["sh", "-c", "echo NCCL_IB_HCA=mlx5_9 >> /etc/nccl.conf"])
    check = play(lab2, "--check", "--diff")
    assert recap(check.stdout)[node] == (1, 0) and "NCCL_IB_HCA=mlx5_9" in check.stdout
    fix = play(lab2)
    assert fix.returncode == 0 and recap(fix.stdout)[node] == (1, 0)
    assert "mlx5_9" not in lab.exec(node, ["cat", "/etc/nccl.conf"]).stdout


def test_bad_extra_fails_with_one_line(lab2):
    bad = play(lab2, "-e", json.dumps({"nccl_env_extra": {"NCCL_IB_ENABLE": "1"}}))
    assert bad.returncode != 0
    assert "NCCL_IB_ENABLE does not exist in NCCL; the real setting is NCCL_IB_DISABLE=0" \
        in bad.stdout


def test_probe_over_the_inventory_says_no_rdma_and_why(lab2):
    lab = lab2["lab"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    proc = subprocess.run([str(BIN / "rdmaprov"), "probe", str(lab.inventory), "--json"],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    doc = json.loads(proc.stdout)
    assert set(doc["hosts_probed"]) == set(lab.addresses), proc.stderr[-2000:]
    for host in lab.addresses:
        rdma = doc["hosts_probed"][host]["rdma"]
        assert rdma["devices"] == [] and rdma["source"] == "none"
        assert rdma["kernel"]["uverbs"] is False
        assert "no RDMA (ib_uverbs) support" in rdma["kernel"]["reason"]
        assert doc["fabric"]["problems"][host][0].startswith("no RDMA devices:")
    # no RDMA anywhere: the fabric is not consistent with an RDMA fabric, so exit 2
    assert proc.returncode == 2
    text = subprocess.run([str(BIN / "rdmaprov"), "probe", str(lab.inventory)],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    says = "No RDMA devices: no /sys/class/infiniband_verbs"
    assert text.stdout.count(says) == len(lab.addresses)
