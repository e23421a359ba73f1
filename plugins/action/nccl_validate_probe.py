# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The nccl_validate_probe module with its O(settings) filled from the nccl_validate role's variables
(plugins/plugin_utils/role_settings.py; the table of settings is validate_launch.PLAN_KEYS)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "nccl_validate"
    KEYS = tuple(validate_launch.PLAN_KEYS)
