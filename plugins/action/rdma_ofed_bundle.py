# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The rdma_ofed_bundle action (module doc: plugins/modules/rdma_ofed_bundle.py): the MLNX_OFED
bundle path of the rdma_ofed role in one task. The steps and the line a failure stops with are
driver_versions.bundle_steps(), bundle_cleanup() and bundle_failure(); this plugin holds a bundle
on the control host to its sha256 (driver_versions.bundle_check) before a byte of it reaches the
node, then runs each step's builtin (file, get_url and command modules, the copy and unarchive
actions) in the task's check and diff mode."""

from __future__ import annotations

from ansible.errors import AnsibleAction, AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.module_utils import driver_versions
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import builtin_step

# Steps run through the builtin's own action plugin (it reads or transfers files itself).
_ACTIONS = ("copy", "unarchive")


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _supports_check_mode = True

    def _step(self, step, task_vars):
        """One step's builtin, with the step's arguments, in this task's check and diff mode: its
        result, also where the builtin's action ends it with an exception (unarchive's
        C(creates) skip, copy's failures), as the task executor would make it one."""
        name = "ansible.legacy.%s" % step["action"]
        try:
            if step["action"] not in _ACTIONS:
                return self._execute_module(module_name=name, module_args=dict(step["args"]),
                                            task_vars=task_vars)
            return builtin_step.action(self, name, step["args"]).run(task_vars=task_vars)
        except AnsibleAction as exc:
            return exc.result
        except AnsibleError as exc:
            return {"failed": True, "msg": str(exc)}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "bundle": {"type": "dict", "required": True},
        })
        bundle = args["bundle"]
        check = bool(self._task.check_mode)
        if not bundle["remote"]:
            problem = driver_versions.bundle_check(bundle["src"], bundle["sha256"])
            if problem:
                result.update(failed=True, msg=problem)
                return result
        changed, diffs, ran, failure = False, [], False, None
        try:
            for step in driver_versions.bundle_steps(bundle, check):
                out = self._step(step, task_vars)
                ran = ran or bool(step.get("installs"))
                # The installer runs only where another version is in place: it always changes.
                changed = changed or bool(out.get("changed")) or bool(step.get("installs"))
                if out.get("failed"):
                    failure = driver_versions.bundle_failure(step["name"], out, ran)
                    break
                if out.get("diff"):
                    diffs.extend(out["diff"] if isinstance(out["diff"], list) else [out["diff"]])
        finally:
            for step in driver_versions.bundle_cleanup(bundle, check):
                out = self._step(step, task_vars)
                if out.get("failed") and failure is None:
                    failure = driver_versions.bundle_failure(step["name"], out, ran)
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result["changed"] = changed
        if diffs:
            result["diff"] = diffs
        if failure:
            result.update(failed=True, msg=failure)
        elif check:
            # What --check would do, shown as a debug task would show it.
            result.update(msg=bundle["would"], _ansible_verbose_always=True)
        else:
            result["msg"] = "installed MLNX_OFED from %s" % bundle["src"]
        return result
