"""A lab node's PID 1 is judged by /proc: alive while it is node-init.sh or systemd, or in the
middle of an exec (an empty cmdline that is no zombie); dead once it is a zombie or gone."""

from __future__ import annotations

import subprocess
import time

from rdmaprov.lab import Lab


def test_a_node_process_is_alive_until_it_is_a_zombie_or_gone() -> None:
    lab = Lab("urun")
    sleeper = subprocess.Popen(["sh", "-c", "sleep 30", "node-init.sh"])
    try:
        assert lab._running({"pid": sleeper.pid})
    finally:
        sleeper.kill()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and lab._running({"pid": sleeper.pid}):
        time.sleep(0.05)  # killed, not yet waited for: a zombie, with an empty cmdline
    assert not lab._running({"pid": sleeper.pid})
    sleeper.wait()
    assert not lab._running({"pid": sleeper.pid})
    assert not lab._running({"pid": 0})


def test_nodes_the_inotify_cap_would_kill_are_refused_in_one_line(tmp_path, monkeypatch) -> None:
    import pytest

    from rdmaprov.errors import UserError
    from rdmaprov.lab import host as lab_mod

    cap = tmp_path / "max_user_instances"
    monkeypatch.setattr(lab_mod, "INOTIFY_LIMIT", cap)
    in_use = 40
    monkeypatch.setattr(lab_mod, "inotify_in_use", lambda: in_use)
    cap.write_text(f"{in_use + 2 * lab_mod.INOTIFY_PER_NODE}\n")
    lab_mod.check_inotify(2)  # fits
    with pytest.raises(UserError, match=r"3 more lab nodes need about 24 inotify instances.*"
                                        r"fs.inotify.max_user_instances"):
        lab_mod.check_inotify(3)
    lab_mod.check_inotify(0)


def test_the_inventory_names_the_labs_key_and_its_nodes_host_keys(tmp_path) -> None:
    """What `lab up` writes for its user: the private key file (never a host key's text) and
    each node's own host key in known_hosts, checked strictly."""
    from rdmaprov.lab import LabState
    from rdmaprov.lab import inventory as lab_inventory

    nodes_dir = tmp_path / "nodes"
    state = LabState(name="uinv", subnet="10.9.250.0/24", bridge="rdp-uinv", nodes=[
        {"name": f"node{i}", "address": f"10.9.250.1{i}"} for i in (1, 2)])
    for i in (1, 2):
        pub = nodes_dir / f"node{i}" / "upper/etc/ssh/ssh_host_ed25519_key.pub"
        pub.parent.mkdir(parents=True)
        pub.write_text(f"ssh-ed25519 AAAAHOSTKEY{i} root@node{i}\n")
    lab_inventory.write_inventory(state, tmp_path, nodes_dir)
    inventory = (tmp_path / "inventory.ini").read_text().splitlines()
    assert f"ansible_ssh_private_key_file={tmp_path / 'id_ed25519'}" in inventory
    assert "node2 ansible_host=10.9.250.12" in inventory
    assert (f"ansible_ssh_common_args='-o UserKnownHostsFile={tmp_path / 'known_hosts'} "
            "-o StrictHostKeyChecking=yes'") in inventory
    assert (tmp_path / "known_hosts").read_text() == (
        "10.9.250.11 ssh-ed25519 AAAAHOSTKEY1\n10.9.250.12 ssh-ed25519 AAAAHOSTKEY2\n")
    assert not (tmp_path / "group_vars" / "uinv.yml").exists()  # no fabric: no data-path vars


def test_the_check_container_goes_without_mknod_on_every_suite(tmp_path) -> None:
    """A lab node cannot give CAP_MKNOD: the lab's group_vars give the check container docker's
    defaults less MKNOD in the form each docker takes (20.10 drops it; 26 refuses to drop a
    capability it cannot give, so there ALL is dropped and the rest added)."""
    import yaml

    from rdmaprov.lab import LabState
    from rdmaprov.lab import inventory as lab_inventory

    for suite, want in (("bookworm", ["--cap-drop", "MKNOD"]),
                        ("trixie", ["--cap-drop", "ALL", "--cap-add", "CHOWN"])):
        state = LabState(name="ucap", subnet="10.9.251.0/24", bridge="rdp-ucap", nodes=[],
                         fabric_bridge="rdf-ucap", fabric_subnet="10.8.251.0/24", suite=suite)
        lab_inventory.write_group_vars(state, tmp_path)
        doc = yaml.safe_load((tmp_path / "group_vars/lab.yml").read_text())
        args = doc["container_runtime_verify_args"]
        assert args[:len(want)] == want and "MKNOD" not in args[2:], args
