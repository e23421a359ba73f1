# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Filters of the network roles (net_mtu, roce_qos). The logic lives in
plugins/module_utils/netcfg_*.py, where the unit tests reach it without Ansible."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.rdmaprov.cluster.plugins.module_utils import (
    netcfg_mtu as mtu,
    netcfg_qos as qos,
)


def _wrap(func):
    def inner(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (ValueError, KeyError, TypeError) as exc:
            raise AnsibleFilterError(f"{func.__name__}: {exc}") from exc
    inner.__name__ = func.__name__
    inner.__doc__ = func.__doc__
    return inner


class FilterModule:
    def filters(self):
        return {
            "netcfg_ping_pair": _wrap(mtu.ping_pair),
            "qos_tos": _wrap(qos.tos_from_dscp),
        }
