#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: firewall_probe
short_description: "Read the firewall tools, the live rules, the listening sockets and Slurm's config"
description:
  - "Reads C(nft list table), C(ufw status), C(firewall-cmd) policies, /proc/net sockets and their owners, and slurm.conf; changes nothing (check mode safe)."
  - With O(files) and O(units), also reads the files and units the role keeps, so that one call
    tells the control host whether a converged host needs any further task.
  - With O(settings), also plans (netcfg_firewall.plan) what to open, what to refuse and why,
    and each backend's changes, renders the nftables ruleset and its boot unit, reads the files
    and unit the nftables backend keeps and says what differs, and reports the backend, so that
    a converged host needs no task of the role's beyond this one and the skipped converge.
  - With O(verify), reads only the backend's rules back after the role applied O(plan) and
    holds them to it (netcfg_firewall.verify), returning RV(verify) instead.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  nft_table:
    description:
      - The nftables table (family inet) rdmaprov owns.
      - Left out, the action plugin takes it from O(settings) where that has it.
    type: str
    default: rdmaprov
  firewalld_policy:
    description:
      - The firewalld policy rdmaprov owns.
      - Left out, the action plugin takes it from O(settings) where that has it.
    type: str
    default: rdmaprov-cluster
  settings:
    description:
      - The firewall role's settings (keys backend, policy, cluster_subnets, allow_control_host,
        ssh_sources, ssh_port, rendezvous_ports, nccl_port_range, roce_udp_port, slurm, allow,
        waive, nft_extra_rules, nft_dir, nft_unit_name, nft_table, firewalld_policy and
        rollback_seconds, as the role's firewall_* variables hold them; host, the inventory name
        the refusals start with; connection, Ansible's connection type; check_mode, whether the
        play runs under --check, for which the plan's commands and reports are made). Given, the
        module returns
        RV(plan) and RV(rdmaprov_report); a setting it cannot use fails the module.
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py), from the role variable
        C(firewall_<key>) where one is defined, else from the play (C(host), C(address),
        C(hosts), C(check_mode), C(connection), C(managed)). C({}) gives the role's settings whole.
    type: dict
  verify:
    description:
      - Read the backend's rules back (C(nft list table), C(firewall-cmd --list-rich-rules)
        or C(ufw show added)) and hold them to O(plan); nothing else is probed. Under check
        mode only an nftables table that is not pending is read.
    type: bool
    default: false
  plan:
    description: With O(verify), the RV(plan) of the module's first call.
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.state_probe
"""
EXAMPLES = r"""
- name: Firewall state
  rdmaprov.cluster.firewall_probe:
    nft_table: rdmaprov
  register: probe
"""
RETURN = r"""
nft_table:
  description: C(nft list table inet NAME) (rc, stdout, stderr).
  returned: always
  type: dict
nft_reference:
  description:
    - The rendered ruleset as this host's nft prints it back after loading it into a network
      namespace of its own (rc, stdout, stderr, and the C(sha1) of the ruleset it was made from);
      the plan compares the live table (C(nft_table)) with it, rule by rule and set element by
      set element.
  returned: when O(settings) is given and the backend is nftables
  type: dict
control_ip:
  description: The control host's address as sshd saw it, or null.
  returned: always
  type: str
firewalld_active:
  description: Whether firewalld runs.
  returned: always
  type: bool
ufw_active:
  description: Whether ufw is active.
  returned: always
  type: bool
proc_net:
  description: /proc/net/tcp, tcp6, udp and udp6 as text.
  returned: always
  type: dict
file_state:
  description: For each of O(files), whether it exists and its sha1, mode, owner and group.
  returned: always
  type: dict
  sample: {/etc/systemd/system/rdmaprov-mtu.service: {exists: true, sha1: 3f78..., mode: "0644", owner: root, group: root}}
unit_state:
  description: For each of O(units), what C(systemctl is-enabled) answers.
  returned: always
  type: dict
  sample: {rdmaprov-mtu.service: enabled}
