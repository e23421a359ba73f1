#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/nccl_validate_ready.py);
# this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_validate_ready
short_description: Every check that can fail a host before the validation launch, and the gate
description:
  - "With O(probe), on each host in this order, stopping at the first one that fails with its
    one line: the rendezvous (every member dials the rendezvous host's own address, its plan's
    C(own), read from that host's result of the probe: nccl_validate_probe's C(rendezvous));
    the host's intended NCCL settings kept with the results on the controller (C(plan.keep));
    then, outside check mode, the image on the host (pulled when missing, before anything is
    timed: nccl_validate_preflight's step image), the worker's files copied to the host
    (C(plan.worker), mode 0644, into directories of mode 0755), the worker's C(--preflight) in
    what the run will use, with this host's launch (nccl_validate_preflight), its document
    kept with the results; last, whether the rendezvous port is free (C(plan.port_problem))."
  - The rules are module_utils/validate_launch.py's; changed when the image was pulled, a
    worker file copied or a result file written.
  - "With O(all_ready), fails every host when a host of the play failed before (a missing peer
    would stall the others), saying C(not launched: <hosts> failed the preflight)."
version_added: "0.4.0"
author: rdmaprov developers (!UNKNOWN)
options:
  probe:
    description:
      - The name the role registered nccl_validate_probe's result under (given C(settings), so
        that it holds C(plan)); the rendezvous host's is read from its hostvars.
    type: str
  all_ready:
    description: Fail unless every host of the play is still in it.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.attributes.action
attributes:
  check_mode:
    support: full
    details: In check mode only the rendezvous, the kept settings (not written) and the port are checked.
"""

EXAMPLES = r"""
- name: Probe the host and plan
  rdmaprov.cluster.nccl_validate_probe:
    settings: {}
  register: probe

- name: Every check that can fail this host before the launch
  rdmaprov.cluster.nccl_validate_ready:
    probe: probe
  register: ready

- name: Launch only when every host is ready
  rdmaprov.cluster.nccl_validate_ready:
    all_ready: true
"""

RETURN = r"""
run:
  description: Whether this host has a launch (false in check mode).
  returned: with O(probe)
  type: bool
launch:
  description: This host's launch (nccl_validate_preflight's C(launch)).
  returned: with O(probe), when RV(run)
  type: dict
rendezvous:
  description: "{addr, error}: the address every member dials (nccl_validate_probe's)."
  returned: with O(probe)
  type: dict
preflight:
  description: "{document, exit_code, failure, host_rdma} of the worker's --preflight."
  returned: with O(probe), outside check mode, once the preflight ran
  type: dict
"""
