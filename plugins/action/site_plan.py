# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The site_plan action (module doc: plugins/modules/site_plan.py): every role of site.yml read
in one task per host, each through its own probe's action (its settings filled from the role's
variables) or, for a role that acts in one call, its module in check mode; which roles differ is
plugin_utils/site_plan.py's rule. site.yml ends the play of a host whose roles are all in line;
the others run every role as before."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import builtin_step
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import site_plan

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "roles")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _valid, args = self.validate_argument_spec(argument_spec={
            "roles": {"type": "dict", "required": True},
            "every": {"type": "bool", "default": False},
        })
        every = args["every"]
        roles = {str(k): bool(v) for k, v in args["roles"].items()}
        unknown = site_plan.unknown_roles(list(roles))
        if unknown:
            raise AnsibleActionFail("site_plan: no probe for role %s (known: %s)"
                                    % (", ".join(unknown), ", ".join(site_plan.PROBES)))
        result.update(changed=False, roles=roles, probes={}, differ={},
                      rdmaprov_reports=[])
        if every:
            return self._every(result, roles, task_vars)
        if site_plan.tags_limit(task_vars.get("ansible_run_tags"),
                                task_vars.get("ansible_skip_tags")):
            result.update(drift=True, msg="tags choose the roles: each role reads the host itself")
            return result
        try:
            for role, managed in roles.items():
                if not managed:
                    continue
                why, res = self._read(role, task_vars)
                if res.get("unreachable"):
                    return dict(res, changed=False)
                if why:
                    result["differ"][role] = why
                    break  # the roles run from here: what follows is read again by them
                kept = site_plan.kept(role, res)
                if kept:
                    result["probes"][role] = kept
                lines = site_plan.PROBES[role].report(res)
                if lines:
                    result["rdmaprov_reports"].append(
                        {"task": "%s : in line (read by the site plan)" % role, "lines": lines})
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        differ = result["differ"]
        result["drift"] = bool(differ)
        result["msg"] = ("; ".join("%s: %s" % kv for kv in differ.items()) if differ
                         else "every role is in line: nothing to do")
        if differ:
            result["rdmaprov_reports"] = []  # the roles report for themselves
        return result

    def _every(self, result, roles, task_vars):
        """`rdmaprov status`: every managed role read, none skipped after a first difference;
        ``differ`` has each role that differs (site_plan.seen_drift), ``shown`` what status
        shows of each probe, ``nccl_conf`` the template's answer."""
        result.update(shown={}, nccl_conf=None)
        try:
            for role, managed in roles.items():
                if not managed:
                    continue
                why, res = self._read(role, task_vars, result)
                if res.get("unreachable"):
                    return dict(res, changed=False)
                why = site_plan.seen_drift(role, res) if why == "it differs" else why
                if why:
                    result["differ"][role] = why
                result["shown"][role] = site_plan.shown(role, res)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result["drift"] = bool(result["differ"])
        result["msg"] = ("; ".join("%s: %s" % kv for kv in result["differ"].items())
                         if result["differ"] else "every role is in line")
        return result

    def _read(self, role, task_vars, status=None):
        """(why the role has something to do or None, its probe's result); ``status`` (every
        mode) gets the template's destination and whether it would change."""
        probe = site_plan.PROBES[role]
        res = self._step(probe.module, {"settings": {}}, probe.check_mode, task_vars)
        why = site_plan.judge(role, res)
        if why or not probe.template:
            return why, res
        src, register, dest_var, more = probe.template
        if dest_var not in task_vars:
            return "%s is not defined" % dest_var, res
        targs = dict(more, src=os.path.join(ROLES_DIR, src),
                     dest=self._templar.template(task_vars[dest_var]))
        tres = self._step("ansible.builtin.template", targs, True,
                          dict(task_vars, **{register: res}))
        if tres.get("failed") or tres.get("unreachable"):
            return site_plan.judge(role, tres), tres
        if status is not None:
            status["nccl_conf"] = {"path": targs["dest"], "differs": bool(tres.get("changed"))}
        return ("%s would change" % targs["dest"] if tres.get("changed") else None), res

    def _step(self, name, args, check_mode, task_vars):
        handler = builtin_step.handler_name(self._shared_loader_obj, name)
        step = builtin_step.action(self, name, args, check_mode=check_mode, handler=handler)
        return step.run(task_vars=task_vars)
