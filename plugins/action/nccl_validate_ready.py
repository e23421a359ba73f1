# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Every check of the nccl_validate role that can fail a host before the launch, in one task
(module doc: plugins/modules/nccl_validate_ready.py), and the gate that launches only when every
host passed them. The rules are plugins/module_utils/validate_launch.py's; this plugin runs them
in the role's order, on the host (the nccl_validate_probe and nccl_validate_preflight modules,
the file module, the copy action) and on the controller (validate_launch.keep_results)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch as vl
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import builtin_step

PROBE = "rdmaprov.cluster.nccl_validate_probe"
PREFLIGHT = "rdmaprov.cluster.nccl_validate_preflight"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def _module(self, name, args, task_vars):
        return self._execute_module(module_name=name, module_args=args, task_vars=task_vars)

    def _copy(self, item, task_vars):
        """The copy action for one of the worker's files (plan.worker), as a task would run it."""
        args = {"src": item["src"], "dest": item["dest"], "mode": "0644"}
        return builtin_step.action(self, "ansible.legacy.copy", args).run(task_vars=task_vars)

    def _keep(self, files):
        """The files to keep with the results on the controller; '' or why not."""
        try:
            return vl.keep_results((), files, dry=self._task.check_mode), ""
        except (OSError, ValueError, KeyError) as exc:
            return False, f"results on the controller: {exc}"

    def _worker(self, copies, task_vars):
        """The worker's directory and files on the host: (changed, '' or why not)."""
        changed = False
        for path in vl.worker_dirs(copies):
            out = self._module("ansible.legacy.file", {"path": path, "state": "directory",
                                                       "mode": "0755"}, task_vars)
            if out.get("failed"):
                return changed, out.get("msg") or f"cannot make {path}"
            changed |= bool(out.get("changed"))
        for item in copies:
            out = self._copy(item, task_vars)
            if out.get("failed"):
                return changed, out.get("msg") or f"cannot copy {item['name']}"
            changed |= bool(out.get("changed"))
        return changed, ""

    def _host(self, probe_name, task_vars):
        """The host's checks, in order; the result the role registers (launch, run)."""
        probe = task_vars.get(probe_name)
        if not isinstance(probe, dict) or not isinstance(probe.get("plan"), dict):
            raise AnsibleActionFail(f"{probe_name} holds no nccl_validate_probe plan "
                                    "(register the probe with settings under that name)")
        plan = probe["plan"]
        master = (task_vars.get("hostvars") or {}).get(plan["members"][0]) or {}
        own = vl.own_of(master.get(probe_name))
        out = {"changed": False, "run": False}
        # Across hosts: every member dials the rendezvous host's own address.
        rdzv = self._module(PROBE, {"rendezvous": plan["rendezvous"], "own": own}, task_vars)
        out.update(rendezvous=rdzv.get("rendezvous"), routes=rdzv.get("routes"))
        if rdzv.get("failed") or rdzv.get("failure"):
            return {**out, "failed": True, "msg": rdzv.get("failure") or rdzv.get("msg")}
        # The judge compares them with NCCL's own "set by environment" lines.
        changed, why = self._keep(plan["keep"])
        out["changed"] |= changed
        if why:
            return {**out, "failed": True, "msg": why}
        if not self._task.check_mode:
            # The image (pulled when missing, before anything is timed), the worker, and its
            # --preflight in what the run will use; with it, this host's launch.
            image = self._module(PREFLIGHT, {"settings": plan["settings"], "step": "image"},
                                 task_vars)
            out["changed"] |= bool(image.get("changed"))
            if image.get("failed"):
                return {**out, "failed": True, "msg": image.get("msg")}
            changed, why = self._worker(plan.get("worker") or [], task_vars)
            out["changed"] |= changed
            if why:
                return {**out, "failed": True, "msg": why}
            pf = self._module(PREFLIGHT, {"settings": plan["settings"],
                                          "rendezvous": rdzv["rendezvous"]["addr"]}, task_vars)
            if pf.get("failed"):
                return {**out, "failed": True, "msg": pf.get("msg")}
            shown = ("document", "exit_code", "failure", "host_rdma")
            out.update(preflight={k: pf.get(k) for k in shown})
            changed, why = self._keep(pf.get("keep") or [])
            out["changed"] |= changed
            if why or pf["failure"]:
                return {**out, "failed": True, "msg": why or pf["failure"]}
            if pf.get("launch"):
                out.update(launch=pf["launch"], run=True)
        # Last: its peers then fail as 'not launched' naming it.
        if plan["port_problem"]:
            return {**out, "failed": True, "msg": plan["port_problem"], "run": False}
        return out

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _valid, args = self.validate_argument_spec(argument_spec={
            "probe": {"type": "str"},
            "all_ready": {"type": "bool", "default": False},
        }, mutually_exclusive=[("probe", "all_ready")], required_one_of=[("probe", "all_ready")])
        if args["all_ready"]:
            why = vl.not_launched(list(task_vars.get("ansible_play_hosts_all") or []),
                                  list(task_vars.get("ansible_play_hosts") or []))
            result.update(changed=False, **({"failed": True, "msg": why} if why else {}))
            return result
        try:
            result.update(self._host(args["probe"], task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
