"""ansible-playbook's flags, as its users type them, on rdmaprov's playbook-running commands.

Each flag means what ansible-playbook's own --help says it means; what reaches ansible-playbook
is read back from the command ansible-runner recorded in a kept artifacts dir. --list-hosts and
--list-tasks contact no host (the inventory's addresses answer nothing here)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

RDMAPROV = str(Path(sys.executable).parent / "rdmaprov")
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")

# rdmaprov's flag -> ansible-playbook's flag of the same meaning (its --help lists each).
MIRRORED = {
    "-i": "-i", "-C": "--check", "-D": "--diff", "-u": "--user", "--private-key": "--private-key",
    "-k": "--ask-pass", "--connection-password-file": "--connection-password-file",
    "-K": "--ask-become-pass", "--become-password-file": "--become-password-file",
    "-J": "--ask-vault-password", "--vault-password-file": "--vault-password-file",
    "--list-hosts": "--list-hosts", "--list-tasks": "--list-tasks",
}


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.ini"
    # TEST-NET addresses: nothing answers there, and nothing here may try.
    path.write_text("[gpu]\nnode1 ansible_host=192.0.2.1\nnode2 ansible_host=192.0.2.2\n")
    return path


def rdmaprov(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RDMAPROV, *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def recorded_command(art: Path) -> list[str]:
    [command] = art.glob("artifacts/*/command")
    return json.loads(command.read_text())["command"]


def test_every_mirrored_flag_is_ansible_playbooks_own() -> None:
    helptext = subprocess.run([ANSIBLE_PLAYBOOK, "--help"], capture_output=True, text=True,
                              check=True).stdout
    for theirs in MIRRORED.values():
        assert re.search(rf"(^|[\s,]){re.escape(theirs)}([\s,=]|$)", helptext, re.M), theirs
    ours_help = rdmaprov("bootstrap", "--help").stdout
    for ours in MIRRORED:
        assert re.search(rf"(^|[\s,]){re.escape(ours)}([\s,=]|$)", ours_help, re.M), ours


def test_inventory_by_dash_i_and_list_hosts_touch_no_host(inv: Path) -> None:
    for cmd in ("bootstrap", "reconfigure", "validate"):
        res = rdmaprov(cmd, "-i", str(inv), "--list-hosts", "-l", "node2")
        assert (res.returncode, res.stdout, res.stderr) == (0, "node2\n", ""), cmd
    res = rdmaprov("bootstrap", str(inv), "--list-hosts")
    assert res.stdout.split() == ["node1", "node2"]


def test_validate_lists_its_own_playbooks_tasks(inv: Path) -> None:
    res = rdmaprov("validate", "-i", str(inv), "--list-tasks")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("playbook: ") and "validate.yml" in res.stdout.splitlines()[0]


def test_inventory_twice_or_never_is_one_usage_line(inv: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.ini"
    other.write_text("[gpu]\nnode9 ansible_host=192.0.2.9\n")
    for argv, said in ((["-i", str(inv), str(other)], "two inventories"),
                       (["-i", str(inv), "-i", str(other)], "given more than once"),
                       ([], "required: inventory (or -i INVENTORY)")):
        res = rdmaprov("bootstrap", *argv)
        assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
        assert said in res.stderr and "see 'rdmaprov bootstrap --help'" in res.stderr


def test_an_unknown_flag_points_at_the_sub_commands_help(inv: Path) -> None:
    res = rdmaprov("bootstrap", str(inv), "--ask-sudo-pass")
    assert res.returncode == 1
    assert res.stderr == ("rdmaprov bootstrap: error: unrecognized arguments: --ask-sudo-pass "
                          "(see 'rdmaprov bootstrap --help')\n")


def test_user_key_and_password_files_reach_ansible_playbook(inv: Path, tmp_path: Path) -> None:
    key, become, vault = (tmp_path / n for n in ("id_test", "become.txt", "vault.txt"))
    for f in (key, become, vault):
        f.write_text("not-a-secret-of-this-test\n")
    art = tmp_path / "art"
    res = rdmaprov("bootstrap", "-i", str(inv), "-C", "-D", "-u", "admin", "--private-key",
                   str(key), "--become-password-file", str(become), "--vault-password-file",
                   str(vault), "--list-tasks", "--keep-artifacts", str(art))
    assert res.returncode == 0, res.stderr
    assert "rdmaprov.cluster.preflight" in res.stdout  # the site playbook's tasks, listed
    argv = recorded_command(art)
    for pair in (["--user", "admin"], ["--private-key", str(key)],
                 ["--become-password-file", str(become)], ["--vault-password-file", str(vault)]):
        i = argv.index(pair[0])
        assert argv[i:i + 2] == pair
    assert {"--check", "--diff", "--list-tasks"} <= set(argv)


def test_a_missing_password_file_is_one_line_before_any_host(inv: Path) -> None:
    res = rdmaprov("bootstrap", str(inv), "--become-password-file", "/nonexistent/pw")
    assert res.returncode == 1
    assert res.stderr == ("rdmaprov: error: --become-password-file /nonexistent/pw: no readable "
                          "file there\n")


def test_ask_become_pass_without_a_terminal_says_so(inv: Path) -> None:
    res = subprocess.run([RDMAPROV, "bootstrap", "-K", str(inv)], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, start_new_session=True, timeout=60)
    assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "-K/--ask-become-pass: no terminal to ask the password on" in res.stderr


def test_ask_become_pass_asks_once_and_leaves_the_password_nowhere(inv: Path,
                                                                   tmp_path: Path) -> None:
    art = tmp_path / "art"
    secret = "pw-7f3a9c-only-typed"
    child = pexpect.spawn(RDMAPROV, ["bootstrap", "-K", str(inv), "--list-tasks",
                                     "--keep-artifacts", str(art)], encoding="utf-8", timeout=120)
    child.expect("BECOME password: ")
    child.sendline(secret)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    argv = recorded_command(art)
    path = Path(argv[argv.index("--become-password-file") + 1])
    assert not path.exists() and not path.parent.exists()  # removed when rdmaprov exited
    assert secret not in " ".join(argv)
    for f in art.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


def test_ask_become_pass_is_asked_once_per_command_however_often_its_options_are_built(
        inv: Path, tmp_path: Path, monkeypatch) -> None:
    """bootstrap builds its run options again for its validation step; -K must not ask twice."""
    from rdmaprov import cli, run_options
    from rdmaprov.cli import options

    asked: list[str] = []

    def ask(flag: str, prompt: str) -> Path:
        asked.append(flag)
        path = tmp_path / "pw"
        path.write_text("secret\n")
        return path

    monkeypatch.setattr(run_options, "asked_secret", ask)
    args = cli.build_parser("bootstrap").parse_args(["bootstrap", "-K", str(inv)])
    first, second = options.of(args), options.of(args)
    assert asked == ["-K/--ask-become-pass"]
    assert first.connection == second.connection
    assert first.connection.become_password_file == tmp_path / "pw"


def test_probe_takes_the_inventory_and_connection_flags_for_its_fleet_run(tmp_path: Path) -> None:
    """`probe -i INV -u admin` means what ansible-playbook's -i and -u mean (this host, through a
    local connection, answers); without an inventory a connection flag means nothing: refused."""
    inv = tmp_path / "inv.ini"
    inv.write_text(f"[gpu]\nnode1 ansible_connection=local ansible_python_interpreter="
                   f"{sys.executable}\n")
    art = tmp_path / "art"
    res = rdmaprov("probe", "-i", str(inv), "-u", "admin", "--json", "--keep-artifacts", str(art))
    assert res.returncode in (0, 2), res.stderr
    assert "node1" in json.loads(res.stdout)["hosts_probed"], res.stdout
    argv = recorded_command(art)
    assert argv[argv.index("--user") + 1] == "admin", argv

    alone = rdmaprov("probe", "-u", "admin")
    assert alone.returncode == 1
    assert alone.stderr.splitlines() == [
        "rdmaprov: error: -u/--user: needs an INVENTORY: it is for a probe of an inventory's "
        "hosts through Ansible"], alone.stderr
    key = rdmaprov("probe", "-i", str(inv), "--private-key", "/nonexistent/key")
    assert key.returncode == 1
    assert key.stderr == ("rdmaprov: error: --private-key /nonexistent/key: no readable file "
                          "there\n")
