#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/firewall_apply.py), which
# runs the builtin modules on the host; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: firewall_apply
short_description: Bring a host's firewall to the firewall role's plan
description:
  - Hands the fields of the plan C(rdmaprov.cluster.firewall_probe) returned to the builtin
    modules (C(command), C(file), C(copy), C(systemd_service)) on the host, in one task; check
    mode, diff and changed are theirs. What runs, and what runs under check mode, is the plan's
    (netcfg_firewall.apply_steps).
  - O(step=configure) runs the plan's firewall-cmd or C(ufw) commands (under check mode it
    reports the firewalld changes and switching ufw on instead, and runs only C(ufw --dry-run));
    for nftables it creates the ruleset directory, writes the candidate ruleset checked by
    C(nft -c), and for a new ruleset writes the rollback ruleset and stops a rollback timer left
    from an earlier run.
  - O(step=persist) (nftables) persists the confirmed candidate, installs the unit that loads it
    at boot and enables it.
  - O(step=rolled_back), in the rescue of the role's dead man's switch, reads the table the
    rollback timer restored and fails the host with the line that says what happened.
  - The timer itself, the detached load, the reconnect and the disarm stay tasks of the role.
version_added: "0.3.0"
author: rdmaprov developers (!UNKNOWN)
options:
  plan:
    description: The RV(rdmaprov.cluster.firewall_probe#module:plan) of the role's probe.
    type: dict
    required: true
  step:
    description: What to do (see the description).
    type: str
    required: true
    choices: [configure, persist, rolled_back]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.attributes.action
attributes:
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Bring the firewall to the plan
  rdmaprov.cluster.firewall_apply:
    plan: "{{ _firewall_probe.plan }}"
    step: configure
"""

RETURN = r"""
steps:
  description: What each builtin module answered, in order, with the C(step) it was.
  returned: always
  type: list
  elements: dict
msg:
  description:
    - Under check mode, what would change where the commands skip their work; on failure, the
      step that failed and why (after a rollback, what the rollback timer restored).
  returned: sometimes
  type: raw
rdmaprov_report:
  description: Under check mode, what would change, as lines for rdmaprov's host report.
  returned: under check mode, when something would change
  type: list
  elements: str
"""
