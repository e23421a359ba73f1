"""Inputs through the real CLI (issue 18): inventories as Ansible reads them, every problem one
line, and nothing contacted when an input is refused.

The hosts are a TCP listener of this test on 127.0.0.1 that closes each connection: a refused
input must leave it untouched; an accepted one reaches it (ssh then finds no sshd there, so
the run ends unreachable, exit 2, after the input check has passed)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml


class Listener:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.contacts = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.contacts += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def rdmaprov(*args: str, cwd: Path, env: dict[str, str] | None = None,
             ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RDMAPROV_", "ANSIBLE_"))}
    # A run that got past the input check gives up on the listener quickly.
    base.update(RDMAPROV_SSH_CONTROL_DIR=str(cwd / "cp"), HOME=str(cwd))
    return subprocess.run([sys.executable, "-m", "rdmaprov", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env={**base, **(env or {})},
                          check=False)


def refused(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The problems of a refused input: exit 1, one 'rdmaprov: error:' line each."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith("rdmaprov: error: ") for line in lines), proc.stderr
    return [line.removeprefix("rdmaprov: error: ") for line in lines]


def accepted(proc: subprocess.CompletedProcess[str], lst: Listener) -> None:
    """Past the input check: Ansible ran and tried the host."""
    assert "rdmaprov: error" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert lst.contacts > 0


def test_every_problem_one_line_each_naming_variable_and_source(tmp_path: Path,
                                                                listener: Listener) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text(
        "net_mtu_interfaces_group:\n  - {name: ib0, mtu: 99999, bogus: 1}\n"
        "firewall_state: started\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "node2.yml").write_text("roce_qos_pfc_priority: 8\n")
    inv = tmp_path / "hosts.ini"
    inv.write_text(f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={listener.port} "
                   "rdma_ofed_sorce=inbox\n"
                   f"node2 ansible_host=127.0.0.2 ansible_port={listener.port}\n")
    lines = refused(rdmaprov("bootstrap", "hosts.ini", "--check", "-e", "net_mtu_verify=maybe",
                             cwd=tmp_path))
    assert sorted(lines) == sorted([
        "-e: net_mtu_verify: 'maybe' is not a boolean (true/false)",
        "group_vars/gpu.yml: net_mtu_interfaces_group[0]: unknown key 'bogus'",
        "group_vars/gpu.yml: net_mtu_interfaces_group[0].mtu: 99999 is not a valid MTU "
        "(68..9216)",
        "host_vars/node2.yml: roce_qos_pfc_priority: 8 is not a valid PFC priority (0..7)",
        "hosts.ini: host node1: unknown variable rdma_ofed_sorce (did you mean "
        "rdma_ofed_source?)"])
    assert listener.contacts == 0


def test_a_shared_inventory_and_values_ansible_accepts_go_through(tmp_path: Path,
                                                                  listener: Listener) -> None:
    """Other roles' variables (firewall_*, network_*, kubespray's, DeepOps'), an IPoIB
    connected-mode MTU, 9000.0, and a host without ansible_host whose name resolves."""
    from tests.unit.test_input_check import FOREIGN

    (tmp_path / "group_vars").mkdir()
    shared = {k: v for names in FOREIGN.values() for k, v in names.items()}
    shared.update(net_mtu_default=9000.0, net_mtu_interfaces=[
        {"name": "ib0", "mtu": 65520, "link_type": "ipoib_connected"}])
    (tmp_path / "group_vars" / "all.yml").write_text(yaml.safe_dump(shared))
    (tmp_path / "hosts.ini").write_text(f"[gpu]\nlocalhost ansible_port={listener.port}\n")
    accepted(rdmaprov("bootstrap", "hosts.ini", "--check", cwd=tmp_path), listener)


def test_unclosed_ini_section_names_file_and_line(tmp_path: Path, listener: Listener) -> None:
    (tmp_path / "hosts.ini").write_text(
        f"[nodes]\nnode1 ansible_host=127.0.0.1 ansible_port={listener.port}\n\n"
        "[nodes:vars\nnet_mtu_default=9000\n")
    assert refused(rdmaprov("bootstrap", "hosts.ini", "--check", cwd=tmp_path)) == [
        "hosts.ini: line 4: section header '[nodes:vars' is not closed with ']'"]
    assert listener.contacts == 0


def test_a_host_name_that_does_not_resolve_is_refused(tmp_path: Path,
                                                      listener: Listener) -> None:
    (tmp_path / "hosts.ini").write_text(
        f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={listener.port} "
        "net_mtu_default=1\n"
        f"gpu-nowhere.invalid ansible_port={listener.port}\n")
    lines = refused(rdmaprov("bootstrap", "hosts.ini", "--check", cwd=tmp_path))
    assert len(lines) == 2  # reported with the inventory's other problems
    assert lines[0] == "hosts.ini: host node1: net_mtu_default: 1 is not a valid MTU (68..9216)"
    assert lines[1].startswith("hosts.ini: host gpu-nowhere.invalid: 'gpu-nowhere.invalid' "
                               "does not resolve on this control host")
    assert lines[1].endswith("give the host an ansible_host address, or add the name to DNS "
                             "or /etc/hosts")
    assert listener.contacts == 0


# What the lab's own inventory and most real ones set: the address check asks `ssh -G` with
# these arguments, as the run's ssh will have them (issue 37, item 5).
SSH_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5"


@pytest.mark.parametrize("var", ["ansible_ssh_common_args", "ansible_ssh_extra_args"])
@pytest.mark.parametrize("command", [["validate"], ["bootstrap", "--check"], ["status"]])
def test_with_ssh_arguments_a_host_that_does_not_resolve_is_still_refused(
        tmp_path: Path, listener: Listener, var: str, command: list[str]) -> None:
    (tmp_path / "hosts.ini").write_text(
        f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={listener.port}\n"
        f"gpu-nowhere.invalid ansible_port={listener.port}\n\n"
        f"[all:vars]\n{var}='{SSH_ARGS}'\n")
    lines = refused(rdmaprov(command[0], "hosts.ini", *command[1:], cwd=tmp_path))
    assert len(lines) == 1, lines
    assert lines[0].startswith("hosts.ini: host gpu-nowhere.invalid: 'gpu-nowhere.invalid' "
                               "does not resolve on this control host"), lines
    assert listener.contacts == 0


def test_the_hostname_ssh_would_use_with_the_inventory_arguments_is_checked(
        tmp_path: Path, listener: Listener) -> None:
    """`-F FILE` in the inventory's arguments: ssh's HostName from that file is what must
    resolve (and a name that resolves only through it is not refused)."""
    (tmp_path / "ssh_config").write_text("Host gpu-alias\n  HostName gpu-nowhere.invalid\n"
                                         "Host good.invalid\n  HostName 127.0.0.1\n")
    (tmp_path / "hosts.ini").write_text(
        f"[gpu]\ngpu-alias ansible_port={listener.port}\n"
        f"good.invalid ansible_port={listener.port}\n\n"
        f"[all:vars]\nansible_ssh_common_args='-F {tmp_path / 'ssh_config'} {SSH_ARGS}'\n")
    lines = refused(rdmaprov("validate", "hosts.ini", cwd=tmp_path))
    assert lines == [
        "hosts.ini: host gpu-alias: 'gpu-alias' (ssh's HostName gpu-nowhere.invalid) does not "
        f"resolve on this control host ({socket_error('gpu-nowhere.invalid')}); give the host "
        "an ansible_host address, or add the name to DNS or /etc/hosts"]
    assert listener.contacts == 0


def socket_error(name: str) -> str:
    try:
        socket.getaddrinfo(name, None)
    except socket.gaierror as exc:
        return str(exc.strerror)
    raise AssertionError(f"{name} resolves here")


def test_a_host_behind_a_jump_host_is_not_refused(tmp_path: Path, listener: Listener) -> None:
    """Through ProxyJump the name is resolved on the jump host: not refused here. The run goes
    to the jump host (this test's listener), so the input check was passed."""
    (tmp_path / "hosts.ini").write_text(
        "[gpu]\nbehind-bastion.invalid\n\n"
        f"[all:vars]\nansible_ssh_common_args='-J nobody@127.0.0.1:{listener.port} "
        f"{SSH_ARGS}'\n")
    accepted(rdmaprov("bootstrap", "hosts.ini", "--check", "--no-validate", cwd=tmp_path),
             listener)


def test_ssh_arguments_ansible_cannot_split_are_refused(tmp_path: Path,
                                                        listener: Listener) -> None:
    (tmp_path / "hosts.ini").write_text(
        f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={listener.port} "
        "ansible_ssh_extra_args='-o \"ProxyCommand=nc %h %p'\n")
    assert refused(rdmaprov("validate", "hosts.ini", cwd=tmp_path)) == [
        "hosts.ini: host node1: ansible_ssh_extra_args: '-o \"ProxyCommand=nc %h %p' is not "
        "a list of ssh arguments (No closing quotation)"]
    assert listener.contacts == 0


def script_inventory(path: Path, port: int, hostvars: dict) -> Path:
    doc = {"gpu": {"hosts": ["node1"]},
           "_meta": {"hostvars": {"node1": {"ansible_host": "127.0.0.1", "ansible_port": port,
                                            **hostvars}}}}
    path.write_text(f"#!{sys.executable}\nimport json, sys\n"
                    f"print(json.dumps({doc!r} if '--list' in sys.argv else {{}}))\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_script_inventory_is_read_and_its_variables_checked(tmp_path: Path,
                                                              listener: Listener) -> None:
    script_inventory(tmp_path / "bad.py", listener.port, {"net_mtu_default": 99999})
    assert refused(rdmaprov("bootstrap", "bad.py", "--check", cwd=tmp_path)) == [
        "bad.py: host node1: net_mtu_default: 99999 is not a valid MTU (68..9216)"]
    assert listener.contacts == 0
    script_inventory(tmp_path / "good.py", listener.port, {"net_mtu_default": 9000})
    accepted(rdmaprov("bootstrap", "good.py", "--check", cwd=tmp_path), listener)


def test_ansible_cfg_in_the_current_directory_is_read(tmp_path: Path) -> None:
    """./ansible.cfg is found the way ansible-playbook finds it: its enabled inventory
    plugins decide what parses (here: only ini, so a YAML inventory is refused)."""
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n    node1:\n      ansible_host: 127.0.0.1\n"
                   "      net_mtu_default: 99999\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert refused(rdmaprov("bootstrap", str(inv), "--check", cwd=elsewhere)) == [
        f"{inv}: host node1: net_mtu_default: 99999 is not a valid MTU (68..9216)"]
    (tmp_path / "ansible.cfg").write_text("[inventory]\nenable_plugins = ini\n")
    lines = refused(rdmaprov("bootstrap", "hosts.yml", "--check", cwd=tmp_path))
    assert len(lines) == 1 and lines[0].startswith("hosts.yml: ")
    assert "net_mtu_default" not in lines[0]
    # $ANSIBLE_CONFIG outranks ./ansible.cfg.
    other = tmp_path / "all-plugins.cfg"
    other.write_text("[defaults]\n")
    lines = refused(rdmaprov("bootstrap", "hosts.yml", "--check", cwd=tmp_path,
                             env={"ANSIBLE_CONFIG": str(other)}))
    assert lines == ["hosts.yml: host node1: net_mtu_default: 99999 is not a valid MTU "
                     "(68..9216)"]


