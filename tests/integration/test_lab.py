"""The lab's nodes are real hosts: own network, own systemd, own sshd, and isolated from the
host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rdmaprov.lab import Lab

pytestmark = pytest.mark.lab


def test_nodes_run_systemd_and_answer_ssh(lab):
    for node in lab.nodes:
        state = lab.exec(node, ["systemctl", "is-system-running"], check=False).stdout.strip()
        assert state in ("running", "degraded"), f"{node}: systemd is {state}"
        failed = lab.exec(node, ["systemctl", "--failed", "--no-legend", "--plain"]).stdout
        assert failed.strip() == "", f"{node}: failed units: {failed}"
        out = subprocess.run([*lab.ssh_argv(node), "hostname"], capture_output=True, text=True,
                             timeout=30, check=True).stdout.strip()
        assert out == node


def test_host_keys_are_checked(lab, tmp_path):
    wrong = tmp_path / "known_hosts"
    first, second = lab.nodes[0], lab.nodes[1]
    # Record the first node's key under the second node's address: SSH must refuse.
    key = next(line for line in lab.dir.joinpath("known_hosts").read_text().splitlines()
               if line.startswith(lab.addresses[first] + " "))
    wrong.write_text(key.replace(lab.addresses[first], lab.addresses[second], 1) + "\n")
    argv = [a if not a.startswith("UserKnownHostsFile=") else f"UserKnownHostsFile={wrong}"
            for a in lab.ssh_argv(second)]
    proc = subprocess.run([*argv, "true"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 255
    assert "HOST IDENTIFICATION HAS CHANGED" in proc.stderr or "verification failed" in proc.stderr


def test_nodes_cannot_change_host_kernel_settings(lab):
    before = Path("/proc/sys/vm/swappiness").read_text()
    proc = lab.exec(lab.nodes[0], ["sh", "-c", "echo 7 > /proc/sys/vm/swappiness"], check=False)
    assert proc.returncode != 0 and "Read-only" in proc.stderr
    assert Path("/proc/sys/vm/swappiness").read_text() == before
    # net.* sysctls are the node's own (its network namespace), so they stay writable.
    host_forward = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    new = "0" if host_forward.strip() == "1" else "1"
    lab.exec(lab.nodes[0], ["sysctl", "-w", f"net.ipv4.ip_forward={new}"])
    assert lab.exec(lab.nodes[0], ["cat", "/proc/sys/net/ipv4/ip_forward"]).stdout.strip() == new
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == host_forward
    assert oct(os.stat("/dev/null").st_mode & 0o777) == "0o666"


def test_nodes_have_no_way_out(lab):
    node = lab.nodes[0]
    routes = lab.exec(node, ["ip", "-4", "route", "show", "default"]).stdout
    assert routes.strip() == ""
    assert "nameserver 127.0.0.1" in lab.exec(node, ["cat", "/etc/resolv.conf"]).stdout


def test_nodes_reach_each_other_and_use_the_local_repo(lab):
    a, b = lab.nodes[0], lab.nodes[1]
    lab.exec(a, ["ping", "-c", "1", "-W", "2", lab.addresses[b]])
    sources = lab.exec(a, ["cat", "/etc/apt/sources.list.d/rdmaprov-lab.list"]).stdout
    assert "file:/srv/rdmaprov-repo" in sources
    assert lab.exec(a, ["ls", "/srv/rdmaprov-repo/Packages"]).returncode == 0


def test_down_leaves_nothing_behind(lab):
    # A second, separate lab: bring it up and down and look for leftovers.
    other = Lab("tdown")
    other.up(nodes=1, log=lambda msg: None)
    pid = other.node_pid("node1")
    other.down(log=lambda msg: None)
    assert not Path(f"/proc/{pid}").exists()
    # Every host-wide name of a lab (netns, bridges, veths, cgroups) carries the lab's name.
    assert "tdown" not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                          text=True).stdout
    assert "tdown" not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
    assert "tdown" not in subprocess.run(["find", "/sys/fs/cgroup", "-maxdepth", "3", "-name",
                                          "*tdown*"], capture_output=True, text=True).stdout
    assert str(other.dir) not in Path("/proc/self/mounts").read_text()
    # The session's lab is untouched.
    assert lab.exec(lab.nodes[0], ["true"]).returncode == 0


def test_node_names_resolve_to_lab_addresses(lab):
    # gloo and NCCL bootstrap advertise the address their own hostname resolves to.
    for node in lab.nodes:
        for other in lab.nodes:
            got = lab.exec(node, ["getent", "ahostsv4", other]).stdout.split()[0]
            assert got == lab.addresses[other], f"{node} resolves {other} to {got}"
