"""A probe's settings filled from its role's variables (plugins/plugin_utils/role_settings.py and
the probes' action plugins): the one map from a role variable to the setting its plan reads."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from unittest import mock

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from rdmaprov.collection import input_check

try:  # ansible-core 2.19+: only text an inventory or a role gave is a template
    from ansible.template import trust_as_template as trusted
except ImportError:  # 2.17, 2.18: all text is
    def trusted(text):
        return text

ROOT = Path(__file__).resolve().parents[2]
PKG = "ansible_collections.rdmaprov.cluster.plugins"
ACTIONS = {  # probe module -> role
    "roce_qos_probe": "roce_qos", "firewall_probe": "firewall", "net_mtu_probe": "net_mtu",
    "rdma_ofed_probe": "rdma_ofed", "container_runtime_probe": "container_runtime",
    "nccl_validate_probe": "nccl_validate", "slurm_health_probe": "slurm_health",
    "kernel_modules": "rdma_modules", "rdma_facts": "nccl_env",
}


def role_settings():
    return importlib.import_module(f"{PKG}.plugin_utils.role_settings")


def template_with(variables):
    return Templar(loader=DataLoader(), variables=variables).template


def test_fill_takes_role_variables_templated_then_the_plays_context():
    rs = role_settings()
    variables = {"inventory_hostname": "gpu7", "ansible_host": trusted("{{ '10.0.0.' ~ 7 }}"),
                 "ansible_play_hosts_all": ["gpu7", "gpu8"], "ansible_check_mode": True,
                 "roce_qos_dscp": trusted("{{ 20 + 6 }}"), "roce_qos_ecn": False, "base": 3,
                 "roce_qos_pfc_priority": trusted("{{ base }}")}
    out = rs.fill("roce_qos", ("dscp", "ecn", "pfc_priority", "cnp_dscp", "host", "address",
                               "hosts", "check_mode", "connection"),
                  {"ecn": True}, variables, template_with(variables))
    assert out == {"ecn": True,  # given by the task: kept
                   "dscp": 26, "pfc_priority": 3,  # templated as a task argument would be
                   "host": "gpu7", "address": "10.0.0.7", "hosts": ["gpu7", "gpu8"],
                   "check_mode": True, "connection": "ssh"}
    # cnp_dscp: no role variable and not the play's: left out, the module's default applies.
    variables = {"inventory_hostname": "h200", "ansible_connection": "local"}
    out = rs.fill("net_mtu", ("address", "connection", "hosts"), {}, variables,
                  template_with(variables))
    assert out == {"address": "h200", "connection": "local", "hosts": ["h200"]}
    # The managed-file header: the inventory's ansible_managed, else ansible.cfg's default.
    assert rs.fill("x", ("managed",), {}, variables, template_with(variables)) == {
        "managed": "Ansible managed"}
    variables["ansible_managed"] = trusted("{{ 'Managed by ' ~ 'ops' }}")
    assert rs.fill("x", ("managed",), {}, variables, template_with(variables)) == {
        "managed": "Managed by ops"}


def test_fill_refuses_settings_that_are_not_a_dict():
    with pytest.raises(ValueError, match=r"settings must be a dict .* not list"):
        role_settings().fill("roce_qos", ("dscp",), [], {}, lambda v: v)


def _probe_tasks(role):
    """Every call of ``role``'s probe in its tasks: the task's module args (settings named by a
    ``"{{ var }}"`` of the role's vars/main.yml read from there)."""
    out = []
    vars_file = ROOT / "roles" / role / "vars" / "main.yml"
    role_vars = yaml.safe_load(vars_file.read_text()) if vars_file.exists() else {}
    for path in sorted((ROOT / "roles" / role / "tasks").glob("*.yml")):
        def walk(items):
            for task in items or []:
                if isinstance(task, dict):
                    for key, value in task.items():
                        if key.startswith("rdmaprov.cluster.") and key.split(".")[-1] in ACTIONS:
                            value = dict(value or {})
                            ref = re.fullmatch(r"\{\{\s*(\w+)\s*\}\}", str(value.get("settings")))
                            if ref:
                                value["settings"] = role_vars[ref.group(1)]
                            out.append(value)
                    walk(task.get("block"))
                    walk(task.get("rescue"))
                    walk(task.get("always"))
        walk(yaml.safe_load(path.read_text()))
    return out


@pytest.mark.parametrize("module", sorted(ACTIONS))
def test_every_setting_has_a_source(module):
    """Each key of the plan's table is a variable the role declares, the play's context, or what
    every call of the probe in the role gives itself: a renamed variable fails here, not on a
    host."""
    action = importlib.import_module(f"{PKG}.action.{module}")
    role = action.ActionModule.ROLE
    assert role == ACTIONS[module]
    declared = input_check.declared_options(input_check.role_specs(str(ROOT / "roles"), [role]))
    calls = [c for c in _probe_tasks(role) if "settings" in c]
    assert calls, f"no call of {module} with settings in roles/{role}/tasks"
    for key in action.ActionModule.KEYS:
        given = all(key in (c["settings"] or {}) for c in calls)
        assert (f"{role}_{key}" in declared or key in role_settings().CONTEXT or given
                or key in role_settings().FACTS), (
            f"{module}: setting {key!r} has no source")
    # And no call lists by hand what the role's variables give.
    for call in calls:
        for key, value in (call["settings"] or {}).items():
            assert not re.fullmatch(rf"\{{\{{\s*{role}_{key}\s*\}}\}}", str(value)), (
                f"{module}: {key} is passed by hand")


def test_the_action_fills_settings_and_runs_the_module(monkeypatch):
    from ansible.plugins.action import ActionBase

    action_mod = importlib.import_module(f"{PKG}.action.roce_qos_probe")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    task = mock.MagicMock()
    task.args = {"interfaces": ["eth1"], "settings": {}}
    task.resolved_action = "rdmaprov.cluster.roce_qos_probe"
    variables = {"inventory_hostname": "n1", "roce_qos_dscp": 26, "roce_qos_backend": "auto"}
    action = action_mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None,
                                     Templar(loader=DataLoader(), variables=variables), None)
    calls = []
    monkeypatch.setattr(action, "_execute_module", lambda module_name, module_args, task_vars:
                        calls.append((module_name, module_args)) or {"changed": False})
    assert action.run(task_vars=variables) == {"changed": False}
    assert calls == [("rdmaprov.cluster.roce_qos_probe",
                      {"interfaces": ["eth1"], "settings": {"dscp": 26, "backend": "auto",
                                                            "host": "n1",
                                                            "managed": "Ansible managed",
                                                            "check_mode": False, "rdma": {}}})]
    # Without settings the module runs as given (the raw probe).
    task.args = {"interfaces": ["eth1"]}
    calls.clear()
    action.run(task_vars=variables)
    assert calls == [("rdmaprov.cluster.roce_qos_probe", {"interfaces": ["eth1"]})]


