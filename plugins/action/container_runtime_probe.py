# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The container_runtime_probe module with its O(settings) filled from the container_runtime
role's variables (plugins/plugin_utils/role_settings.py; the table of settings is
container_runtime.SETTINGS) and, for os_family, architecture and python_apt, from the host's
facts (role_settings.FACTS)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import container_runtime
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils.role_settings import (
    RoleSettingsAction,
)


class ActionModule(RoleSettingsAction):
    ROLE = "container_runtime"
    KEYS = tuple(container_runtime.SETTINGS)
