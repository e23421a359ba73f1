# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The slurm_health_apply action (module doc: plugins/modules/slurm_health_apply.py): the steps
of the slurm_health plan (module_utils/slurm_health.py install_steps, configure_steps,
slurm_conf_steps) run in order as one task, each by the builtin that would run it as a task of
its own (copy and package through their action plugins, file, command and blockinfile as
modules), so check mode, diff and the builtins' own messages stay theirs. The task is changed
when a step changed; the first step that fails fails it, naming the step."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import builtin_step

# The builtins a step may name: those with an action plugin run through it (copy: the
# controller's files; package: the host's package manager), the others as modules.
ACTIONS = ("copy", "package")
MODULES = ("file", "command", "blockinfile")


def step_changed(step: dict, result: dict) -> bool:
    """Whether a step's result is a change: the builtin's word, or, for a step marked
    ``changed`` (a command that always changes what it touches), that it ran (a skipped
    command, as under --check, changed nothing: changed_when is not applied to a skip)."""
    if step.get("changed") and not result.get("skipped") and not result.get("failed"):
        return True
    return bool(result.get("changed"))


def merge(steps: list, results: list) -> dict:
    """One task's result from its steps' results (as far as they ran): changed when one
    changed, their diffs in order, and the first failure's result, its message naming the
    step."""
    out: dict = {"changed": False, "steps": []}
    diffs: list = []
    for step, res in zip(steps, results):
        changed = step_changed(step, res)
        out["steps"].append({"label": step.get("label", ""), "module": step["module"],
                             "changed": changed})
        out["changed"] = out["changed"] or changed
        if changed and res.get("diff"):
            diffs.extend(res["diff"] if isinstance(res["diff"], list) else [res["diff"]])
        if res.get("failed"):
            keep = {k: v for k, v in res.items() if k not in ("changed", "diff", "invocation")}
            out.update(keep, failed=True,
                       msg=f"{step['module']} {step.get('label', '')}: {res.get('msg', 'failed')}")
            break
    if diffs:
        out["diff"] = diffs
    return out


class ActionModule(ActionBase):
    # No remote temporary directory of its own: the copy action makes its own, and an empty list
    # of steps (a no-change re-run without the wheelhouse) costs no round trip to the host.
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def _run_step(self, step: dict, task_vars: dict) -> dict:
        module, args = step.get("module"), step.get("args")
        if module not in ACTIONS + MODULES or not isinstance(args, dict):
            raise AnsibleActionFail(f"slurm_health_apply: a step is a builtin of "
                                    f"{', '.join(ACTIONS + MODULES)} with its args, not {step!r}")
        if module in MODULES:
            return self._execute_module(module_name=f"ansible.legacy.{module}",
                                        module_args=dict(args), task_vars=task_vars)
        return builtin_step.action(self, f"ansible.legacy.{module}", args).run(task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "steps": {"type": "list", "elements": "dict", "required": True},
        })
        steps, results = args["steps"], []
        try:
            for step in steps:
                results.append(self._run_step(step, task_vars or {}))
                if results[-1].get("failed"):
                    break
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(merge(steps, results))
        return result
