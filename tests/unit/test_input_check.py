"""The one validator (plugins/module_utils/input_check.py) and the one table of ranges
(plugins/module_utils/ranges.py): judged as Ansible's ArgumentSpecValidator judges, the same
words from the CLI's check and from the validate_inventory entry point, and other roles'
variables in a shared inventory left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from rdmaprov import inventory
from rdmaprov.collection import input_check as check
from rdmaprov.collection import ranges
from rdmaprov.errors import UserError
from rdmaprov.resources import collection_root

ROOT = collection_root()
SPECS = inventory.load_specs(ROOT)

# Real variable names of roles our users run from the same inventory, from each project's own
# defaults/ and group_vars/ files: geerlingguy.firewall (all of them), linux-system-roles
# firewall and network (all public ones), and those of kubespray and NVIDIA DeepOps that come
# closest to ours (difflib ratio 0.75 to 0.84) or share a prefix with ours, and common ones.
FOREIGN = {
    "geerlingguy.firewall": {
        "firewall_state": "started", "firewall_enabled_at_boot": True,
        "firewall_flush_rules_and_chains": True,
        "firewall_allowed_tcp_ports": ["22", "80"], "firewall_allowed_udp_ports": [],
        "firewall_forwarded_tcp_ports": [], "firewall_forwarded_udp_ports": [],
        "firewall_additional_rules": [], "firewall_enable_ipv6": True,
        "firewall_ip6_additional_rules": [], "firewall_log_dropped_packets": True,
        "firewall_disable_firewalld": False, "firewall_disable_ufw": False,
        "firewall_template": "firewall.bash.j2",
    },
    "linux-system-roles.firewall": {
        "firewall": [{"service": "http", "state": "enabled"}],
        "firewall_disable_conflicting_services": False,
        "firewall_transactional_update_reboot_ok": False,
    },
    "linux-system-roles.network": {
        "network_connections": [{"name": "eth1", "type": "ethernet", "mtu": 9000}],
        "network_provider": "nm", "network_state": {}, "network_allow_restart": False,
        "network_packages": [], "network_service_name": [],
    },
    "kubespray": {
        "kube_network_plugin": "calico", "container_manager": "containerd",
        "kube_version": "v1.31.1", "dns_mode": "coredns", "etcd_deployment_type": "host",
        "containerd_limit_mem_lock": "infinity", "containerd_default_runtime": "runc",
        "containerd_base_runtime_specs": {}, "containerd_extra_runtime_args": [],
        "containerd_use_systemd_cgroup": True,
        "containerd_base_runtime_spec_rlimit_nofile": 65535,
        "supported_os_distributions": ["Ubuntu"], "nvidia_accelerator_enabled": True,
    },
    "DeepOps": {
        "slurm_health_check_program": "/usr/sbin/nhc", "slurm_config_dir": "/etc/slurm",
        "slurmctl_config_dir": "/etc/slurm", "nv_mgmt_interface": "eno1",
        "mofed_version": "5.8-1.0.1.1", "mofed_install_flags": "--all",
        "docker_install": True, "k8s_gpu_mig_strategy": "mixed",
    },
}


def test_no_foreign_name_is_ours_or_taken_for_a_typo() -> None:
    """No name of those roles is one of ours (no rename needed), and none is close enough to
    one of ours to be reported as a typo, though several share a prefix with ours."""
    for project, names in FOREIGN.items():
        assert not set(names) & set(SPECS.options), project
        assert check.check(names, SPECS.options) == [], project
    # The rule is closeness to a declared name, not a prefix: this one is a typo of ours.
    assert check.check({"firewall_rendezvous_port": [1]}, SPECS.options) == [
        ("firewall_rendezvous_port", "unknown variable firewall_rendezvous_port "
                                     "(did you mean firewall_rendezvous_ports?)")]
    # A role's internal variables (its vars/, set_fact) start with "_": never a typo, although
    # they are close to declared names (each role's entry checks the variables it sees).
    internal = {"_container_runtime_verify_cdi": True,
                "__container_runtime_docker_packages": ["docker"]}
    assert check.check(internal, SPECS.options) == []


def test_a_shared_inventory_is_accepted(tmp_path: Path) -> None:
    """One inventory driving all those roles and ours: accepted as ansible-inventory does."""
    import yaml

    (tmp_path / "group_vars").mkdir()
    merged = {k: v for names in FOREIGN.values() for k, v in names.items()}
    merged.update({"firewall_policy": "scoped", "net_mtu_interfaces": [
        {"name": "ib0", "mtu": 65520, "link_type": "ipoib_connected"}]})
    (tmp_path / "group_vars" / "all.yml").write_text(yaml.safe_dump(merged))
    inv = tmp_path / "hosts.ini"
    inv.write_text("[gpu]\nnode1 ansible_host=10.0.0.1\n")
    assert inventory.load(inv).hosts == ["node1"]
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.inventory", "-i", str(inv),
                           "--host", "node1"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("value", "accepted"), [
    (9000, True), (9000.0, True), ("9000", True), (9000.5, False), ("9k", False),
    (True, True), ([9000], False), (None, True),
])
def test_types_are_judged_as_ansible_judges_them(value, accepted) -> None:
    """Our type verdict is ArgumentSpecValidator's, value for value (the range comes after)."""
    spec = {"net_mtu_ping_count": {"type": "int"}}
    result = ArgumentSpecValidator(spec).validate({"net_mtu_ping_count": value})
    ansible_ok = not result.error_messages
    ours_ok = check.check({"net_mtu_ping_count": value}, SPECS.options) == []
    assert ansible_ok is ours_ok is accepted


