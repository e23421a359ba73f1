"""The preflight report (plugins/module_utils/host_report.py) on facts as real hosts give them:
a host without iproute2 (no `interfaces`), a local connection, interfaces named with dots and
dashes. Fact shapes are ansible-core 2.19's setup module's (network facts filed under the name
with '-' turned into '_', dots kept)."""

from __future__ import annotations

from rdmaprov import collection
from rdmaprov.collection import host_report as report_mod

CAPS = {"kernel_release": "6.18.44-fc-v973-gpu",
        "modules": {"can_load": False, "reason": "no /lib/modules/6.18.44-fc-v973-gpu: no "
                    "modules installed for the running kernel", "by": "kernel"},
        "gpus": {"count": 1, "models": ["NVIDIA H200"], "driver_version": "580.159.04"}}
H200_RDMA = {"kernel": {"uverbs": True, "reason": "ib_uverbs is built into the kernel but "
                        "/sys/class/infiniband is empty: no RDMA devices",
                        "modules": {"ib_core": {"state": "builtin"},
                                    "ib_uverbs": {"state": "builtin"},
                                    "rdma_ucm": {"state": "builtin"}}},
             "devices": [], "rdma_core_version": None, "ofed_version": None}
# The H200: Ubuntu 24.04, local connection, no `ip` binary, so no network facts at all.
H200 = {"distribution": "Ubuntu", "distribution_version": "24.04", "os_family": "Debian",
        "env": {"HOME": "/root"}, "rdma": H200_RDMA}


def test_host_without_iproute2_under_a_local_connection() -> None:
    conn = collection.driver_plan.connection_interface(H200, None, "local")
    lines = report_mod.report(H200, CAPS, conn, "local")
    assert lines[0] == "missing: no network interface facts: " + report_mod.IPROUTE2
    assert lines[1:] == [
        "Ubuntu 24.04 (Debian family), kernel 6.18.44-fc-v973-gpu",
        "connection: local (Ansible runs on this host: no network path to keep up)",
        "interfaces: unknown (no `ip` command: install iproute2)",
        "kernel modules: built in: ib_core, ib_uverbs, rdma_ucm; cannot load more: no "
        "/lib/modules/6.18.44-fc-v973-gpu: no modules installed for the running kernel",
        "GPUs: 1 x NVIDIA H200 (driver 580.159.04)",
        "RDMA: none (ib_uverbs is built into the kernel but /sys/class/infiniband is empty: "
        "no RDMA devices)",
    ]
    assert report_mod.missing(H200) == ["no network interface facts: " + report_mod.IPROUTE2]


def test_interfaces_with_dots_and_dashes() -> None:
    facts = {
        "distribution": "Debian", "distribution_version": "12.8", "os_family": "Debian",
        "interfaces": ["lo", "enp1s0f0.100", "ib0-1", "eth0"],
        "enp1s0f0.100": {"mtu": 9000, "ipv4": {"address": "10.1.0.5", "prefix": "24"}},
        "ib0_1": {"mtu": 4092},
        "eth0": {"mtu": 1500, "ipv4": {"address": "192.0.2.5", "prefix": "24"}},
        "env": {"SSH_CONNECTION": "192.0.2.1 50000 10.1.0.5 22"},
    }
    conn = collection.driver_plan.connection_interface(facts, "10.1.0.5", "ssh")
    assert conn == {"name": "enp1s0f0.100", "address": "10.1.0.5", "method": "SSH_CONNECTION"}
    lines = report_mod.report(facts, CAPS | {"interface": {"rdma_backed": False}}, conn, "ssh")
    assert lines[1] == "connection: enp1s0f0.100 10.1.0.5 (from SSH_CONNECTION)"
    assert lines[2] == ("interfaces: enp1s0f0.100 mtu 9000 10.1.0.5/24; eth0 mtu 1500 "
                        "192.0.2.5/24; ib0-1 mtu 4092 no IPv4")
    assert report_mod.missing(facts) == []


def test_ssh_host_whose_connection_interface_is_unknown() -> None:
    facts = {"distribution": "Debian", "distribution_version": "13", "os_family": "Debian"}
    conn = collection.driver_plan.connection_interface(facts, None, "ssh")
    lines = report_mod.report(facts, {}, conn, "ssh")
    assert lines[2] == "connection: interface not found (no interface facts)"
    assert lines[0].startswith("missing: no network interface facts")


