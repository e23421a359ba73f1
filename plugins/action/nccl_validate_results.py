# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The nccl_validate role's result directories and files on the controller (module doc:
plugins/modules/nccl_validate_results.py): validate_launch.keep_results, run where the results
are, with what the role's plan and launch list."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch as vl


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "paths": {"type": "list", "elements": "dict", "default": []},
            "files": {"type": "list", "elements": "dict", "default": []},
        })
        try:
            changed = vl.keep_results(args["paths"], args["files"], dry=self._task.check_mode)
        except (OSError, ValueError, KeyError) as exc:
            result.update(failed=True, msg=f"results on the controller: {exc}")
            return result
        result.update(changed=changed, kept=[f["dest"] for f in args["files"]])
        return result
