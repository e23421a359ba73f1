# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Filters of the nccl_validate role. The logic lives in plugins/module_utils/validate_launch.py,
where the unit tests reach it without Ansible."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.rdmaprov.cluster.plugins.module_utils import (
    validate_launch as vl,
)


def _wrap(func):
    def inner(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (ValueError, KeyError, TypeError, OSError) as exc:
            raise AnsibleFilterError(f"{func.__name__}: {exc}") from exc
    inner.__name__ = func.__name__
    inner.__doc__ = func.__doc__
    return inner


def own_address(ansible_host, probe, env):
    """[address or None, where it came from] (a list: Jinja has no tuples)."""
    return list(vl.own_address(ansible_host, probe, env))


def host_rdma_decision(mode, image_has_verbs, rdma):
    mounts, why = vl.host_rdma_decision(mode, image_has_verbs, rdma)
    return {"mounts": mounts, "why": why}


def rendezvous(members, master_addr, master_vars):
    """{'addr': address or '', 'error': '' or one line}: the role asserts on it."""
    try:
        return {"addr": vl.rendezvous_address(members, master_addr, master_vars), "error": ""}
    except ValueError as exc:
        return {"addr": "", "error": str(exc)}


def rendezvous_of(members, master_addr, fabric_master, hostvars):
    """The rendezvous of a run (its first member holds rank 0), from that host's own address
    (fact _nccl_validate_own); nccl_validate_master_addr applies to the fabric master only."""
    master = members[0]
    own = hostvars[master].get("_nccl_validate_own") or [None, "its preflight did not run"]
    explicit = master_addr if master == fabric_master else ""
    return rendezvous(members, explicit, {"name": master, "own_addr": own[0],
                                          "own_addr_from": own[1]})


class FilterModule:
    def filters(self):
        return {
            "nccl_validate_fabric_members": _wrap(vl.fabric_members),
            "nccl_validate_own_address": _wrap(own_address),
            "nccl_validate_rendezvous_of": _wrap(rendezvous_of),
            "nccl_validate_host_rdma": _wrap(host_rdma_decision),
            "nccl_validate_launch": _wrap(vl.launch),
            "nccl_validate_preflight_argv": _wrap(vl.preflight_argv),
            "nccl_validate_preflight_failure": _wrap(vl.preflight_failure),
            "nccl_validate_require_ib": _wrap(vl.require_ib),
            "nccl_validate_wait_over": _wrap(vl.watch),
            "nccl_validate_stop_reason": _wrap(vl.stop_reason),
            "nccl_validate_steps": _wrap(vl.steps_summary),
        }
