"""net_mtu on hosts with one network, as the issue's Debian 13 hosts had: eth0 carries SSH and is
also the interface whose MTU is managed. The role installs the ping its proof needs instead of
blaming the network for a missing binary, repairs an MTU that drifted up on the SSH interface
(lowering never cuts a path), and still refuses to raise it without
net_mtu_allow_connection_interface."""

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
LAB_NAME = os.environ.get("RDMAPROV_ONENET_LAB", "vkind2")
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def onenet(tmp_path_factory):
    if os.geteuid() != 0:
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail("the lab needs root")
        pytest.skip("the lab needs root")
    lab = Lab(LAB_NAME)
    lab.up(nodes=2, suite="trixie", log=lambda msg: None)
    tmp = tmp_path_factory.mktemp("onenet")
    colls = tmp / "collections"
    (colls / "ansible_collections/rdmaprov").mkdir(parents=True)
    (colls / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
    playbook = tmp / "mtu.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  roles: [rdmaprov.cluster.net_mtu]\n")
    try:
        yield {"lab": lab, "colls": colls, "playbook": playbook, "tmp": tmp}
    finally:
        if os.environ.get("RDMAPROV_KEEP_LAB") != "1":
            lab.down(log=lambda msg: None)


def play(env, mtu: int) -> subprocess.CompletedProcess[str]:
    extra = env["tmp"] / "vars.json"
    extra.write_text(json.dumps({"net_mtu_interfaces": [{"name": "eth0", "mtu": mtu}],
                                 "net_mtu_verify_interface": "eth0", "net_mtu_persist": "none"}))
    run_env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(env["colls"]),
               "ANSIBLE_NOCOLOR": "1", "ANSIBLE_SSH_ARGS": "-o ControlMaster=no"}
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(env["lab"].inventory),
                           str(env["playbook"]), "-e", f"@{extra}"], capture_output=True,
                          text=True, env=run_env, timeout=400, check=False)


def mtu(lab: Lab, node: str) -> int:
    return int(lab.exec(node, ["cat", "/sys/class/net/eth0/mtu"]).stdout)


def test_missing_ping_is_installed_and_drift_up_on_the_ssh_interface_is_lowered(onenet):
    lab = onenet["lab"]
    for node in lab.addresses:
        lab.exec(node, ["dpkg", "--purge", "iputils-ping"])
        assert lab.exec(node, ["sh", "-c", "command -v ping"], check=False).returncode != 0
        lab.exec(node, ["ip", "link", "set", "eth0", "mtu", "1600"])  # drifted up
    res = play(onenet, 1500)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "rc=2" not in res.stdout
    assert "1500-byte DF packets pass" in res.stdout
    for node in lab.addresses:
        assert mtu(lab, node) == 1500
        assert lab.exec(node, ["sh", "-c", "command -v ping"]).stdout.strip()


def test_raising_the_ssh_interface_is_still_refused(onenet):
    lab = onenet["lab"]
    res = play(onenet, 1600)
    assert res.returncode != 0
    assert "raising its MTU from 1500 to 1600 can cut that path" in res.stdout
    assert "net_mtu_allow_connection_interface=true" in res.stdout
    assert all(mtu(lab, node) == 1500 for node in lab.addresses)