plan:
  description:
    - The backend (null when none is usable) and why, the sources, the port sets, Slurm's
      ports, the allow entries, the listeners and those the ruleset would cut; the nftables
      ruleset (C(nft_rules), its C(nft_hash)), boot unit (C(nft_unit)), rollback ruleset and
      paths; whether the ruleset is new (C(new_ruleset)), where the kept files and unit differ
      (C(file_drift)), whether the role has anything to do (C(drift)) and what it refuses
      (C(errors), and as one line C(refusal)).
    - What M(rdmaprov.cluster.firewall_apply) and the role's rollback tasks run
      (netcfg_firewall.apply_steps), as argv lists (the firewalld or ufw C(commands), the
      rollback timer's C(nft_arm) and C(nft_disarm), the detached C(nft_load)), and what check
      mode reports instead of running (C(check_report)).
  returned: when O(settings) is given
  type: dict
  sample: {backend: nftables, backend_reason: "neither firewalld nor ufw is active; nft is installed", policy: scoped}
verify:
  description:
    - With O(verify), whether the rules read back were checked (C(applies)) and hold to the
      plan (C(ok)), the line that says so (C(msg)), and under check mode the pending nftables
      change (C(pending)).
  returned: when O(verify) is true
  type: dict
  sample: {applies: true, ok: true, msg: "node1: ufw: 9 rdmaprov rules; ufw active", pending: ""}
rdmaprov_report:
  description: The backend, as a line for rdmaprov's host report.
  returned: when O(settings) is given
  type: list
  elements: str
  sample: ["firewall backend nftables (neither firewalld nor ufw is active; nft is installed)"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import firewall_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_firewall
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def _verify(module: AnsibleModule) -> None:
    """Read the applied rules back and hold them to the plan (no other probing)."""
    p = module.params
    plan, check = p["plan"], module.check_mode
    settings = {**p["settings"], "nft_table": p["nft_table"],
                "firewalld_policy": p["firewalld_policy"]}
    pending = plan["new_ruleset"]
    argv = {"nftables": ["nft", "list", "table", "inet", p["nft_table"]],
            "firewalld": ["firewall-cmd", "--policy=%s" % p["firewalld_policy"],
                          "--list-rich-rules"],
            "ufw": ["ufw", "show", "added"]}.get(plan["backend"] or "")
    read = argv and not (check and (plan["backend"] != "nftables" or pending))
    live = probe.run(argv) if read else None
    module.exit_json(changed=False, verify=netcfg_firewall.verify(plan, settings, live, check,
                                                                  pending))


def main() -> None:
    module = AnsibleModule(
        argument_spec={"nft_table": {"type": "str", "default": "rdmaprov"},
                       "firewalld_policy": {"type": "str", "default": "rdmaprov-cluster"},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC,
                       "settings": {"type": "dict"},
                       "verify": {"type": "bool", "default": False},
                       "plan": {"type": "dict"}},
        required_if=[("verify", True, ("plan", "settings"))],
        supports_check_mode=True,
    )
    p = module.params
    if p["verify"]:
        _verify(module)
    result = probe.probe(p["nft_table"], p["firewalld_policy"])
    if "error" in result:
        module.fail_json(msg=result["error"])
    files, units = list(p["files"]), list(p["units"])
    settings = p["settings"]
    if settings is not None:
        settings = {**settings, "nft_table": p["nft_table"]}
        try:
            where = netcfg_firewall.paths(settings)
            units.append(settings["nft_unit_name"])
        except KeyError as exc:
            module.fail_json(msg="firewall plan: settings has no %s" % exc)
        files += [where["nft_file"], where["nft_candidate"], where["unit_file"]]
    result.update(file_state=state_drift.read_files(files), unit_state=state_drift.read_units(units))
    if settings is not None:
        try:
            plan = netcfg_firewall.plan(result, settings, p["firewalld_policy"])
        except KeyError as exc:
            module.fail_json(msg="firewall plan: settings has no %s" % exc)
        except (ValueError, TypeError) as exc:
            module.fail_json(msg="firewall plan: %s" % exc)
        if plan["backend"] == "nftables":
            # The wanted table as this host's nft prints it, then the plan again against it.
            result["nft_reference"] = probe.nft_reference(plan["nft_rules"], p["nft_table"],
                                                          plan["nft_hash"])
            try:
                plan = netcfg_firewall.plan(result, settings, p["firewalld_policy"])
            except (KeyError, ValueError, TypeError) as exc:
                module.fail_json(msg="firewall plan: %s" % exc)
        result["plan"] = plan
        result["rdmaprov_report"] = ["firewall backend %s (%s)" % (plan["backend"] or "none", plan["backend_reason"])]
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