# host_capabilities' python result on the H200 as found (Ubuntu 24.04, the system python3, no
# python3-apt), and driven with a venv's Python.
SYSTEM_NO_APT = {"executable": "/usr/bin/python3", "apt": False, "is_system": True,
                 "system_apt": None}
VENV_NO_APT = {"executable": "/opt/torch/bin/python", "apt": False, "is_system": False,
               "system_apt": False}


def test_apt_bindings_missing_under_the_system_python_is_a_note_not_an_error() -> None:
    real = report_mod.apt_plan("Debian", SYSTEM_NO_APT, check_mode=False)
    assert real == {"error": None, "usable": True, "note": "python3-apt: not installed; "
                    "Ansible's apt module installs it at its first use"}
    check = report_mod.apt_plan("Debian", SYSTEM_NO_APT, check_mode=True)
    assert check["error"] is None and check["usable"] is False
    assert check["note"] == ("python3-apt: not installed; a real run installs it (Ansible's "
                             "apt module does, at its first use); --check skips the apt tasks "
                             "that need it")


def test_apt_bindings_of_another_interpreter() -> None:
    # The system's python3 has them: the apt module runs under it, in either mode.
    for check in (False, True):
        assert report_mod.apt_plan("Debian", {**VENV_NO_APT, "system_apt": True}, check) == {
            "error": None, "note": None, "usable": True}
    # Neither has them (the H200 driven with its torch venv): the apt module installs
    # python3-apt and respawns under /usr/bin/python3 on a real run, as under the system Python.
    assert report_mod.apt_plan("Debian", VENV_NO_APT, False) == report_mod.apt_plan(
        "Debian", SYSTEM_NO_APT, False)
    assert report_mod.apt_plan("Debian", VENV_NO_APT, True) == report_mod.apt_plan(
        "Debian", SYSTEM_NO_APT, True)
    # No /usr/bin/python3 at all: nothing to install it for; the interpreter is named.
    for check in (False, True):
        plan = report_mod.apt_plan("Debian", {**VENV_NO_APT, "system_apt": None}, check)
        assert plan["note"] is None and plan["usable"] is False
        assert plan["error"].startswith("the Python Ansible runs with on this host "
                                        "(/opt/torch/bin/python) cannot import apt")


def test_apt_bindings_elsewhere_are_not_judged() -> None:
    assert report_mod.apt_plan("RedHat", VENV_NO_APT, True)["error"] is None
    assert report_mod.apt_plan("Debian", {**SYSTEM_NO_APT, "apt": True}, True) == {
        "error": None, "note": None, "usable": True}


# host_report.plan: what host_capabilities returns to the preflight role (its preflight option).
SUPPORTED = {"os_families": ["Debian", "RedHat"],
             "distributions": ["Debian", "Ubuntu", "RedHat", "Rocky", "AlmaLinux"]}


def test_plan_passes_a_supported_host_and_reports_it() -> None:
    caps = CAPS | {"python": SYSTEM_NO_APT}
    conn = collection.driver_plan.connection_interface(H200, None, "local")
    got = report_mod.plan(H200, caps, conn, SUPPORTED | {"connection_type": "local"})
    assert got["errors"] == []
    # The report's lines, then the apt note (the system python3 without python3-apt).
    assert got["report"] == [
        *report_mod.report(H200, caps, conn, "local"),
        "python3-apt: not installed; Ansible's apt module installs it at its first use"]
    assert got["connection"] == conn and got["apt"]["usable"] is True
    assert report_mod.plan(H200, caps, conn, SUPPORTED | {"connection_type": "local"},
                           check_mode=True)["apt"]["usable"] is False


