# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The filter of the rdma_modules role. The logic lives in
plugins/module_utils/driver_plan.py, where the unit tests reach it without Ansible."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.rdmaprov.cluster.plugins.module_utils import driver_plan as plan


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
            "combine_modules": _wrap(plan.combine_modules),
        }
