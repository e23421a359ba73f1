# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The net_mtu_verify module with its O(peers) filled from the plays' plans: each host's
registered ``_net_mtu_probe`` (net_mtu's preflight), read through hostvars. Whether the proof runs
at all is netcfg_mtu.proof()'s: this host has something to prove, and the proof is asked for
(--tags net_mtu_verify) or any host of the play has something to do; else the task is skipped."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_mtu
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import site_plan

# The variable net_mtu's preflight registers the probe (and its plan) in.
PROBE = "_net_mtu_probe"


def _probe(host_vars):
    """The host's net_mtu probe: its own, else what site.yml's site plan kept of it (a host in
    line ends its play there, before net_mtu runs)."""
    probe = host_vars.get(PROBE)
    if isinstance(probe, dict):
        return probe
    kept = host_vars.get(site_plan.REGISTER)
    if isinstance(kept, dict) and isinstance(kept.get("probes"), dict):
        return kept["probes"].get("net_mtu")
    return None


def _plans(hostvars, names):
    """name -> that host's net_mtu plan, for the names whose probe ran."""
    out = {}
    for name in names:
        if name not in hostvars:
            continue
        probe = _probe(hostvars[name])
        if isinstance(probe, dict) and isinstance(probe.get("plan"), dict):
            out[name] = probe["plan"]
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        verify = args.get("verify")
        if "peers" not in args:
            hostvars = task_vars.get("hostvars") or {}
            play = list(task_vars.get("ansible_play_hosts") or [])
            plans = _plans(hostvars, play)
            wanted = list((verify or {}).get("peers") or [])
            others = _plans(hostvars, [n for n in wanted if n not in plans]) if wanted else {}
            run, peers = netcfg_mtu.proof(task_vars.get("inventory_hostname"), verify, plans,
                                          task_vars.get("ansible_run_tags") or [],
                                          {**plans, **others})
            if not run:
                result.update(changed=False, skipped=True, skip_reason=(
                    "nothing to prove on this host" if not verify else
                    "no host of the play has anything to do (--tags net_mtu_verify proves anyway)"))
                return result
            args["peers"] = peers
        module = getattr(self._task, "resolved_action", None) or self._task.action
        result.update(self._execute_module(module_name=module, module_args=args,
                                           task_vars=task_vars))
        # The verdicts are the host's report: shown without -v, as an assert's message is.
        result["_ansible_verbose_always"] = True
        return result