def test_plan_refuses_in_the_words_of_the_role() -> None:
    facts = {"distribution": "Arch", "distribution_version": "rolling", "os_family": "Archlinux",
             "rdma": {"devices": [], "kernel": {"reason": "no RDMA driver loaded"}}}
    caps = {"gpus": {"count": 0}, "python": {**VENV_NO_APT, "system_apt": None}}
    settings = SUPPORTED | {"connection_type": "ssh", "require_gpus": True,
                            "require_rdma_devices": True}
    got = report_mod.plan(facts, caps, {"name": None}, settings)
    assert got["errors"] == [
        "no network interface facts: " + report_mod.IPROUTE2 + "; rdmaprov needs them to find "
        "the interface carrying the connection and keep it up",
        "unsupported OS: Arch rolling (family Archlinux); rdmaprov supports Debian, Ubuntu, "
        "RedHat, Rocky, AlmaLinux",
        "no NVIDIA GPU visible (no /proc/driver/nvidia/gpus/*, no /dev/nvidiaN): is the driver "
        "loaded?",
        "no RDMA device: no RDMA driver loaded",
    ]  # not Debian: python3-apt is not judged
    # A local connection needs no network facts; the apt error of a Debian host comes last.
    debian = {**facts, "os_family": "Debian", "distribution": "Debian", "rdma": {}}
    got = report_mod.plan(debian, caps, {"name": None}, settings | {"connection_type": "local"})
    assert got["errors"][0].startswith("no NVIDIA GPU visible")
    assert got["errors"][1] == "no RDMA device: none found in /sys/class/infiniband"
    assert got["errors"][2].startswith("the Python Ansible runs with on this host "
                                       "(/opt/torch/bin/python) cannot import apt")
    assert len(got["errors"]) == 3
    # Not required: neither GPUs nor RDMA devices are refused.
    got = report_mod.plan(debian, caps | {"python": SYSTEM_NO_APT}, {"name": None},
                          SUPPORTED | {"connection_type": "local"})
    assert got["errors"] == []


def test_plan_gives_the_asserts_failure_and_success_message() -> None:
    """The role's one assert reads plan.error (the refusals in one line) and plan.message (the
    report, or the assert's own words under preflight_report=false)."""
    facts = {"distribution": "Arch", "distribution_version": "rolling", "os_family": "Archlinux"}
    caps = {"gpus": {"count": 0}, "python": SYSTEM_NO_APT}
    settings = SUPPORTED | {"connection_type": "local", "require_gpus": True}
    got = report_mod.plan(facts, caps, {"name": None}, settings)
    assert got["error"] == "; ".join(got["errors"]) and len(got["errors"]) == 2
    assert got["message"] == got["report"]
    quiet = report_mod.plan(H200, caps, {"name": None}, SUPPORTED | {
        "connection_type": "local", "report": False})
    assert quiet["error"] == "" and quiet["message"] == "All assertions passed"


def test_preflight_inputs_are_filled_from_the_roles_variables_and_the_play() -> None:
    """host_capabilities' action: each preflight key the task lacks from preflight_<key> or the
    play (host_report.SETTINGS), under the module's option names; what the task gives wins."""
    import importlib
    from pathlib import Path

    import yaml
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    from rdmaprov.collection import input_check

    action = importlib.import_module(
        "ansible_collections.rdmaprov.cluster.plugins.action.host_capabilities")
    roles = Path(__file__).resolve().parents[2] / "roles"
    defaults = yaml.safe_load((roles / "preflight/defaults/main.yml").read_text())
    variables = {"inventory_hostname": "n1", "ansible_host": "10.0.0.1", **defaults,
                 "preflight_require_gpus": True}
    got = action.preflight_args({}, variables, Templar(loader=DataLoader(),
                                                       variables=variables).template)
    assert got == {"os_families": defaults["preflight_supported_os_families"],
                   "distributions": defaults["preflight_supported_distributions"],
                   "require_gpus": True, "require_rdma_devices": False, "report": True,
                   "ansible_host": "10.0.0.1", "connection": "ssh"}
    bare = {"inventory_hostname": "n1", "ansible_connection": "local"}
    got = action.preflight_args({"os_families": ["RedHat"], "facts": {"a": 1}}, bare,
                                Templar(loader=DataLoader(), variables=bare).template)
    assert got == {"os_families": ["RedHat"], "facts": {"a": 1}, "ansible_host": "n1",
                   "connection": "local"}
    # Every key is a variable the role declares or the play's: a renamed variable fails here.
    declared = input_check.declared_options(input_check.role_specs(str(roles), ["preflight"]))
    for key in report_mod.SETTINGS:
        assert f"preflight_{key}" in declared or key in ("address", "connection"), key
    # And every option it fills is one the module takes.
    from ansible_collections.rdmaprov.cluster.plugins.modules import host_capabilities
    assert set(report_mod.SETTINGS.values()) <= set(host_capabilities.PREFLIGHT_OPTIONS)
