"""reconfigure's --set through the real CLI (issue 39, item 4): a --set another variable
shadows is refused in one line naming the winner before any host is touched; -e and --set take
the same forms; --write FILE records the values in the inventory after a successful rollout,
keeping the file's other lines, and a second run changes nothing."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_inputs import Listener, rdmaprov, refused  # beside this file (rootdir import)

from rdmaprov import inventory
from rdmaprov.cli import main


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[Path, Listener]]:
    """Three hosts; node1 is this test's listener (counts contacts), group lab's eth1 at 9000."""
    lst = Listener()
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "hosts.ini").write_text(
        "[lab]\n" + "".join(f"node{i} ansible_host=127.0.0.{i} ansible_port={lst.port}\n"
                            for i in (1, 2, 3)))
    (tmp_path / "group_vars" / "lab.yml").write_text(
        "---\nnet_mtu_interfaces:\n  - {name: eth1, mtu: 9000}\n")
    yield tmp_path, lst
    lst.close()


def test_a_shadowed_set_is_refused_naming_the_winner(lab: tuple[Path, Listener]) -> None:
    inv, lst = lab
    assert refused(rdmaprov("reconfigure", "hosts.ini", "--set", "net_mtu_default=4000",
                            cwd=inv)) == [
        "--set net_mtu_default=4000 has no effect on eth1 of node[1-3]: net_mtu_interfaces sets "
        "its mtu (group_vars/lab.yml); set net_mtu_interfaces instead"]
    # A host layer outranks the group's list entry by entry.
    (inv / "host_vars" / "node2.yml").write_text(
        "net_mtu_interfaces_host:\n  - {name: eth1, mtu: 1500}\n")
    assert refused(rdmaprov("reconfigure", "hosts.ini", "-l", "node2", "--set",
                            "net_mtu_interfaces=[{name: eth1, mtu: 4000}]", cwd=inv)) == [
        "--set net_mtu_interfaces=[{\"name\": \"eth1\", \"mtu\": 4000}] has no effect on eth1 "
        "of node2: net_mtu_interfaces_host sets it (host_vars/node2.yml); set "
        "net_mtu_interfaces_host instead"]
    assert lst.contacts == 0


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI's main in this process (faster than a new interpreter where no host is run).
    Paths are absolute: Ansible keeps the first working directory it saw per relative path."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_e_takes_the_list_form_set_takes(lab: tuple[Path, Listener],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    inv, lst = lab
    hosts = str(inv / "hosts.ini")
    # The entry without an MTU takes the default: now the --set has an effect, and is run.
    for args in (["-e", "net_mtu_interfaces=[{name: eth1}]", "--set", "net_mtu_default=4000"],
                 ["--set", "net_mtu_interfaces=[{name: eth1}] net_mtu_default=4000"],
                 ["--set", '{"net_mtu_interfaces": [{"name": "eth1"}]}', "--set",
                  "net_mtu_default=4000"]):
        assert run_main(capsys, "reconfigure", hosts, "--list-hosts", *args) == (
            0, "node1\nnode2\nnode3\n", "")
    # eth2 takes it, eth1 does not: a warning line, and the run goes on.
    code, _, err = run_main(capsys, "reconfigure", hosts, "--list-hosts", "-e",
                            "net_mtu_interfaces_group=[{name: eth2}] "
                            "roce_qos_interfaces=[eth1, eth2]",
                            "--set", "net_mtu_default=4000")
    assert code == 0 and err == (
        "rdmaprov: warning: --set net_mtu_default=4000 has no effect on eth1 of node[1-3]: "
        f"net_mtu_interfaces sets its mtu ({inv}/group_vars/lab.yml); set net_mtu_interfaces "
        "instead (it applies to the rest)\n")
    assert lst.contacts == 0


def test_write_refuses_a_file_the_next_bootstrap_would_not_keep(
        lab: tuple[Path, Listener], capsys: pytest.CaptureFixture[str]) -> None:
    inv, lst = lab
    (inv / "group_vars" / "lab.yml").write_text("net_mtu_interfaces:\n  - {name: eth1}\n")
    (inv / "host_vars" / "node3.yml").write_text("net_mtu_default: 1500\n")
    ok = ["reconfigure", str(inv / "hosts.ini"), "--set", "net_mtu_default=4000"]
    for write, line in [
            (inv / "group_vars/all.yml", f"--write {inv}/group_vars/all.yml: node3 would still "
             f"get net_mtu_default=1500 from {inv}/host_vars/node3.yml, which outranks it; "
             "write there instead"),
            (inv / "host_vars/node3.yml", f"--write {inv}/host_vars/node3.yml: node[1-2] are "
             "not host node3, so the next bootstrap would put the old value back there; choose "
             "a file every selected host reads (group_vars/all.yml) or --limit"),
            (inv / "vars.yml", f"--write {inv}/vars.yml: not a .yml file in the group_vars/ or "
             f"host_vars/ of the inventory (e.g. {inv}/group_vars/all.yml)")]:
        assert run_main(capsys, *ok, "--write", str(write)) == (
            1, "", f"rdmaprov: error: {line}\n")
    all_yml = inv / "group_vars" / "all.yml"
    assert run_main(capsys, "reconfigure", str(inv / "hosts.ini"), "--write", str(all_yml)) \
        == (1, "", f"rdmaprov: error: --write {all_yml}: nothing to write (no --set)\n")
    assert lst.contacts == 0 and not all_yml.exists()


PLAY = """\
- name: Stand-in for the roles (a task of every tag)
  hosts: all
  gather_facts: false
  tasks:
    - name: Report the MTU given
      ansible.builtin.debug:
        msg: "net_mtu_default={{ net_mtu_default | default('unset') }}"
      tags: [always]
