#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/site_plan.py), which
# runs each role's probe; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: site_plan
short_description: Read every rdmaprov role on a host in one task and say whether any has work
description:
  - Runs each listed role's own probe (its settings filled from the role's variables, as the
    role's own probe task gets them) in the order given, and judges it by the condition the
    role's C(site) entry acts on (plugins/plugin_utils/site_plan.py). C(kernel_modules) and the
    C(nccl_env) template are asked in check mode, so the task changes nothing.
  - Stops at the first role with something to do, to refuse, or whose probe failed, and returns
    RV(drift) true; the roles then run as they always do, each reading the host again.
  - Where every role is in line, returns what each role would have reported (R(rdmaprov_reports))
    and what other hosts' tasks read of it (net_mtu's plan, for a peer's path proof); site.yml
    ends the host's play there.
  - With C(--tags) or C(--skip-tags) it reads nothing and returns RV(drift) true.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  roles:
    description: Role name to whether the role is managed on this host (site.yml's condition for
      it), in site.yml's order. A role that is not managed is not read.
    type: dict
    required: true
  every:
    description:
      - Read every listed role, none left unread after a first difference (for C(rdmaprov status)).
        RV(differ) then names each role whose probe saw a difference, and RV(shown) holds what
        status shows of each probe. A role whose entry also runs for what its probe cannot read
        (container_runtime, for docker's daemon.json and NVIDIA's toolkit) is named only for what
        was read to differ. Tags are not looked at.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.attributes.action
"""

EXAMPLES = r"""
- name: Read every role; a host in line ends its play here
  rdmaprov.cluster.site_plan:
    roles:
      rdma_ofed: true
      rdma_modules: true
      net_mtu: true
  register: _site_plan
"""

RETURN = r"""
drift:
  description: Whether a role has something to do (or to refuse), a probe failed, or tags chose
    the roles.
  returned: always
  type: bool
differ:
  description: The first role with something to do, and why (with O(every), each such role).
  returned: always
  type: dict
roles:
  description: The roles as given (name to managed).
  returned: always
  type: dict
probes:
  description: What other hosts' tasks read of a role's probe (net_mtu's plan).
  returned: always
  type: dict
shown:
  description: With O(every), what C(rdmaprov status) shows of each role's probe (net_mtu's
    runtime changes, container_runtime's differences and RDMA CDI spec).
  returned: when O(every) is true
  type: dict
nccl_conf:
  description: With O(every), nccl_env's file (C(path)) and whether the role's template would
    change it (C(differs)); null where nccl_env was not read.
  returned: when O(every) is true
  type: dict
rdmaprov_reports:
  description: Each role's report (task label and lines) where every role is in line.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(argument_spec={"roles": {"type": "dict", "required": True},
                                          "every": {"type": "bool", "default": False}},
                           supports_check_mode=True)
    module.fail_json(msg="site_plan runs on the control host as an action; it has no module body")


if __name__ == "__main__":
    main()