def test_container_runtimes_action_adds_the_hosts_facts(monkeypatch):
    """os_family, architecture and python_apt come from the host's facts (Debian, x86_64 and
    true where one is missing); what the task gives itself wins."""
    from ansible.plugins.action import ActionBase

    action_mod = importlib.import_module(f"{PKG}.action.container_runtime_probe")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    task = mock.MagicMock()
    task.resolved_action = "rdmaprov.cluster.container_runtime_probe"

    def settings(facts, given):
        task.args = {"settings": given}
        variables = {"inventory_hostname": "n1", "container_runtime_engine": "docker",
                     **({"ansible_facts": facts} if facts is not None else {})}
        action = action_mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None,
                                         Templar(loader=DataLoader(), variables=variables), None)
        calls = []
        monkeypatch.setattr(action, "_execute_module", lambda module_name, module_args,
                            task_vars: calls.append(module_args) or {})
        action.run(task_vars=variables)
        return calls[0]["settings"]

    rhel = settings({"os_family": "RedHat", "architecture": "aarch64",
                     "rdmaprov": {"python_apt": False}}, {})
    assert {k: rhel[k] for k in ("os_family", "architecture", "python_apt", "engine")} == {
        "os_family": "RedHat", "architecture": "aarch64", "python_apt": False, "engine": "docker"}
    bare = settings(None, {})
    assert (bare["os_family"], bare["architecture"], bare["python_apt"]) == (
        "Debian", "x86_64", True)
    assert settings({"os_family": "RedHat"}, {"os_family": "Debian"})["os_family"] == "Debian"


def test_fill_takes_the_hosts_facts_last_with_their_missing_values():
    rs = role_settings()
    keys = ("os_family", "python_apt", "has_gpus", "ssh_interface")
    variables = {"inventory_hostname": "n1", "ansible_facts": {
        "os_family": "RedHat", "rdmaprov": {"python_apt": False, "has_gpus": True}}}
    assert rs.fill("x", keys, {}, variables, template_with(variables)) == {
        "os_family": "RedHat", "python_apt": False, "has_gpus": True, "ssh_interface": ""}
    # A play without preflight's facts: each setting's value for a host without the fact.
    bare = {"inventory_hostname": "n1"}
    assert rs.fill("x", keys, {}, bare, template_with(bare)) == {
        "os_family": "Debian", "python_apt": True, "has_gpus": False, "ssh_interface": ""}
    # os_name is computed from two facts (rdma_ofed's refusals name the OS by it).
    debian = {"ansible_facts": {"distribution": "Debian", "distribution_version": "12.5"}}
    assert rs.fill("x", ("os_name",), {}, debian, template_with(debian)) == {
        "os_name": "Debian 12.5"}
    assert rs.fill("x", ("os_name",), {}, bare, template_with(bare)) == {"os_name": ""}
    # A role variable of the same name wins over the fact.
    both = {**variables, "x_os_family": "Suse"}
    assert rs.fill("x", ("os_family",), {}, both, template_with(both)) == {"os_family": "Suse"}