def test_an_unknown_set_name_is_named_as_set(tmp_path: Path, listener: Listener) -> None:
    (tmp_path / "hosts.ini").write_text(
        f"node1 ansible_host=127.0.0.1 ansible_port={listener.port}\n")
    assert refused(rdmaprov("reconfigure", "hosts.ini", "--check", "--set",
                            "net_mtu_defualt=9000", cwd=tmp_path)) == [
        "--set: unknown variable net_mtu_defualt (did you mean net_mtu_default?); no rdmaprov "
        "role declares it"]
    assert refused(rdmaprov("reconfigure", "hosts.ini", "--check", "--set",
                            "net_mtu_default=70000", cwd=tmp_path)) == [
        "--set: net_mtu_default: 70000 is not a valid MTU (68..9216)"]
    assert listener.contacts == 0


def test_a_control_dir_in_tmp_is_accepted_when_safe() -> None:
    from rdmaprov import settings
    from rdmaprov.errors import UserError

    base = Path(tempfile.mkdtemp(prefix="hv", dir="/tmp"))
    env = os.environ.copy()
    try:
        os.environ["RDMAPROV_SSH_CONTROL_DIR"] = str(base / "x")
        one, two = settings.control_path_dir("inventory A"), settings.control_path_dir("B")
        assert one.parent == two.parent == base / "x" and one != two
        assert stat.S_IMODE((base / "x").stat().st_mode) == 0o700
        assert settings.control_path_dir("inventory A") == one  # re-runs share masters
        # A parent another user could write into (no sticky bit) is refused, naming it.
        base.chmod(0o777)
        os.environ["RDMAPROV_SSH_CONTROL_DIR"] = str(base / "y")
        with pytest.raises(UserError, match=f"SSH control directory under {base}, which a "
                                            "directory, owner uid"):
            settings.control_path_dir("A")
        base.chmod(0o700)
        (base / "x").chmod(0o755)
        os.environ["RDMAPROV_SSH_CONTROL_DIR"] = str(base / "x")
        with pytest.raises(UserError, match="mode 0700"):
            settings.control_path_dir("A")
    finally:
        os.environ.clear()
        os.environ.update(env)
        subprocess.run(["rm", "-rf", str(base)], check=True)


