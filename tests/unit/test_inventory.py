"""Inventory and variable validation: parse errors, addresses, argument specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaprov import inventory as inv
from rdmaprov.errors import UserError
from rdmaprov.resources import collection_root

SPEC = """\
argument_specs:
  main:
    options:
      net_mtu_default: {type: int, default: 9000}
      net_mtu_persist: {type: str, choices: [auto, none]}
      net_mtu_verify: {type: bool}
      net_mtu_interfaces:
        type: list
        elements: dict
        options:
          name: {type: str, required: true}
          mtu: {type: int}
  extra:
    options:
      net_mtu_ping_count: {type: int}
"""
QOS_SPEC = """\
argument_specs:
  main:
    options:
      roce_qos_pfc_priority: {type: int}
      roce_qos_dscp: {type: int}
      roce_qos_mode: {type: str}
"""


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    root = tmp_path / "coll"
    for role, text in (("net_mtu", SPEC), ("roce_qos", QOS_SPEC)):
        meta = root / "roles" / role / "meta"
        meta.mkdir(parents=True)
        (meta / "argument_specs.yml").write_text(text)
    return root


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def error(path: Path, collection: Path, **kw) -> str:
    with pytest.raises(UserError) as exc:
        inv.load(path, collection=collection, **kw)
    msg = str(exc.value)
    for line in msg.splitlines():  # one line per problem: "<where>: <what>"
        assert line.strip() == line and ": " in line, msg
    return msg


def test_good_inventory_loads(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini",
              "[gpu]\nnode1 ansible_host=10.0.0.1\nnode2 ansible_host=localhost\n"
              "[gpu:vars]\nnet_mtu_default=9000\nroce_qos_pfc_priority=3\n")
    got = inv.load(p, collection=collection, limit="node2",
                   extra_vars=["net_mtu_verify=true", '{"roce_qos_dscp": 26}'])
    assert got.hosts == ["node1", "node2"] and got.selected == ["node2"]
    # key=value is read by the variable's declared type (rdmaprov.extravars): a bool is a bool.
    assert got.extravars == {"net_mtu_verify": True, "roce_qos_dscp": 26}


def test_missing_file(tmp_path: Path, collection: Path) -> None:
    assert "no such inventory file" in error(tmp_path / "nope.ini", collection)


def test_unparsable_ini_is_an_error_with_its_line(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini", "[gpu]\nnode1\nnode2 oops\n")
    msg = error(p, collection)
    assert msg.endswith("inventory.ini: line 3: Expected key=value host variable assignment, "
                        "got: oops")
    # Ansible's message for this one is poor, but it is still an error, not an empty inventory.
    p.write_text("[gpu]\nnode1\n[broken\n")
    assert error(p, collection).startswith(f"{p}: ")


def test_unparsable_yaml_is_an_error_with_its_line(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "hosts.yml", "all:\n  hosts:\n    a:\n  children: [1\n")
    msg = error(p, collection)
    assert "hosts.yml: line" in msg and "YAML parsing failed" in msg


def test_duplicate_yaml_key(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "hosts.yml", "all:\n  hosts:\n    a:\n    a:\n")
    assert "duplicate mapping key 'a'" in error(p, collection)


def test_duplicate_ini_host_and_conflicting_vars(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini", "[gpu]\nnode1 ansible_host=10.0.0.1\n"
              "node1 ansible_host=10.0.0.2\n")
    msg = error(p, collection)
    assert msg.splitlines() == [
        f"{p}: line 3: host node1 is listed twice in [gpu] (first at line 2)",
        f"{p}: line 3: host node1: ansible_host is '10.0.0.2' here but '10.0.0.1' at line 2"]


def test_empty_inventory(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini", "# nothing\n")
    assert "no hosts" in error(p, collection)


def test_limit_matching_nothing(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini", "node1 ansible_host=10.0.0.1\n")
    assert "--limit nodeX: matches no host" in error(p, collection, limit="nodeX")


@pytest.mark.parametrize(("line", "expected"), [
    ('node2 ansible_host=""', "host node2: ansible_host is empty"),
    ("node2 ansible_host=10.0.0.300", "host node2: '10.0.0.300' is not a valid host name"),
    ("node2 ansible_host=10.0.0.1", "hosts node1 and node2 have the same address 10.0.0.1"),
    ("node2 ansible_host=10.0.0.2 ansible_port=70000", "ansible_port 70000 is out of range"),
])
def test_addresses(tmp_path: Path, collection: Path, line: str, expected: str) -> None:
    p = write(tmp_path, "inventory.ini", f"node1 ansible_host=10.0.0.1\n{line}\n")
    assert expected in error(p, collection)


def test_local_connection_needs_no_address(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini", "localhost ansible_connection=local\n")
    assert inv.load(p, collection=collection).hosts == ["localhost"]


@pytest.mark.parametrize(("assignment", "expected"), [
    ("net_mtu_default=9k", "inventory.ini: host node2: net_mtu_default: '9k' is not an integer"),
    ("net_mtu_default=70000",
     "inventory.ini: host node2: net_mtu_default: 70000 is not a valid MTU (68..9216)"),
    ("roce_qos_pfc_priority=9",
     "inventory.ini: host node2: roce_qos_pfc_priority: 9 is not a valid PFC priority (0..7)"),
    ("roce_qos_dscp=64", "roce_qos_dscp: 64 is not a valid DSCP value (0..63)"),
    ("net_mtu_persist=bogus", "net_mtu_persist: 'bogus' is not one of auto, none"),
    ("net_mtu_defualt=9000",
     "host node2: unknown variable net_mtu_defualt (did you mean net_mtu_default?)"),
    ("net_mtu_ping_count=x", "net_mtu_ping_count: 'x' is not an integer"),
])
def test_host_variables(tmp_path: Path, collection: Path, assignment: str,
                        expected: str) -> None:
    p = write(tmp_path, "inventory.ini",
              f"node1 ansible_host=10.0.0.1\nnode2 ansible_host=10.0.0.2 {assignment}\n")
    assert expected in error(p, collection)


def test_group_vars_file_is_named(tmp_path: Path, collection: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = write(tmp_path, "inventory.ini", "[gpu]\nnode1 ansible_host=10.0.0.1\n")
    write(tmp_path, "group_vars/all.yml",
          "net_mtu_interfaces:\n  - {name: ib0, mtu: 9k}\n")
    msg = error(p, collection)
    assert msg == "group_vars/all.yml: net_mtu_interfaces[0].mtu: '9k' is not an integer"


def test_nested_unknown_and_required_keys(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini", "node1 ansible_host=10.0.0.1\n")
    msg = error(p, collection, extra_vars=['{"net_mtu_interfaces": [{"nam": "ib0"}]}'])
    assert msg.splitlines() == ["-e: net_mtu_interfaces[0]: unknown key 'nam' (did you mean name?)",
                                "-e: net_mtu_interfaces[0]: required key 'name' is missing"]


def test_ini_group_vars_are_named(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini",
              "[gpu]\nnode1 ansible_host=10.0.0.1\n[gpu:vars]\nnet_mtu_verify=maybe\n")
    assert "inventory.ini: group gpu: net_mtu_verify: 'maybe' is not a boolean" in \
        error(p, collection)


def test_templated_and_unrelated_variables_are_left_alone(tmp_path: Path,
                                                           collection: Path) -> None:
    p = write(tmp_path, "hosts.yml",
              "all:\n  hosts:\n    node1:\n      ansible_host: 10.0.0.1\n"
              "      net_mtu_default: '{{ site_mtu }}'\n      my_own_var: 9k\n")
    assert inv.load(p, collection=collection).hosts == ["node1"]


@pytest.mark.parametrize(("value", "expected"), [
    ("@missing.yml", "-e @missing.yml: no such file"),
    ("{bad", "not valid YAML/JSON"),
    ("[1, 2]", "extra vars must be a mapping"),
    ("justaword", "expected key=value"),
])
def test_bad_extra_vars(tmp_path: Path, collection: Path, value: str, expected: str,
                        monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = write(tmp_path, "inventory.ini", "node1 ansible_host=10.0.0.1\n")
    assert expected in error(p, collection, extra_vars=[value])


def test_extra_vars_file_is_named(tmp_path: Path, collection: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = write(tmp_path, "inventory.ini", "node1 ansible_host=10.0.0.1\n")
    write(tmp_path, "site.yml", "roce_qos_pfc_priority: 8\n")
    assert error(p, collection, extra_vars=["@site.yml"]).startswith(
        "site.yml (-e @): roce_qos_pfc_priority: 8 is not a valid PFC priority")


def test_real_roles_specs_are_usable(tmp_path: Path) -> None:
    root = collection_root()
    if not list((root / "roles").glob("*/meta/argument_specs.y*ml")):
        pytest.skip("no role has meta/argument_specs.yml yet")
    specs = inv.load_specs(root)
    assert specs.options
    int_opts = sorted(n for n, o in specs.options.items() if o.get("type") == "int")
    p = write(tmp_path, "inventory.ini", "node1 ansible_host=10.0.0.1\n")
    assert inv.load(p).hosts == ["node1"]
    if int_opts:
        msg = error(p, root, extra_vars=[f"{int_opts[0]}=9k"])
        assert msg == f"-e: {int_opts[0]}: '9k' is not an integer"
    name = sorted(specs.options)[0]
    assert "unknown variable" in error(p, root, extra_vars=[f"{name}_typo=1"])


# -- inputs that must stop before SSH (issue 15 item 8) ----------------------------------------


def test_inventory_that_is_not_utf8_names_line_and_byte(tmp_path: Path, collection: Path) -> None:
    p = tmp_path / "inventory.ini"
    p.write_bytes(b"[gpu]\nnode1 ansible_host=10.0.0.1\n# caf\xe9 rack\n")
    assert error(p, collection) == (
        f"{p}: line 3, byte 6 (0xe9) is not UTF-8; Ansible reads inventories as UTF-8: "
        "convert the file (iconv -t UTF-8)")


def test_group_vars_that_are_not_utf8(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini", "[gpu]\nnode1 ansible_host=10.0.0.1\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars/gpu.yml").write_bytes(b"---\n# \xff\xfe\nnet_mtu_default: 9000\n")
    assert "group_vars/gpu.yml: line 2, byte 3 (0xff) is not UTF-8" in error(p, collection)


@pytest.mark.parametrize(("name", "what"), [
    ("node 1", "a space"), ("gpu,2", "','"), ("a/b", "'/'"), ("n*1", "'*'"),
    ("~gpu&1", "'&', '~'"),
])
def test_host_names_that_break_limit_and_host_vars(tmp_path: Path, collection: Path,
                                                   name: str, what: str) -> None:
    p = write(tmp_path, "inventory.yml",
              f'all:\n  hosts:\n    "{name}":\n      ansible_host: 10.0.0.1\n')
    msg = error(p, collection)
    assert msg.startswith(f"{p}: host name {name!r} has {what}: that breaks --limit patterns")
    assert msg.endswith("put the address in ansible_host")


def test_usual_host_names_and_ipv6_pass(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.yml",
              "all:\n  hosts:\n    gpu-01.rack_2: {ansible_host: 10.0.0.1}\n"
              "    'fd00::11': {}\n")
    assert inv.load(p, collection=collection).hosts == ["fd00::11", "gpu-01.rack_2"]


def test_unknown_connection_plugin(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini",
              "[gpu]\nnode1 ansible_host=10.0.0.1 ansible_connection=sshh\n")
    msg = error(p, collection)
    assert msg.startswith(f"{p}: host node1: ansible_connection 'sshh' is not a connection "
                          "plugin (did you mean ssh?); ansible-core has ")
    assert "local" in msg and "paramiko" in msg


def test_connection_from_a_collection_that_is_not_installed(tmp_path: Path,
                                                            collection: Path) -> None:
    p = write(tmp_path, "inventory.ini",
              "[gpu]\nnode1 ansible_host=10.0.0.1 ansible_connection=podman\n"
              "node2 ansible_connection=no.such_collection.thing\n")
    msg = error(p, collection)
    assert ("host node1: ansible_connection 'podman' (it stands for containers.podman.podman): "
            "the collection containers.podman is not installed here") in msg.splitlines()[0]
    assert msg.splitlines()[1].endswith("host node2: ansible_connection "
                                        "'no.such_collection.thing': the collection "
                                        "no.such_collection is not installed here "
                                        "(ansible-galaxy collection install no.such_collection)")


@pytest.mark.parametrize("conn", ["ssh", "local", "paramiko", "ansible.builtin.ssh", "smart",
                                  "{{ lookup('env', 'CONN') }}"])
def test_known_connection_plugins_pass(tmp_path: Path, collection: Path, conn: str) -> None:
    p = write(tmp_path, "inventory.yml",
              f"all:\n  hosts:\n    node1:\n      ansible_host: 10.0.0.1\n"
              f'      ansible_connection: "{conn}"\n')
    assert inv.load(p, collection=collection).hosts == ["node1"]


def test_host_named_like_a_group(tmp_path: Path, collection: Path) -> None:
    p = write(tmp_path, "inventory.ini", "[gpu]\ngpu ansible_host=10.0.0.1\n")
    assert error(p, collection) == (
        f"{p}: host 'gpu' has the name of a group: --limit gpu and host_vars/group_vars would "
        "mean either; rename one of them")


def test_plugin_configuration_and_script_failures_in_the_plugins_words(tmp_path: Path,
                                                                       collection: Path) -> None:
    """The reason of the plugin that should have read the source: `auto` for an inventory
    plugin's configuration, `script` for an executable."""
    conf = write(tmp_path, "inv.aws_ec2.yml", "plugin: no_such.collection.cloud\n")
    assert error(conf, collection) == (
        f"{conf}: inventory config '{conf}' specifies unknown plugin 'no_such.collection.cloud'")
    script = write(tmp_path, "inv.sh", "#!/bin/sh\necho boom >&2\nexit 3\n")
    script.chmod(0o755)
    assert error(script, collection) == (
        f"{script}: Inventory script returned non-zero exit code 3.")


