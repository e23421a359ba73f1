# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The host_capabilities module (module doc: plugins/modules/host_capabilities.py) with its
O(preflight) inputs filled on the control host: every key the task does not give, from the
preflight role's variables (preflight_supported_os_families, ...) or the play (the address
Ansible connects to, the connection), through plugins/plugin_utils/role_settings.py over the
table host_report.SETTINGS. Without O(preflight) the module runs as given."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.module_utils import host_report
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import role_settings


def preflight_args(given, variables, template):
    """The module's O(preflight) from what the task gives (the option's names) and the role's
    variables and the play (host_report.SETTINGS: role key -> option)."""
    if not isinstance(given, dict):
        raise ValueError("preflight must be a dict (the preflight role's variables fill what it "
                         "lacks), not %s" % type(given).__name__)
    option = host_report.SETTINGS
    key = {v: k for k, v in option.items()}
    filled = role_settings.fill("preflight", tuple(option),
                                {key.get(k, k): v for k, v in given.items()}, variables, template)
    return {option.get(k, k): v for k, v in filled.items()}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if "preflight" in args:
            try:
                args["preflight"] = preflight_args(args["preflight"] or {}, task_vars or {},
                                                   self._templar.template)
            except ValueError as exc:
                raise AnsibleActionFail("%s: %s" % (self._task.action, exc)) from exc
        module = getattr(self._task, "resolved_action", None) or self._task.action
        result.update(self._execute_module(module_name=module, module_args=args,
                                           task_vars=task_vars))
        return result