"""

ALL_YML = """\
---
# Fleet-wide settings (kept by hand).
net_mtu_default: 9000  # the fabric's MTU
# --- QoS
roce_qos_interfaces:
  - eth1
net_mtu_interfaces:
  - name: eth1
"""


def test_write_records_the_value_and_a_second_run_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """A real rollout (ansible-playbook, local connection, a stand-in play), then the file as
    the next bootstrap reads it."""
    (tmp_path / "group_vars").mkdir()
    hosts = tmp_path / "hosts.ini"
    hosts.write_text("[lab]\nnode1 ansible_connection=local\nnode2 ansible_connection=local\n"
                     f"[all:vars]\nansible_python_interpreter={sys.executable}\n")
    all_yml = tmp_path / "group_vars" / "all.yml"
    all_yml.write_text(ALL_YML)
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    monkeypatch.setattr("rdmaprov.cli.reconfigure.find_playbook", lambda name: play)
    monkeypatch.setenv("RDMAPROV_RETRY_DIR", str(tmp_path / "retry"))
    monkeypatch.setenv("RDMAPROV_SSH_CONTROL_DIR", str(tmp_path / "cp"))
    argv = ["reconfigure", str(hosts), "--set", "net_mtu_default=4000",
            "--set", "net_mtu_interfaces=[{name: eth1}, {name: eth2}]", "--write", str(all_yml)]

    assert main([*argv, "--check"]) == 0
    assert "--write" in capsys.readouterr().out and all_yml.read_text() == ALL_YML

    assert main(argv) == 0
    assert "recorded net_mtu_default, net_mtu_interfaces" in capsys.readouterr().out
    assert all_yml.read_text() == ALL_YML.replace("9000  # the fabric", "4000  # the fabric") \
        .replace("  - name: eth1\n", "  - name: eth1\n  - name: eth2\n")
    # What the next bootstrap reads: the new values, without any --set.
    again = inventory.load(hosts)
    assert {h: (v["net_mtu_default"], v["net_mtu_interfaces"])
            for h, v in again.variables.items()} == {
        h: (4000, [{"name": "eth1"}, {"name": "eth2"}]) for h in ("node1", "node2")}

    before = all_yml.stat().st_mtime_ns
    assert main(argv) == 0
    assert "already holds these values; unchanged" in capsys.readouterr().out
    assert all_yml.stat().st_mtime_ns == before