def test_the_address_check_follows_the_hosts_ssh_arguments() -> None:
    """The one rule (inventory._resolution_problem with inventory._ssh_argv): a ProxyCommand or
    ProxyJump in the arguments resolves the name elsewhere; other arguments leave it checked;
    what only the run knows (a template) is not guessed at."""
    assert inv._resolution_problem("gpu-nowhere.invalid", ("-o", "ProxyCommand=false")) is None
    assert inv._resolution_problem("gpu-nowhere.invalid", ("-J", "bastion.invalid")) is None
    why = inv._resolution_problem("gpu-nowhere.invalid", ("-o", "StrictHostKeyChecking=no"))
    assert why is not None and why.startswith("'gpu-nowhere.invalid' does not resolve")
    # Arguments ssh itself refuses: nothing claimed here; the run's ssh says what is wrong.
    assert inv._resolution_problem("gpu-nowhere.invalid", ("-o", "NoSuchOption=1")) is None
    assert inv._ssh_argv({"ansible_ssh_common_args": "-o ProxyJump='a b'",
                          "ansible_port": 2222}) == ("-o", "Port=2222", "-o", "ProxyJump=a b")
    assert inv._ssh_argv({"ansible_ssh_extra_args": "{{ jump_args }}"}) is None
    assert inv._ssh_argv({"ansible_ssh_args": "-o 'x"}) == (
        "ansible_ssh_args: \"-o 'x\" is not a list of ssh arguments (No closing quotation)")
