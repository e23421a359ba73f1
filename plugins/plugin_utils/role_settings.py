# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""A probe module's ``settings`` from its role's variables: the one map from a role variable to
the setting its plan reads, so that no role lists ``key: "{{ <role>_key }}"`` by hand.

A probe's action plugin (plugins/action/<module>.py) is a RoleSettingsAction naming the role and
the plan's table of settings (the keys plan() reads). When the task gives ``settings`` (a dict,
``{}`` for none of its own), every key of the table the task does not give is filled, on the
control host, from the role variable ``<role>_<key>`` where one is defined, templated as a task
argument would be, else from the play's context (CONTEXT: the host's name, its address, the
play's hosts, check mode, the connection, the managed-file header), else from the host's facts
(FACTS: the OS, the architecture, what preflight found). A task without ``settings`` runs the module as it is
(the raw probe)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


def _address(variables, template):
    return template(variables.get("ansible_host", variables["inventory_hostname"]))


def _managed(variables, template):
    """The header of a file a plan renders, as a template would write {{ ansible_managed }}: the
    variable where the inventory sets it, else ansible.cfg's (DEFAULT_MANAGED_STR)."""
    if "ansible_managed" in variables:
        return template(variables["ansible_managed"])
    from ansible import constants

    return constants.config.get_config_value("DEFAULT_MANAGED_STR")


# Settings that are not role variables but the play's: read the same way by every role.
CONTEXT = {
    "host": lambda v, t: v["inventory_hostname"],
    "address": _address,
    "hosts": lambda v, t: list(t(v.get("ansible_play_hosts_all", [v["inventory_hostname"]]))),
    "check_mode": lambda v, t: bool(v.get("ansible_check_mode", False)),
    "connection": lambda v, t: t(v.get("ansible_connection", "ssh")) or "ssh",
    "managed": _managed,
}


def _os_name(facts):
    """The distribution and its version as a refusal names the OS ("Debian 12.5")."""
    return " ".join(str(facts[k]) for k in ("distribution", "distribution_version") if k in facts)


# Settings that are the host's facts (Ansible's, and the preflight role's ansible_facts.rdmaprov):
# where each is read (a path into ansible_facts, or a function of them), and its value where the
# fact is missing (a play that did not run preflight).
FACTS = {
    "os_family": (("os_family",), "Debian"),
    "architecture": (("architecture",), "x86_64"),
    "distribution": (("distribution",), ""),
    "distribution_major_version": (("distribution_major_version",), ""),
    "python_apt": (("rdmaprov", "python_apt"), True),
    "ssh_interface": (("rdmaprov", "ssh_interface"), ""),
    "ssh_interface_rdma": (("rdmaprov", "ssh_interface_rdma"), False),
    "has_gpus": (("rdmaprov", "has_gpus"), False),
    "has_hcas": (("rdmaprov", "has_hcas"), False),
    "rdma": (("rdma",), {}),
    "os_name": (_os_name, ""),
}


def fact(variables, key):
    """The host's fact behind FACTS[key], or its value for a host without it."""
    path, missing = FACTS[key]
    node = variables.get("ansible_facts")
    if callable(path):
        return (path(node) or missing) if isinstance(node, dict) else missing
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return missing
        node = node[part]
    return node


def fill(role, keys, given, variables, template):
    """``given`` with every key of ``keys`` it lacks taken from the role variable
    ``<role>_<key>`` (templated with ``template``), else from CONTEXT, else from the host's
    facts (FACTS); a key with none of them is left out (the module's default applies). Raises
    ValueError when ``given`` is not a dict."""
    if not isinstance(given, dict):
        raise ValueError("settings must be a dict (the role's variables fill what it lacks),"
                         " not %s" % type(given).__name__)
    out = dict(given)
    for key in keys:
        if key in out:
            continue
        name = "%s_%s" % (role, key)
        if name in variables:
            out[key] = template(variables[name])
        elif key in CONTEXT:
            out[key] = CONTEXT[key](variables, template)
        elif key in FACTS:
            out[key] = template(fact(variables, key))
    return out


class RoleSettingsAction(ActionBase):
    """Runs the module of the same name with ``settings`` filled from ROLE's variables."""

    ROLE = ""
    KEYS: tuple = ()
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def keys(self):
        """The plan's table of settings (a subclass reads it from module_utils)."""
        return self.KEYS

    def more_args(self, args, task_vars):
        """The module's arguments once ``settings`` is filled: a subclass adds what only the
        control host can read (slurm_health_probe: its files)."""
        return args

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        if "settings" in args:
            try:
                args["settings"] = fill(self.ROLE, self.keys(), args["settings"] or {}, task_vars,
                                        self._templar.template)
            except ValueError as exc:
                raise AnsibleActionFail("%s: %s" % (self._task.action, exc)) from exc
        args = self.more_args(args, task_vars)
        module = getattr(self._task, "resolved_action", None) or self._task.action
        result.update(self._execute_module(module_name=module, module_args=args,
                                           task_vars=task_vars))
        return result
