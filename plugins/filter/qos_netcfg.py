# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Filters of the network roles (net_mtu, roce_qos, firewall). The logic lives in
plugins/module_utils/netcfg_*.py, where the unit tests reach it without Ansible."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.rdmaprov.cluster.plugins.module_utils import (
    netcfg_firewall as fw,
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
            "netcfg_fw_nft_summary": _wrap(fw.nft_table_summary),
            "netcfg_fw_admits": _wrap(fw.control_host_allowed),
            "netcfg_fw_live_hash": _wrap(fw.live_hash),
            "netcfg_fw_firewalld_rules": _wrap(fw.firewalld_rules),
            "netcfg_fw_firewalld_changes": _wrap(fw.firewalld_changes),
            "netcfg_fw_ufw_rules": _wrap(fw.ufw_rules),
        }
