# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The slurm_health_probe module with its O(settings) filled from the slurm_health role's
variables (plugins/plugin_utils/role_settings.py; the table is slurm_health.SETTINGS) and
O(controller) filled on the control host: the
expectations directory's hosts.yml and this host's class file, the wheelhouse's wheels and the
rdmaprov wheel's checksum (module doc: plugins/modules/slurm_health_probe.py), and O(python_apt)
from the host's C(ansible_facts.rdmaprov.python_apt) where the task does not give it. The plan it returns
gains C(check_yml), check.yml's text (slurm_health.check_yml with Ansible's to_nice_yaml, which
the node's Python may lack), in the step that writes it too (slurm_health.with_check_yml). A relative
directory is found as the file and fileglob lookups find it (the task's search path: beside the
playbook, the role's files/). What to make of them is the module's plan
(module_utils/slurm_health.py)."""

from __future__ import annotations

import glob
import hashlib
import os

import yaml
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.filter.core import to_nice_yaml

from ansible_collections.rdmaprov.cluster.plugins.module_utils import slurm_health
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import role_settings
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


# What the role's verify task registers on each host, which arm reads back.
VERDICT = "_slurm_health_verdict"


class ActionModule(RoleSettingsAction):
    ROLE = "slurm_health"
    KEYS = tuple(slurm_health.SETTINGS)

    def _find(self, needle: str) -> str | None:
        try:
            return self._find_needle("files", needle)
        except AnsibleError:
            return None

    def _yaml(self, needle: str) -> tuple[bool, object]:
        """(found, parsed content) of a controller file; (False, None) when it is not there."""
        path = self._find(needle)
        if path is None or not os.path.isfile(path):
            return False, None
        try:
            return True, yaml.safe_load(self._loader.get_text_file_contents(path))
        except yaml.YAMLError as exc:
            problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
            raise AnsibleActionFail(f"{path}: not YAML ({problem})") from exc

    def controller(self, settings: dict, host: str) -> dict:
        out: dict = {}
        folder = settings.get("expect_dir") or ""
        if folder:
            out["expect_index"], index = self._yaml(folder + "/" + slurm_health.INDEX)
            out["expect_file"] = slurm_health.expect_file(index, host)
            if out["expect_file"]:
                out["expect_found"], out["expect"] = self._yaml(
                    folder + "/" + out["expect_file"])
        if settings.get("install") == "wheelhouse" and settings.get("wheelhouse"):
            where = self._find(str(settings["wheelhouse"]))
            paths = sorted(p for p in glob.glob(os.path.join(where, "*.whl"))
                           if os.path.isfile(p)) if where else []
            out["wheels"] = [os.path.basename(p) for p in paths]
            ours = [p for p in paths if slurm_health.rdmaprov_wheels([p])]
            if len(ours) == 1:
                with open(ours[0], "rb") as fh:
                    out["wheel_sha256"] = hashlib.sha256(fh.read()).hexdigest()
        return out

    def more_args(self, args, task_vars):
        settings = args.get("settings") or {}
        host = settings.get("host") or task_vars.get("inventory_hostname", "")
        if not args.get("verify"):  # the proof reads nothing on the control host
            args["controller"] = self.controller(settings, host)
            if "python_apt" not in args:  # the host's fact (rdmaprov's facts), true without it
                args["python_apt"] = role_settings.fact(task_vars, "python_apt")
        return args

    def arm(self, task_vars: dict) -> dict:
        """Once for the play (run_once): slurm_health.arm over every current host's registered
        verdict (hostvars: what each host's verify task returned), with slurm_health_force."""
        hostvars = task_vars.get("hostvars") or {}
        hosts = task_vars.get("ansible_play_batch") or [task_vars.get("inventory_hostname")]
        verdicts = {}
        for host in hosts:
            got = hostvars[host].get(VERDICT) if host in hostvars else None
            verdicts[host] = dict(got) if isinstance(got, dict) else None
        force = self._templar.template(task_vars.get("slurm_health_force", False))
        try:
            force = boolean(force, strict=True)
        except TypeError as exc:
            raise AnsibleActionFail(f"slurm_health_force: true or false, not {force!r}") from exc
        got = slurm_health.arm(verdicts, force)
        result = {"changed": False, "refuse": got["refuse"], "msg": got["msg"] or got["refuse"]}
        if got["warning"]:
            result["warnings"] = [got["warning"]]
        if got["refuse"]:
            result["failed"] = True
        return result

    def run(self, tmp=None, task_vars=None):
        if self._task.args.get("arm"):
            return self.arm(task_vars or {})
        result = super().run(tmp, task_vars)
        plan = result.get("plan")
        if isinstance(plan, dict) and "expect" in plan:
            slurm_health.with_check_yml(plan, slurm_health.check_yml(
                plan["expect"], plan["expect_source"], to_nice_yaml))
        return result
