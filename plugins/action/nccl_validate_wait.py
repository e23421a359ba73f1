# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The wait for one host's part of a validation run (module doc: plugins/modules/
nccl_validate_wait.py). It runs on the controller, where every member's wait runs: it polls the
host's async job and, once the job has finished, records its exit code under exits_dir, where
the other members' waits read it (validate_launch.watch and stop_reason: a peer that could not
run ends everyone's wait at once)."""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch as vl


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "jid": {"type": "str", "required": True},
            "exits_dir": {"type": "path", "required": True},
            "members": {"type": "list", "elements": "str", "required": True},
            "timeout": {"type": "int", "required": True},
            "poll": {"type": "int", "default": 2},
        })
        host = task_vars["inventory_hostname"]
        async_dir = self._remote_expand_user(
            self.get_shell_option("async_dir", default="~/.ansible_async"))
        # As the until/retries loop it replaces: ceil(timeout / poll) polls, poll s apart.
        polls = -(-args["timeout"] // max(args["poll"], 1))
        job = {}
        for attempt in range(polls + 1):
            job = self._execute_module(
                module_name="ansible.legacy.async_status",
                module_args={"jid": args["jid"], "_async_dir": async_dir},
                task_vars=task_vars)
            job["finished"] = bool(job.get("finished"))
            if vl.watch(job, args["exits_dir"], host, args["members"]):
                break
            if attempt < polls:
                time.sleep(args["poll"])
        else:
            result.update(failed=True, finished=False, stop_reason="",
                          msg=job.get("msg") or f"the job did not finish in {args['timeout']} s")
            return result
        result.update(finished=job["finished"], exit_code=vl.exit_code(job),
                      stop_reason="" if job["finished"]
                      else vl.stop_reason(args["exits_dir"], host, args["members"]),
                      changed=False)
        return result
