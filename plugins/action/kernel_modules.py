# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The kernel_modules module with its O(settings) filled from the rdma_modules role's
variables (plugins/plugin_utils/role_settings.py; the table is driver_plan.MODULE_SETTINGS)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import driver_plan
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "rdma_modules"
    KEYS = tuple(driver_plan.MODULE_SETTINGS)
