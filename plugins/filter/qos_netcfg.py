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
    ranges,
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


def qos_plan(probe, settings):
    """Probe of one interface + role settings → {state, drift, commands, writes}."""
    want = qos.desired(settings)
    backend = settings.get("backend", "auto")
    if backend == "dcb":
        probe = {**probe, "mlnx_qos": None}
    state = qos.qos_state(probe)
    if backend == "mlnx_qos" and state["backend"] != "mlnx_qos" and state["capable"]:
        state.update(capable=False, reason=f"{state['name']}: roce_qos_backend is mlnx_qos, "
                     "but mlnx_qos is not installed or cannot read this interface")
    cmds = []
    if state["backend"] == "mlnx_qos":
        cmds = qos.mlnx_qos_commands(state["name"], want)
    elif state["backend"] == "dcb":
        cmds = qos.dcb_commands(state["name"], want)
    cnp = None
    if settings.get("cnp_dscp") is not None and settings.get("cnp_priority") is not None:
        cnp = {"dscp": settings["cnp_dscp"], "priority": settings["cnp_priority"]}
    writes = qos.sysfs_writes(state["name"], state.get("ibdev"), probe.get("ibport") or 1, want, cnp)
    return {"name": state["name"], "state": state, "drift": qos.drift(state, want),
            "backend": state["backend"], "capable": state["capable"], "reason": state["reason"],
            "tos": want["tos"],
            "commands": [qos.shell_line(c) for c in cmds],
            "writes": [{"path": p, "value": v} for p, v in writes]}


def qos_report(plan):
    """A plan reduced to what the role reports per interface."""
    st = plan["state"]
    return {"name": plan["name"], "capable": plan["capable"], "reason": plan["reason"],
            "backend": plan["backend"], "drift": plan["drift"], "trust": st.get("trust"),
            "pfc": st.get("pfc"), "tos": plan["tos"]}


class FilterModule:
    def filters(self):
        return {
            "netcfg_iface_for_address": _wrap(mtu.iface_for_address),
            "netcfg_mtu_backend": _wrap(mtu.pick_backend),
            "netcfg_mtu_limit_error": _wrap(mtu.mtu_limit_error),
            "netcfg_df_payload": _wrap(mtu.df_payload),
            "netcfg_ifupdown_set_mtu": _wrap(mtu.ifupdown_set_mtu),
            "netcfg_ping_verdict": _wrap(mtu.ping_verdict),
            "netcfg_ping_pair": _wrap(mtu.ping_pair),
            "netcfg_mtu_drift": _wrap(mtu.mtu_drift),
            "qos_tos": _wrap(qos.tos_from_dscp),
            "range_problems": _wrap(ranges.problems),
            "qos_plan": _wrap(qos_plan),
            "qos_report": _wrap(qos_report),
            "netcfg_fw_backend": _wrap(fw.pick_backend),
            "netcfg_fw_port_range": _wrap(fw.port_range),
            "netcfg_fw_subnets": _wrap(fw.normalise_subnets),
            "netcfg_fw_nft_summary": _wrap(fw.nft_table_summary),
            "netcfg_fw_admits": _wrap(fw.control_host_allowed),
            "netcfg_fw_live_hash": _wrap(fw.live_hash),
            "netcfg_fw_plan": _wrap(fw.plan),
            "netcfg_fw_firewalld_rules": _wrap(fw.firewalld_rules),
            "netcfg_fw_firewalld_changes": _wrap(fw.firewalld_changes),
            "netcfg_fw_ufw_rules": _wrap(fw.ufw_rules),
        }