def test_an_inventory_directory_is_walked_as_ansible_walks_it(tmp_path: Path,
                                                              listener: Listener) -> None:
    """Each file of the directory parsed by the enabled plugins (README.md, *.bak skipped as
    Ansible skips them), group_vars/ beside them, each problem naming its file."""
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts").write_text(f"[gpu]\nnode1 ansible_host=127.0.0.1 "
                               f"ansible_port={listener.port}\n")
    (inv / "more.yml").write_text(f"all:\n  hosts:\n    node2:\n      ansible_host: 127.0.0.2\n"
                                  f"      ansible_port: {listener.port}\n"
                                  "      net_mtu_interfaces: [{name: ib0, mtu: 65520}]\n")
    (inv / "group_vars" / "gpu.yml").write_text("net_mtu_default: 70000\n")
    (inv / "README.md").write_text("# not an inventory [[[\n")
    (inv / "hosts.bak").write_text("[gpu\n")
    assert sorted(refused(rdmaprov("bootstrap", "inv", "--check", cwd=tmp_path))) == [
        "inv/group_vars/gpu.yml: net_mtu_default: 70000 is not a valid MTU (68..9216)",
        "inv/more.yml: host node2: net_mtu_interfaces[0].mtu: 65520 is not a valid MTU "
        "(68..9216); for an IPoIB interface set its link_type (ipoib_datagram: up to 4092, "
        "ipoib_connected: up to 65520)"]
    (inv / "broken").write_text("[gpu\nnode3\n")
    assert refused(rdmaprov("bootstrap", "inv", "--check", cwd=tmp_path)) == [
        "inv/broken: line 1: section header '[gpu' is not closed with ']'"]
    assert listener.contacts == 0
