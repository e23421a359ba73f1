# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The net_mtu_probe module with its O(settings) filled from the net_mtu role's variables
(plugins/plugin_utils/role_settings.py; the table of settings is netcfg_mtu.SETTINGS)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_mtu
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "net_mtu"
    KEYS = tuple(netcfg_mtu.SETTINGS)
