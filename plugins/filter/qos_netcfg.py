# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The qos_tos filter (DSCP -> the IP TOS byte), for a user's own playbooks. The logic lives in
plugins/module_utils/netcfg_qos.py, where the unit tests reach it without Ansible."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_qos as qos


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
            "qos_tos": _wrap(qos.tos_from_dscp),
        }
