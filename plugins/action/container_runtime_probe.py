# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The container_runtime_probe module with its O(settings) filled from the container_runtime role's variables
(plugins/plugin_utils/role_settings.py; the table of settings is container_runtime.SETTINGS), and
the host's facts it reads (os_family, architecture, python_apt: container_runtime.fact_settings)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import container_runtime
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "container_runtime"
    KEYS = tuple(container_runtime.SETTINGS)
    FROM_FACTS = container_runtime.FACT_SETTINGS

    def more_args(self, args, task_vars):
        settings = args.get("settings")
        if isinstance(settings, dict):
            facts = task_vars.get("ansible_facts")
            found = container_runtime.fact_settings(facts if isinstance(facts, dict) else {})
            args["settings"] = {**self._templar.template(found), **settings}
        return args
