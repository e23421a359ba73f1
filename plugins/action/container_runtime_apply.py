# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The container_runtime_apply action (module doc: plugins/modules/container_runtime_apply.py):
one step of the container_runtime plan (module_utils/container_runtime.py step()) run through
the builtin module's own action, as a task of its own would run it: check mode, diff, changed and
the failure as that module gives them."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import builtin_step


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "step": {"type": "dict", "required": True},
        })
        step = args["step"]
        only_if = step.get("only_if")
        if only_if:
            # Read-only: asked under --check too, changes nothing.
            asked = self._module({"module": "ansible.builtin.command",
                                  "args": {"argv": only_if["argv"]}}, task_vars, check_mode=False)
            if asked.get("failed"):
                return dict(result, **asked)
            if str(asked.get("stdout", "")).strip() != only_if["stdout"]:
                result.update(changed=False, skipped=True, stdout=asked.get("stdout", ""),
                              skip_reason="%s printed %r, not %r" % (
                                  " ".join(only_if["argv"][:1]), asked.get("stdout", ""),
                                  only_if["stdout"]))
                return result
        out = self._module(step, task_vars, check_mode=step.get("check_mode"))
        # As changed_when: not where the module failed or skipped (a command under --check).
        if not out.get("failed") and "skipped" not in out and "changed" in step:
            out["changed"] = bool(step["changed"])
        if out.get("changed") and not out.get("failed"):
            # What a handler did: where the step changed something, at once.
            for then in step.get("then") or []:
                done = self._module(then, task_vars, check_mode=then.get("check_mode"))
                if done.get("failed"):
                    return dict(result, **done)
                out.setdefault("then", []).append({"label": then.get("label"),
                                                   "changed": bool(done.get("changed"))})
        result.update(out)
        return result

    def _module(self, step, task_vars, check_mode=None):
        """Run the step's module with its arguments through the action plugin a task of its own
        would get (copy's, to read a file on the control host; else the module's, or normal)."""
        try:
            name, module_args = step["module"], dict(step["args"])
        except (KeyError, TypeError) as exc:
            raise AnsibleActionFail("container_runtime_apply: the step has no %s" % exc) from exc
        handler = builtin_step.action(
            self, name, module_args, check_mode,
            builtin_step.handler_name(self._shared_loader_obj, name))
        if handler is None:
            raise AnsibleActionFail("container_runtime_apply: no action for %s" % name)
        try:
            return handler.run(task_vars=task_vars)
        finally:
            handler.cleanup()