def test_a_value_ansible_converts_is_ranged_as_converted() -> None:
    assert check.check({"net_mtu_default": 9000.0}, SPECS.options) == []
    assert check.check({"net_mtu_default": "9216"}, SPECS.options) == []
    # true is an int to Ansible (1): the range refuses it, saying so.
    assert check.check({"net_mtu_default": True}, SPECS.options) == [
        ("net_mtu_default", "net_mtu_default: true (a boolean, which Ansible takes as 1) is not "
                            "a valid MTU (68..9216)")]


@pytest.mark.parametrize(("value", "accepted"), [
    ("auto", True), (True, True), (False, True), ("true", True), ("false", True),
    ("True", True), ("False", True), ("maybe", False), (2, False)])
def test_a_tri_state_reads_an_ini_string_as_its_yaml_boolean(value, accepted) -> None:
    """container_runtime_nvidia=false in an INI inventory is the string 'false', in YAML the
    boolean: both mean false (the INI one was refused as not one of auto, True, False)."""
    problems = check.check({"container_runtime_nvidia": value}, SPECS.options)
    assert (problems == []) is accepted, problems
    if not accepted:
        assert problems == [("container_runtime_nvidia",
                             f"container_runtime_nvidia: {check.show(value)} is not one of "
                             "auto, true, false")]


@pytest.mark.parametrize("layer", ["net_mtu_interfaces", "net_mtu_interfaces_group",
                                   "net_mtu_interfaces_host"])
def test_every_layer_is_validated_with_the_link_types_range(layer: str) -> None:
    def problems(entry: dict) -> list[str]:
        return [line for _n, line in check.check({layer: [entry]}, SPECS.options)]

    assert problems({"name": "ib0", "mtu": 99999, "bogus": 1}) == [
        f"{layer}[0]: unknown key 'bogus'",
        f"{layer}[0].mtu: 99999 is not a valid MTU (68..9216)"]
    assert problems({"name": "ib0", "mtu": 65520}) == [
        f"{layer}[0].mtu: 65520 is not a valid MTU (68..9216); for an IPoIB interface set its "
        "link_type (ipoib_datagram: up to 4092, ipoib_connected: up to 65520)"]
    assert problems({"name": "ib0", "mtu": 65520, "link_type": "ipoib_connected"}) == []
    assert problems({"name": "ib0", "mtu": 65521, "link_type": "ipoib_connected"}) == [
        f"{layer}[0].mtu: 65521 is not a valid MTU for IPoIB connected (68..65520)"]
    assert problems({"name": "ib0", "mtu": 4096, "link_type": "ipoib_datagram"}) == [
        f"{layer}[0].mtu: 4096 is not a valid MTU for IPoIB datagram (68..4092)"]
    assert problems({"name": "eth1", "mtu": 9000, "link_type": "infiniband"}) == [
        f"{layer}[0].link_type: 'infiniband' is not one of auto, ethernet, ipoib_datagram, "
        "ipoib_connected"]
    assert problems({"mtu": 9000}) == [f"{layer}[0]: required key 'name' is missing"]


