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
  - "The firewall role plans on the control host (netcfg_firewall) and acts only when the live rules differ."
  - With O(files) and O(units), also reads the files and units the role keeps, so that one call
    tells the control host whether a converged host needs any further task.
  - With O(settings), also plans (netcfg_firewall.plan) and reports the backend, so that a
    converged host needs no task of the role's beyond this one and the skipped converge.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  nft_table:
    description: The nftables table (family inet) rdmaprov owns.
    type: str
    default: rdmaprov
  firewalld_policy:
    description: The firewalld policy rdmaprov owns.
    type: str
    default: rdmaprov-cluster
  settings:
    description:
      - The firewall role's settings (keys backend, policy, cluster_subnets, allow_control_host,
        ssh_sources, ssh_port, rendezvous_ports, nccl_port_range, roce_udp_port, slurm, allow
        and waive, as the role's firewall_* variables hold them). Given, the module returns
        RV(plan) and RV(rdmaprov_report); a setting it cannot use fails the module.
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
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
      ports, the allow entries, the listeners and those the ruleset would cut.
  returned: when O(settings) is given
  type: dict
  sample: {backend: nftables, backend_reason: "neither firewalld nor ufw is active; nft is installed", policy: scoped}
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={**{"nft_table": {"type": "str", "default": "rdmaprov"}, "firewalld_policy": {"type": "str", "default": "rdmaprov-cluster"}},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC,
                       "settings": {"type": "dict"}},
        supports_check_mode=True,
    )
    p = module.params
    result = probe.probe(p["nft_table"], p["firewalld_policy"])
    if "error" in result:
        module.fail_json(msg=result["error"])
    if p["settings"] is not None:
        try:
            plan = netcfg_firewall.plan(result, p["settings"])
        except (ValueError, KeyError, TypeError) as exc:
            module.fail_json(msg="firewall plan: %s" % exc)
        result["plan"] = plan
        result["rdmaprov_report"] = ["firewall backend %s (%s)" % (plan["backend"] or "none", plan["backend_reason"])]
    module.exit_json(changed=False, file_state=state_drift.read_files(p["files"]),
                     unit_state=state_drift.read_units(p["units"]), **result)


if __name__ == "__main__":
    main()
