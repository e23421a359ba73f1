# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The firewall_probe module with its O(settings) filled from the firewall role's variables
(plugins/plugin_utils/role_settings.py; the table of settings is netcfg_firewall.SETTINGS)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_firewall
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "firewall"
    KEYS = tuple(netcfg_firewall.SETTINGS)

    def more_args(self, args, task_vars):
        """The table and the policy the module reads: the settings' (the role's variables)."""
        for key in ("nft_table", "firewalld_policy"):
            if key not in args and key in (args.get("settings") or {}):
                args[key] = args["settings"][key]
        return args
