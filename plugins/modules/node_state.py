#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_state
short_description: Read one node's RDMA, network, QoS, firewall, runtime and validation state
description:
  - The read-only snapshot behind C(rdmaprov status), one call per node. It reads with the
    readers the roles and C(rdmaprov probe) use (module_utils/node_state.py over rdma_sysfs and
    kernel_caps), so status and the roles cannot disagree about a fact.
  - Changes nothing; check mode safe.
version_added: "0.3.0"
author: rdmaprov developers (!UNKNOWN)
options:
  modules:
    description: Kernel modules to report as loaded, built in or absent (nothing is loaded).
    type: list
    elements: str
    default: []
  nccl_conf:
    description: NCCL's settings file to report as present or absent (nccl_env_conf_path); empty reads none.
    type: str
    default: ""
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
"""
EXAMPLES = r"""
- name: Read node state
  rdmaprov.cluster.node_state:
    modules: [ib_core, ib_uverbs, mlx5_ib, nvidia_peermem]
  register: state
"""
RETURN = r"""
drivers:
  description: MLNX_OFED/DOCA's version (C(ofed_info -s)), else C(rdma-core VERSION); null when neither.
  returned: always
  type: str
mtu:
  description: Each network interface's MTU but the loopback's.
  returned: always
  type: dict
  sample: {eth0: 1500, ens1f0np0: 9000}
qos:
  description:
    - The QoS boot unit's state (C(unit), null when not installed) and whether its script is there (C(script)).
    - What the unit's last run logged per NIC (C(nics)), null without a journal.
  returned: always
  type: dict
firewall:
  description: The firewall role's backend in one line; null where no firewall tool is installed.
  returned: always
  type: str
runtime:
  description: The container engine and its version (docker before podman); null when none.
  returned: always
  type: str
gpus:
  description: NVIDIA GPUs the driver lists.
  returned: always
  type: int
rdma_devices:
  description: RDMA devices in /sys/class/infiniband.
  returned: always
  type: list
  elements: str
validation:
  description:
    - The newest validation worker run on this node (C(label), C(rc), C(mtime)); null when none.
    - Exit 0 says the worker ran, not that the run passed.
  returned: always
  type: dict
modules:
  description: C(can_load), C(reason) and, per name in O(modules), its C(state) (loaded, builtin or absent).
  returned: always
  type: dict
nccl_conf:
  description: O(nccl_conf) (C(path)) and whether it is there (C(exists)); null when O(nccl_conf) is empty.
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import node_state


def main() -> None:
    module = AnsibleModule(
        argument_spec={"modules": {"type": "list", "elements": "str", "default": []},
                       "nccl_conf": {"type": "str", "default": ""}},
        supports_check_mode=True,
    )
    state = node_state.collect(node_state.run, module.params["modules"], "/", os.uname().release,
                               module.params["nccl_conf"])
    module.exit_json(changed=False, **state)


if __name__ == "__main__":
    main()
