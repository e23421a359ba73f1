# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The nccl_validate role's result directories and files on the controller (module doc:
plugins/modules/nccl_validate_results.py): validate_launch.keep_results, run where the results
are, with what the role's plan and launch list. Around one launch: before it, its fresh result
directory on the host (the file module) and on the controller; after it, how this host's part
ended (nccl_validate_probe's O(result): validate_launch.part_failure), its files fetched (the
fetch action), the run recorded, and the host failed with the part's one line."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch as vl


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def _keep(self, result, paths, files):
        try:
            changed = vl.keep_results(paths, files, dry=self._task.check_mode)
        except (OSError, ValueError, KeyError) as exc:
            result.update(failed=True, msg=f"results on the controller: {exc}")
            return False
        result["changed"] = bool(result.get("changed")) or changed
        result.setdefault("kept", []).extend(f["dest"] for f in files)
        return True

    def _fresh(self, result, launch, task_vars):
        """A fresh result directory on the host (never reported changed: it is reset every
        run), then the controller's, with no exit code or rail outputs of an earlier run."""
        for p in launch["host_paths"]:
            out = self._execute_module(module_name="ansible.legacy.file", task_vars=task_vars,
                                       module_args={"path": p["path"], "state": p["state"],
                                                    "mode": "0755"})
            if out.get("failed"):
                result.update(failed=True, msg=out.get("msg") or f"{p['path']}: {p['state']}")
                return
        self._keep(result, launch["controller_paths"], [])

    def _fetch_one(self, item, task_vars):
        task = self._task.copy()
        task.args = {"src": item["src"], "dest": item["dest"], "flat": True,
                     "fail_on_missing": False}
        fetch = self._shared_loader_obj.action_loader.get(
            "ansible.legacy.fetch", task=task, connection=self._connection,
            play_context=self._play_context, loader=self._loader, templar=self._templar,
            shared_loader_obj=self._shared_loader_obj)
        return fetch.run(task_vars=task_vars)

    def _ended(self, result, launch, task_vars):
        """Why this host's part failed, in one line ('' when it passed) and what to fetch;
        the fetch, the run's record; then the line fails the host."""
        out = self._execute_module(module_name="rdmaprov.cluster.nccl_validate_probe",
                                   module_args={"result": launch}, task_vars=task_vars)
        if out.get("failed"):
            result.update(failed=True, msg=out.get("msg"))
            return
        part = result["part"] = out["part"]
        for item in part.get("fetch") or []:
            got = self._fetch_one(item, task_vars)
            if got.get("failed"):
                result.update(failed=True, msg=got.get("msg") or f"cannot fetch {item['src']}")
                return
            result["changed"] = bool(result.get("changed") or got.get("changed"))
        if self._keep(result, [], launch["keep"]) and part["reason"]:
            result.update(failed=True, msg=part["reason"])

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "paths": {"type": "list", "elements": "dict", "default": []},
            "files": {"type": "list", "elements": "dict", "default": []},
            "fresh": {"type": "dict"},
            "ended": {"type": "dict"},
        }, mutually_exclusive=[("fresh", "ended")])
        result["changed"] = False
        if args["fresh"] is not None:
            self._fresh(result, args["fresh"], task_vars)
        elif args["ended"] is not None:
            try:
                self._ended(result, args["ended"], task_vars)
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)
        else:
            self._keep(result, args["paths"], args["files"])
        result.setdefault("kept", [])
        return result
