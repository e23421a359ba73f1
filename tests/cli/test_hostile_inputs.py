"""Values that would reach a host's shell, files or units are refused through the real CLI
(issue 23): one line per problem, exit 1, and the host (a TCP listener of this test that counts
every connection) is never contacted — by bootstrap, bootstrap --check and reconfigure alike,
from the inventory, -e or --set; and validate's run flags the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_inputs import Listener, listener, rdmaprov, refused  # noqa: F401  (fixture)

# (inventory variable line in YAML, the refusal's line after "<where>: ")
HOSTILE = [
    ("firewall_nft_dir: '/x$(touch PWNED)'",
     "firewall_nft_dir: '/x$(touch PWNED)' is not an absolute path (letters, digits and "
     "_@+=:,./- only)"),
    ("net_mtu_interfaces: [{name: 'eth1;touch PWNED', mtu: 9000}]",
     "net_mtu_interfaces[0].name: 'eth1;touch PWNED' is not a Linux interface name"),
    ("roce_qos_interfaces: ['`touch PWNED`']",
     "roce_qos_interfaces[0]: '`touch PWNED`' is not a Linux interface name"),
    ("net_mtu_interfaces_host: [{name: 'averyveryverylongname', mtu: 9000}]",
     "net_mtu_interfaces_host[0].name: 'averyveryverylongname' is not a Linux interface name"),
    ("nccl_env_conf_path: '/etc/nccl conf'",
     "nccl_env_conf_path: '/etc/nccl conf' is not an absolute path"),
    ("firewall_nft_table: 'x; touch PWNED'",
     "firewall_nft_table: 'x; touch PWNED' is not an nftables name"),
    ("net_mtu_unit_name: \"x'.service\"", "net_mtu_unit_name: \"x'.service\" is not a systemd "
     "service name"),
    ("nccl_validate_image: ''", "nccl_validate_image: '' is not a container image reference"),
    ("nccl_validate_timeout: -5", "nccl_validate_timeout: -5 is not a valid number of seconds"),
    ("net_mtu_ping_count: 0", "net_mtu_ping_count: 0 is not a valid count"),
]


def _inventory(tmp_path: Path, port: int, line: str) -> Path:
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n    node1:\n      ansible_host: 127.0.0.1\n"
                   f"      ansible_port: {port}\n      {line}\n")
    return inv


@pytest.mark.parametrize(("line", "problem"), HOSTILE, ids=[h[0][:30] for h in HOSTILE])
@pytest.mark.parametrize("command", [["bootstrap"], ["bootstrap", "--check"],
                                     ["reconfigure", "--check"], ["reconfigure"]])
def test_a_hostile_inventory_value_is_refused_before_contact(
        tmp_path: Path, listener: Listener, command: list[str], line: str,  # noqa: F811
        problem: str) -> None:
    _inventory(tmp_path, listener.port, line)
    lines = refused(rdmaprov(command[0], "hosts.yml", *command[1:], cwd=tmp_path))
    assert len(lines) == 1
    assert lines[0].startswith("hosts.yml: host node1: " + problem), lines
    assert listener.contacts == 0
    assert not (tmp_path / "PWNED").exists()


def test_extra_vars_and_set_are_judged_the_same(tmp_path: Path,
                                                listener: Listener) -> None:  # noqa: F811
    (tmp_path / "hosts.ini").write_text(
        f"node1 ansible_host=127.0.0.1 ansible_port={listener.port}\n")
    assert refused(rdmaprov("bootstrap", "hosts.ini", "--check", "-e",
                            "firewall_nft_dir=/x;touch", cwd=tmp_path)) == [
        "-e: firewall_nft_dir: '/x;touch' is not an absolute path (letters, digits and "
        "_@+=:,./- only)"]
    assert refused(rdmaprov("reconfigure", "hosts.ini", "--set", "roce_qos_interfaces=[\"a b\"]",
                            cwd=tmp_path))[0].startswith(
        "--set: roce_qos_interfaces[0]: 'a b' is not a Linux interface name")
    assert listener.contacts == 0


@pytest.mark.parametrize(("flags", "env", "line"), [
    (["--max-bytes", "lots"], {},
     "--max-bytes/RDMAPROV_VALIDATE_MAX_BYTES: 'lots' is not a size in bytes, e.g. 4096, 512K, "
     "256M, 1G"),
    (["--timeout", "-5"], {},
     "--timeout/RDMAPROV_VALIDATE_TIMEOUT: -5 is not a valid number of seconds (1..604800)"),
    (["--timeout", "lots"], {}, "--timeout/RDMAPROV_VALIDATE_TIMEOUT: 'lots' is not a number"),
    (["--image", ""], {}, "--image/RDMAPROV_VALIDATE_IMAGE: '' is not a container image "
     "reference (NAME[:TAG][@DIGEST], no whitespace or quotes)"),
    (["--image", "x;touch PWNED"], {}, "--image/RDMAPROV_VALIDATE_IMAGE: 'x;touch PWNED' is not "
     "a container image reference (NAME[:TAG][@DIGEST], no whitespace or quotes)"),
    (["--bw-fraction", "2"], {}, "--bw-fraction/RDMAPROV_VALIDATE_BW_FRACTION: 2.0 is not a "
     "valid fraction (more than 0, at most 1)"),
    (["--min-busbw", "fast"], {}, "--min-busbw/RDMAPROV_VALIDATE_MIN_BUSBW: 'fast' is not a "
     "number"),
    ([], {"RDMAPROV_VALIDATE_MAX_BYTES": "1T"},
     "--max-bytes/RDMAPROV_VALIDATE_MAX_BYTES: '1T' is not a size in bytes, e.g. 4096, 512K, "
     "256M, 1G"),
    ([], {"RDMAPROV_VALIDATE_TIMEOUT": "0"},
     "--timeout/RDMAPROV_VALIDATE_TIMEOUT: 0 is not a valid number of seconds (1..604800)"),
])
def test_validate_flags_are_refused_before_contact(
        tmp_path: Path, listener: Listener, flags: list[str],  # noqa: F811
        env: dict[str, str], line: str) -> None:
    (tmp_path / "hosts.ini").write_text(
        f"node1 ansible_host=127.0.0.1 ansible_port={listener.port}\n")
    assert refused(rdmaprov("validate", "hosts.ini", *flags, cwd=tmp_path, env=env)) == [line]
    assert listener.contacts == 0
    assert not (tmp_path / "PWNED").exists()


def _laughs(levels: int) -> str:
    """YAML whose aliases expand tenfold per level (10**levels values from a ~1 KiB file)."""
    lines = ['      l0: &l0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"      l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


PATHOLOGICAL = {
    # name: (file name, content maker, the refusal after "<file>: ")
    "aliases": ("hosts.yml", lambda port: (
        "all:\n  hosts:\n    node1:\n      ansible_host: 127.0.0.1\n"
        f"      ansible_port: {port}\n" + _laughs(9)),
        "its aliases (*name) expand to more than 1000000 values; refused"),
    "nesting": ("hosts.yml", lambda port: (
        "all:\n  hosts:\n    node1:\n      ansible_host: 127.0.0.1\n"
        f"      ansible_port: {port}\n      deep: " + "[" * 50000 + "]" * 50000 + "\n"),
        "line 6: nested more than 64 levels deep; refused"),
    "size": ("hosts.ini", lambda port: (
        f"node1 ansible_host=127.0.0.1 ansible_port={port}\n" + "# padding\n" * 1_800_000),
        "17.2 MiB; inventory and variable files over 16 MiB are refused"),
    "host range": ("hosts.ini", lambda port: (
        f"node[0:99999999] ansible_host=127.0.0.1 ansible_port={port}\n"),
        "line 1: host range [0:99999999] stands for 100000000 hosts; more than 100000 are "
        "refused"),
}


@pytest.mark.parametrize("case", sorted(PATHOLOGICAL))
def test_a_pathological_inventory_ends_at_once(tmp_path: Path, listener: Listener,  # noqa: F811
                                               case: str) -> None:
    """Each is refused before Ansible parses it (which would run for minutes: rdmaprov()'s
    subprocess timeout is what proves it does not hang)."""
    name, content, problem = PATHOLOGICAL[case]
    (tmp_path / name).write_text(content(listener.port))
    assert refused(rdmaprov("bootstrap", name, "--check", cwd=tmp_path)) == [
        f"{name}: {problem}"]
    assert listener.contacts == 0


def test_a_pathological_vars_file_ends_at_once(tmp_path: Path,
                                               listener: Listener) -> None:  # noqa: F811
    (tmp_path / "hosts.ini").write_text(
        f"node1 ansible_host=127.0.0.1 ansible_port={listener.port}\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all").write_text("x:\n" + _laughs(9).replace("      ", "  "))
    assert refused(rdmaprov("bootstrap", "hosts.ini", cwd=tmp_path)) == [
        "group_vars/all: its aliases (*name) expand to more than 1000000 values; refused"]
    (tmp_path / "big.yml").write_text("x:\n" + _laughs(9).replace("      ", "  "))
    (tmp_path / "group_vars" / "all").unlink()
    assert refused(rdmaprov("bootstrap", "hosts.ini", "-e", "@big.yml", cwd=tmp_path)) == [
        "big.yml: its aliases (*name) expand to more than 1000000 values; refused"]
    assert listener.contacts == 0


def test_shared_aliases_within_bounds_are_read(tmp_path: Path,
                                               listener: Listener) -> None:  # noqa: F811
    """Anchors and aliases as people use them (a shared block) are not refused."""
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    common: &common {net_mtu_default: 9000}\n  hosts:\n"
        f"    node1: {{ansible_host: 127.0.0.1, ansible_port: {listener.port}, extra: *common}}\n"
        "    node2: {ansible_host: 127.0.0.2, ansible_port: 1, extra: *common}\n"
        "  children:\n    gpu:\n      hosts:\n        node[3:9]: {ansible_connection: local}\n")
    proc = rdmaprov("bootstrap", "hosts.yml", "--check", "--limit", "node1", cwd=tmp_path)
    assert "rdmaprov: error" not in proc.stderr, proc.stderr
