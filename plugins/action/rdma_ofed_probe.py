# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The rdma_ofed_probe module with its O(settings) filled from the rdma_ofed role's variables
(plugins/plugin_utils/role_settings.py; the table of settings is driver_versions.SETTINGS)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import driver_versions
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "rdma_ofed"
    KEYS = tuple(driver_versions.SETTINGS)
