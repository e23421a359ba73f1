# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The nccl_validate_probe module with its O(settings) filled from the nccl_validate role's variables
(plugins/plugin_utils/role_settings.py; the table of settings is validate_launch.PLAN_KEYS).
With O(settings), the plan it returns gains C(worker): the files the role copies to the host for
the worker (validate_launch.worker_copies), found here on the controller: nccl_validate_worker_src,
else the worker.py of the rdmaprov that Ansible's Python imports, and the port reader beside
validate_launch."""

from __future__ import annotations

import importlib.util
import os
import sys

from ansible.errors import AnsibleActionFail

from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)

WORKER = "rdmaprov.validate.worker"


def find_worker(given):
    """worker.py on the controller: ``given`` (nccl_validate_worker_src), else the one of the
    rdmaprov this Python imports; one line when there is none."""
    if given:
        return given
    try:
        spec = importlib.util.find_spec(WORKER)
    except ImportError:
        spec = None
    if spec is None or not spec.origin:
        raise AnsibleActionFail(f"nccl_validate_worker_src is empty and {sys.executable} cannot "
                                f"import {WORKER}: set it to the worker.py of an rdmaprov")
    return spec.origin


class ActionModule(RoleSettingsAction):
    ROLE = "nccl_validate"
    KEYS = tuple(validate_launch.PLAN_KEYS)

    def more_args(self, args, task_vars):
        # The role's first probe (its settings, the role's variables): where the worker is.
        self._worker = None
        settings = args.get("settings")
        if isinstance(settings, dict) and "nccl_validate_worker_src" in task_vars \
                and settings.get("remote_dir"):
            src = find_worker(self._templar.template(task_vars["nccl_validate_worker_src"]))
            self._worker = (src, settings["remote_dir"])
        return args

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        plan = result.get("plan")
        if isinstance(plan, dict) and getattr(self, "_worker", None):
            src, remote_dir = self._worker
            ports = os.path.join(os.path.dirname(validate_launch.__file__), "rdma_ports.py")
            plan["worker"] = validate_launch.worker_copies(src, ports, remote_dir)
        return result
