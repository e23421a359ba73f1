# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""A builtin's action plugin for one step of a role's plan, as a task of its own would get it:
the roles' apply actions (firewall_apply, container_runtime_apply, slurm_health_apply,
rdma_ofed_bundle, nccl_validate_ready) run a plan's step through the builtin that would have
run it as a task (copy's action, which reads a file on the control host and sends content; the
module's own action or ``normal``), so check mode, diff, changed and the builtin's failure
message stay the builtin's (docs/CONTRACTS.md, "What a role does with its plan")."""

from __future__ import annotations


def handler_name(loader, name):
    """The action plugin a task of module ``name`` runs under: the module's own (copy's, for
    copy), an action plugin of that name, else ``ansible.legacy.normal``."""
    found = loader.module_loader.find_plugin_with_context(name)
    if found.resolved and found.action_plugin:
        return found.action_plugin
    if loader.action_loader.has_plugin(name):
        return name
    return "ansible.legacy.normal"


def action(caller, name, args, check_mode=None, handler=None):
    """The action plugin ``handler`` (default: the builtin's own action) for a copy of
    ``caller``'s task whose module is ``name`` with ``args``; ``check_mode`` (True/False)
    overrides the task's. Run it with ``.run(task_vars=...)``."""
    task = caller._task.copy()
    task.action, task.args = name, dict(args)
    # The copy's resolved action is the caller's: let the copy resolve its own (an action that
    # runs "its" module, as RoleSettingsAction does, reads it).
    task._resolved_action = None
    if check_mode is not None:
        task.check_mode = bool(check_mode)
    loader = caller._shared_loader_obj
    return loader.action_loader.get(
        handler or name, task=task, connection=caller._connection,
        play_context=caller._play_context, loader=caller._loader, templar=caller._templar,
        shared_loader_obj=loader)
