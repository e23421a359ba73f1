"""Preflight on hosts unlike the lab's defaults (issue 15 item 5), for real against a lab node:
interfaces named with dots and dashes are reported with their MTU, and a node without the `ip`
command stops at one line naming iproute2, before any role acts, instead of a template error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

RDMAPROV = [sys.executable, "-m", "rdmaprov"]


def preflight(inventory) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RDMAPROV, "bootstrap", str(inventory), "--check", "--no-validate",
                           "--tags", "preflight", "-v"],
                          capture_output=True, text=True, timeout=600, check=False)


def test_interface_names_with_dots_and_dashes(lab) -> None:
    node = lab.nodes[0]
    lab.exec(node, ["sh", "-c", "ip link add ib0-1 type veth peer name enp1s0f0.100 && "
                                "ip link set ib0-1 mtu 4092"])
    try:
        p = preflight(lab.inventory)
    finally:
        lab.exec(node, ["ip", "link", "del", "ib0-1"])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    report = [ln.strip() for ln in p.stdout.splitlines() if ln.strip().startswith("interfaces: ")]
    assert report, p.stdout[-3000:]
    assert "enp1s0f0.100 mtu 1500 no IPv4" in report[0] and "ib0-1 mtu 4092 no IPv4" in report[0]


def test_host_without_iproute2_gets_one_line(lab) -> None:
    node = lab.nodes[0]
    # The binary gone as after `dpkg -r --force-depends iproute2` (tried by hand on a lab node:
    # the same line), but restorable for the tests that share this lab.
    lab.exec(node, ["mv", "/usr/bin/ip", "/usr/bin/ip.rdmaprov-test"])
    try:
        before = lab.etc_digest(node)
        p = preflight(lab.inventory)
        assert before == lab.etc_digest(node)
    finally:
        lab.exec(node, ["mv", "/usr/bin/ip.rdmaprov-test", "/usr/bin/ip"])
    assert p.returncode == 2, p.stdout[-3000:] + p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "has no attribute" not in p.stdout
    line = (f"{node}: failed at 'preflight : Check the host and report what it has': "
            "no network interface facts: this host has no `ip` command, so Ansible's network "
            "facts have no interface list: install iproute2 (apt-get install iproute2 / dnf "
            "install iproute); rdmaprov needs them to find the interface carrying the "
            "connection and keep it up")
    assert line in (p.stdout + p.stderr).splitlines(), p.stdout[-3000:] + p.stderr[-2000:]


def preflight_here(tmp_path, interpreter: str) -> subprocess.CompletedProcess[str]:
    """A real local-connection run on this machine (read-only: --check, preflight tags only)."""
    if os.geteuid() != 0:
        pytest.skip("site.yml becomes root; under a local connection that needs root here")
    inv = tmp_path / "local.ini"
    inv.write_text(f"[local]\nthishost ansible_connection=local "
                   f"ansible_python_interpreter={interpreter}\n")
    return preflight(inv)


def test_local_connection_reports_without_ssh_connection(tmp_path) -> None:
    """As on the H200: no SSH_CONNECTION, no connection interface to find, and the report says
    so."""
    p = preflight_here(tmp_path, "/usr/bin/python3")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    lines = [ln.strip() for ln in p.stdout.splitlines()]
    assert "connection: local (Ansible runs on this host: no network path to keep up)" in lines
    assert any(ln.startswith("kernel modules: ") for ln in lines), p.stdout[-3000:]


def _system_python_imports_apt() -> bool:
    return subprocess.run(["/usr/bin/python3", "-c", "import apt"], capture_output=True,
                          check=False).returncode == 0


def test_an_interpreter_without_apt_bindings(tmp_path) -> None:
    """Driven with a venv's Python (as the H200 with its torch venv): where the system's
    python3 has python3-apt, Ansible's apt module runs under it and preflight goes on silently;
    where neither has it, preflight goes on with a note (the apt module installs python3-apt and
    respawns under /usr/bin/python3; host_report.apt_plan, unit-tested)."""
    p = preflight_here(tmp_path, '"{{ ansible_playbook_python }}"')
    if _system_python_imports_apt():
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
        assert "cannot import apt" not in p.stdout and "python3-apt:" not in p.stdout
        return
    # Neither has them: a real run's apt module installs python3-apt and respawns under
    # /usr/bin/python3, so preflight goes on with the note (ansible.modules.apt).
    assert p.returncode == 0, p.stdout[-3000:]
    assert "cannot import apt" not in p.stdout
    assert "python3-apt: not installed" in p.stdout


def test_a_host_without_python3_apt_goes_through_check(lab) -> None:
    """A Debian node whose system python3 has no python3-apt (as the H200): bootstrap --check
    says once that a real run installs it, skips the apt tasks that need it, and changes
    nothing (python3-apt is still absent after it)."""
    node = lab.nodes[0]
    hidden = "/root/rdmaprov-test-apt"
    lab.exec(node, ["sh", "-c", f"mkdir -p {hidden} && mv /usr/lib/python3/dist-packages/apt "
                                f"/usr/lib/python3/dist-packages/apt_pkg*.so {hidden}/"])
    try:
        assert lab.exec(node, ["python3", "-c", "import apt"], check=False).returncode != 0
        before = lab.etc_digest(node)
        p = subprocess.run([*RDMAPROV, "bootstrap", str(lab.inventory), "--check",
                            "--no-validate", "--limit", node, "-v"],
                           capture_output=True, text=True, timeout=900, check=False)
        assert before == lab.etc_digest(node)
        still_absent = lab.exec(node, ["python3", "-c", "import apt"], check=False).returncode
    finally:
        lab.exec(node, ["sh", "-c", f"mv {hidden}/* /usr/lib/python3/dist-packages/ && "
                                    f"rmdir {hidden}"])
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert still_absent != 0
    note = ("python3-apt: not installed; a real run installs it (Ansible's apt module does, at "
            "its first use); --check skips the apt tasks that need it")
    assert sum(note in line for line in p.stdout.splitlines()) == 1, p.stdout[-4000:]
    assert "cannot import apt" not in p.stdout