def test_the_table_names_only_declared_options() -> None:
    """Every variable the ranges table names is declared (a renamed option cannot leave its
    range behind), and the ranges the roles' descriptions state are the table's."""
    for path in [*ranges.VARIABLES, *ranges.FORMS]:
        top, _, key = path.partition("[].")
        if top == "ansible_port":
            continue
        assert top in SPECS.options, path
        if key:
            assert key in SPECS.options[top]["options"], path
    assert ranges.bounds("pfc_priority")[:2] == (0, 7)
    assert ranges.bounds("dscp")[:2] == (0, 63)
    assert [ranges.bounds("mtu", t)[1] for t in ("ethernet", "ipoib_datagram",
                                                  "ipoib_connected")] == [9216, 4092, 65520]


def test_the_entry_point_says_what_the_cli_says(tmp_path: Path) -> None:
    """validate_inventory (the input_problems lookup, in ansible-playbook) and the rdmaprov
    check give the same lines for the same host variables."""
    coll = tmp_path / "ansible_collections" / "rdmaprov"
    coll.mkdir(parents=True)
    (coll / "cluster").symlink_to(ROOT)
    inv = tmp_path / "hosts.yml"
    inv.write_text(
        "all:\n  hosts:\n"
        "    n1: {ansible_connection: local, net_mtu_default: 9000.0, firewall_state: started}\n"
        "    n2:\n      ansible_connection: local\n      rdma_ofed_sorce: inbox\n"
        "      net_mtu_interfaces_host: [{name: ib0, mtu: 99999, bogus: 1}]\n"
        "      roce_qos_pfc_priority: 8\n")
    play = tmp_path / "play.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.import_role:\n"
                    "        name: rdmaprov.cluster.preflight\n"
                    "        tasks_from: validate_inventory\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(tmp_path), ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                           str(play)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=False)
    import json

    out = proc.stdout.splitlines()
    task = out.index(next(line for line in out if "Validate rdmaprov's variables" in line))
    assert "ok: [n1]" in out[task:], proc.stdout
    fatal = next(line for line in out if line.startswith("fatal: [n2]: FAILED! => "))
    playbook_lines = json.loads(fatal.split(" => ", 1)[1])["msg"].split("; ")

    with pytest.raises(UserError) as exc:
        inventory.load(inv)
    cli_lines = [line.split(": ", 2)[2] for line in str(exc.value).splitlines()]
    assert sorted(playbook_lines) == sorted(cli_lines) == sorted([
        "net_mtu_interfaces_host[0]: unknown key 'bogus'",
        "net_mtu_interfaces_host[0].mtu: 99999 is not a valid MTU (68..9216)",
        "roce_qos_pfc_priority: 8 is not a valid PFC priority (0..7)",
        "unknown variable rdma_ofed_sorce (did you mean rdma_ofed_source?)"])


def test_roce_qos_preflight_ranges_are_the_tables() -> None:
    assert ranges.problems({"roce_qos_pfc_priority": "9", "roce_qos_dscp": 26,
                            "roce_qos_cnp_dscp": 64, "roce_qos_cnp_priority": "x"}) == [
        "roce_qos_cnp_dscp: 64 is not a valid DSCP value (0..63)",
        "roce_qos_cnp_priority: 'x' is not a number",
        "roce_qos_pfc_priority: 9 is not a valid PFC priority (0..7)"]
    assert ranges.problems({"roce_qos_dscp": 26.0, "nccl_env_ib_tc": "-1"}) == []
    text = (ROOT / "roles/roce_qos/tasks/main.yml").read_text()
    assert "range(" not in text and "rdmaprov.cluster.check_vars:\n    roles: [roce_qos]" in text


