# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The wait for one host's part of a validation run (module doc: plugins/modules/
nccl_validate_wait.py). It runs on the controller, where every member's wait runs: it polls the
host's async job and, once the job has finished, records its exit code under the run's exits
directory, where the other members' waits read it (validate_launch.watch and stop_reason: a peer
that could not run ends everyone's wait at once, and the wait then stops this host's part).
"""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch as vl


# Polls of a stopped part, a second apart (as the until/retries loop this replaces: 30 retries).
STOP_POLLS = 31


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _job(self, jid, async_dir, task_vars):
        job = self._execute_module(module_name="ansible.legacy.async_status",
                                   module_args={"jid": jid, "_async_dir": async_dir},
                                   task_vars=task_vars)
        job["finished"] = bool(job.get("finished"))
        return job

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "jid": {"type": "str", "required": True},
            "launch": {"type": "dict", "required": True},
        })
        launch = args["launch"]
        exits, members = launch["exits"], list(launch["members"])
        timeout, poll = int(launch["wait"]), int(launch.get("poll") or 2)
        host = task_vars["inventory_hostname"]
        async_dir = self._remote_expand_user(
            self.get_shell_option("async_dir", default="~/.ansible_async"))
        # As the until/retries loop it replaces: ceil(timeout / poll) polls, poll s apart.
        polls = -(-timeout // max(poll, 1))
        job = {}
        for attempt in range(polls + 1):
            job = self._job(args["jid"], async_dir, task_vars)
            if vl.watch(job, exits, host, members):
                break
            if attempt < polls:
                time.sleep(poll)
        else:
            result.update(failed=True, finished=False, stop_reason="",
                          msg=job.get("msg") or f"the job did not finish in {timeout} s")
            return result
        reason = "" if job["finished"] else vl.stop_reason(exits, host, members)
        result.update(finished=job["finished"], exit_code=vl.exit_code(job), stop_reason=reason,
                      changed=False)
        if not job["finished"]:
            # A peer could not run: stop this host's part (its own failure is ignored: the
            # part may have ended meanwhile), then wait for it, 30 s at most.
            self._execute_module(module_name="ansible.legacy.command",
                                 module_args={"argv": vl.stop_argv(launch["dir"], host, reason)},
                                 task_vars=task_vars)
            for attempt in range(STOP_POLLS):
                if self._job(args["jid"], async_dir, task_vars)["finished"]:
                    break
                if attempt < STOP_POLLS - 1:
                    time.sleep(1)
            else:
                result.update(failed=True,
                              msg=f"{reason}; this host's part did not end within "
                                  f"{STOP_POLLS} s of its stop")
        if launch.get("rm_killed") and not result.get("failed"):
            # The container of a killed run (the engine's --rm removed a finished one: its
            # failure here says nothing).
            self._execute_module(module_name="ansible.legacy.command",
                                 module_args={"argv": launch["rm_killed"]}, task_vars=task_vars)
        return result
