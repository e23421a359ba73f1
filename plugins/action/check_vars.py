# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The check_vars action (module doc: plugins/modules/check_vars.py): the host's rdmaprov
variables judged on the control host (plugins/plugin_utils/input_problems.py, the body of the
input_problems lookup too); no connection to the host."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import input_problems


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "roles": {"type": "list", "elements": "str", "default": []},
        })
        try:
            lines = input_problems.problems(task_vars or {}, self._templar.template,
                                            args["roles"] or None)
        except ValueError as exc:
            raise AnsibleActionFail(f"check_vars: {exc}") from exc
        result.update(changed=False, problems=lines)
        if lines:
            prefix = f"{args['roles'][0]}: " if len(args["roles"]) == 1 else ""
            result.update(failed=True, msg=prefix + "; ".join(lines))
        else:
            result["msg"] = "All assertions passed"
        return result