def test_forms_are_checked_with_the_ranges_before_any_host() -> None:
    # site.yml's first play and the rdmaprov command judge them; nccl_env's main.yml the same.
    assert ranges.problems({"nccl_env_conf_path": "etc/nccl.conf",
                            "nccl_env_extra": {"NCCL_DEBUG": "INFO", "nccl_debug": "x",
                                               "IB_HCA": "mlx5"}}) == [
        "nccl_env_conf_path: 'etc/nccl.conf' is not an absolute path (letters, digits and "
        "_@+=:,./- only)",
        "nccl_env_extra: a mapping whose keys are NCCL_* names (NCCL_[A-Z0-9_]+): keys IB_HCA, "
        "nccl_debug are not NCCL_* names"]
    assert ranges.problems({"nccl_env_conf_path": "/etc/nccl.conf",
                            "nccl_env_extra": {"NCCL_IB_GID_INDEX": 3}}) == []
    text = (ROOT / "roles/nccl_env/tasks/main.yml").read_text()
    assert "rdmaprov.cluster.check_vars:\n    roles: [nccl_env]" in text and "match(" not in text


@pytest.mark.parametrize("role", sorted(p.name for p in (ROOT / "roles").iterdir()
                                        if p.name != "preflight"))
def test_every_role_entry_checks_its_values_first(role: str) -> None:
    """A role used from a playbook of one's own checks its variables (types, ranges, forms)
    with the one validator before its first task that touches the host."""
    import yaml

    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks/main.yml").read_text())
    first = tasks[0]
    assert first.get("rdmaprov.cluster.check_vars") == {"roles": [role]}, first
    assert first.get("tags") == ["always"]


@pytest.mark.parametrize(("form", "good", "bad"), [
    ("interface", ["eth1", "eth1.100", "ib0", "enp65s0f0np0", "bond0", "a" * 15, "vlan-7_x"],
     ["", ".", "..", "a" * 16, "eth/1", "eth 1", "eth:1", "eth1;x", "$(x)", "`x`", "-eth1",
      "eth'1", 'eth"1', "eth\n1", "eth\t1", "ethé"]),
    ("absolute_path", ["/etc/rdmaprov", "/usr/local/sbin/rdmaprov-roce-qos", "/a/b.c-d_e"],
     ["", "etc/x", "/x y", "/x$(touch y)", "/x;y", "/x`y`", "/x\ny", "/x'y", "/x%n", "/x&y"]),
    ("unit_name", ["rdmaprov-mtu.service", "a@b.service"],
     ["rdmaprov-mtu", "x y.service", "x;.service", "-x.service", "x/y.service", ".service"]),
    ("nft_name", ["rdmaprov", "t_1"], ["", "1x", "x-y", "x;y", "x y", "a" * 65]),
    ("file_name", ["60-rdmaprov-mtu.conf"], ["", "a/b", "-x", "x y", "x;y", ".."]),
    ("image", ["nvcr.io/nvidia/pytorch:25.01-py3", "busybox", "localhost:5000/a/b:c",
               "docker.io/library/busybox@sha256:" + "a" * 64],
     ["", " ", "a b", "-x", "x;y", "$(x)", "a@sha256:zz", "a:", "a//b", "a'b"]),
    ("size", ["4096", "512K", "256M", "1G", "1GiB", "64mb", "1.5G"],
     ["", "lots", "-5", "0", "M", "1T", "1..5G", "256 M x"]),
    ("nccl_ifnames", ["", "eth1", "^docker,lo", "=eth1", "^=eth1,eth2", "ib"],
     ["eth1;x", "eth 1", "^", "a,,b", "$(x)"]),
])
def test_forms(form: str, good: list[str], bad: list[str]) -> None:
    assert [v for v in good if ranges.value_problem(form, v)] == []
    assert [v for v in bad if not ranges.value_problem(form, v)] == []


def test_every_value_that_reaches_a_host_has_a_form() -> None:
    """Every node-side path, interface, unit, table and image option is in FORMS: a new one
    must be given its form. (Controller paths — archive, src, results_dir — may hold anything.)"""
    controller = {"container_runtime_images[].archive", "container_runtime_images[].src",
                  "nccl_validate_results_dir"}
    wanted = set()
    for name, spec in SPECS.options.items():
        if spec.get("type") == "path":
            wanted.add(name)
        if spec.get("type", "str") in ("str", "list") and name.endswith((
                "_interfaces", "_interface", "_ifname", "_unit_name", "_image", "_nft_table",
                "_dropin")):
            wanted.add(name)
        for key, sub in (spec.get("options") or {}).items():
            if (sub or {}).get("type") == "path" or key == "name":
                wanted.add(f"{name}[].{key}")
    missing = sorted(n for n in wanted - controller if n not in ranges.FORMS
                     and SPECS.options.get(n, {}).get("elements") != "dict")
    assert missing == []


