# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The roce_qos_probe module with its O(settings) filled from the roce_qos role's variables
(plugins/plugin_utils/role_settings.py; the table of settings is netcfg_qos.SETTINGS)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_qos
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "roce_qos"
    KEYS = tuple(netcfg_qos.SETTINGS)
