# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The rdma_facts module with its O(settings) filled from the nccl_env role's variables
(plugins/plugin_utils/role_settings.py; the table is rdma_nccl.SETTINGS), plus the host's
Ansible facts (C(facts), for the socket interface) and the roce_qos role's roce_qos_nccl_ib_tc
(C(ib_tc_roce_qos)) where it is set. A task without O(settings) runs the module as given."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import rdma_nccl
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "nccl_env"
    KEYS = tuple(rdma_nccl.SETTINGS)

    def more_args(self, args, task_vars):
        settings = args.get("settings")
        if isinstance(settings, dict):
            settings = dict(settings)
            if "facts" not in settings:
                settings["facts"] = dict(task_vars.get("ansible_facts") or {})
            if "ib_tc_roce_qos" not in settings and "roce_qos_nccl_ib_tc" in task_vars:
                settings["ib_tc_roce_qos"] = self._templar.template(
                    task_vars["roce_qos_nccl_ib_tc"])
            args = {**args, "settings": settings}
        return args