def test_flags_are_judged_by_the_table() -> None:
    assert ranges.flag_problem("--max-bytes", "lots") == (
        "--max-bytes/RDMAPROV_VALIDATE_MAX_BYTES: 'lots' is not a size in bytes, e.g. 4096, "
        "512K, 256M, 1G")
    assert ranges.flag_problem("--timeout", "-5") == (
        "--timeout/RDMAPROV_VALIDATE_TIMEOUT: -5 is not a valid number of seconds "
        "(1..604800)")
    assert ranges.flag_problem("--image", "").startswith("--image/RDMAPROV_VALIDATE_IMAGE: '' is")
    assert ranges.flag_problem("--bw-fraction", "1.5").startswith("--bw-fraction/")
    assert ranges.flag_problem("--nodes", 0) == "--nodes: 0 is not a valid count (1..1000000)"
    for flag, value in (("--max-bytes", "256M"), ("--timeout", "600"), ("--image", "busybox"),
                        ("--bw-fraction", "0.8"), ("--pair-fraction", 1), ("--min-busbw", "0"),
                        ("--timeout", None)):
        assert ranges.flag_problem(flag, value) is None, flag
    # The worker reads --max-bytes with the table's parser.
    from rdmaprov.validate import worker

    for text in ("4096", "512K", "256M", "1G", "1GiB", "64mb"):
        assert worker.parse_bytes(text) == ranges.parse_size(text), text


@pytest.mark.parametrize(("role", "variables", "line"), [
    ("net_mtu", "net_mtu_interfaces: [{name: 'eth1;touch PWNED', mtu: 9000}]",
     "net_mtu: net_mtu_interfaces[0].name: 'eth1;touch PWNED' is not a Linux interface name"),
    ("firewall", "firewall_nft_dir: '/x$(touch PWNED)'",
     "firewall: firewall_nft_dir: '/x$(touch PWNED)' is not an absolute path"),
    ("roce_qos", "roce_qos_interfaces: ['`touch PWNED`']",
     "roce_qos: roce_qos_interfaces[0]: '`touch PWNED`' is not a Linux interface name"),
])
def test_a_standalone_role_entry_refuses_a_bad_form(tmp_path: Path, role: str, variables: str,
                                                     line: str) -> None:
    """A playbook of one's own that uses the role (its main entry) stops at the role's first
    task, on the control host, with the validator's line."""
    coll = tmp_path / "ansible_collections" / "rdmaprov"
    coll.mkdir(parents=True)
    (coll / "cluster").symlink_to(ROOT)
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n    n1:\n      ansible_connection: local\n"
                   f"      {variables}\n")
    play = tmp_path / "play.yml"
    play.write_text(f"- hosts: all\n  gather_facts: false\n  roles: [rdmaprov.cluster.{role}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(tmp_path), ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                           str(play), "--check"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stdout
    assert line in proc.stdout, proc.stdout
    assert "Check the role's values" in proc.stdout
    assert not (tmp_path / "PWNED").exists()


def test_a_roles_own_entry_refuses_its_bad_value_in_one_line(tmp_path: Path) -> None:
    """The role's first task (check_vars, on the control host) fails a bad value with the role's
    name first, before any task touches the host; good values pass it."""
    import json

    coll = tmp_path / "ansible_collections" / "rdmaprov"
    coll.mkdir(parents=True)
    (coll / "cluster").symlink_to(ROOT)
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n"
                   "    bad: {ansible_connection: local, roce_qos_pfc_priority: 8}\n")
    play = tmp_path / "play.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.import_role:\n"
                    "        name: rdmaprov.cluster.roce_qos\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(tmp_path), ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                           str(play)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=False)
    assert proc.returncode == 2, proc.stdout
    fatal = next(line for line in proc.stdout.splitlines()
                 if line.startswith("fatal: [bad]: FAILED! => "))
    assert json.loads(fatal.split(" => ", 1)[1])["msg"] == (
        "roce_qos: roce_qos_pfc_priority: 8 is not a valid PFC priority (0..7)")
    # Ansible's own argument-spec task, then ours, and nothing after it.
    tasks = [line for line in proc.stdout.splitlines() if line.startswith("TASK [")]
    assert "Check the role's values" in tasks[-1] and len(tasks) == 2, tasks
