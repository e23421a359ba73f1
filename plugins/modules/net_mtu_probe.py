#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: net_mtu_probe
short_description: "Read interfaces, the connection's interface and each interface's network manager"
description:
  - "Reads C(ip -j addr/link), sysfs, netplan/ifupdown files and C(nmcli)/C(networkctl) answers; changes nothing (check mode safe)."
  - "The net_mtu role decides on the control host (the netcfg_* filters) and acts only on what differs."
  - With O(files) and O(units), also reads the files and units the role keeps, so that one call
    tells the control host whether a converged host needs any further task.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  address:
    description: The address Ansible connects to (finds the interface carrying the connection when SSH_CONNECTION is not set).
    type: str
    default: ""
  interfaces:
    description: Interfaces to describe.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.state_probe
"""
EXAMPLES = r"""
- name: Interfaces and their managers
  rdmaprov.cluster.net_mtu_probe:
    address: "{{ ansible_host }}"
    interfaces: [eth1]
  register: probe
"""
RETURN = r"""
interfaces:
  description: One entry per interface asked about (exists, mtu, link_type, ipv4, nm, networkd, ifupdown, ifcfg, netplan files).
  returned: always
  type: list
  elements: dict
connection_iface:
  description: The interface holding the address the connection arrives on, or null.
  returned: always
  type: str
control_ip:
  description: The control host's address as sshd saw it, or null.
  returned: always
  type: str
ping:
  description: Path of ping, or null.
  returned: always
  type: str
apt:
  description: Whether apt-get is there.
  returned: always
  type: bool
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
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import net_mtu_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def main() -> None:
    module = AnsibleModule(
        argument_spec={**{"address": {"type": "str", "default": ""}, "interfaces": {"type": "list", "elements": "str", "default": []}},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC},
        supports_check_mode=True,
    )
    p = module.params
    result = probe.probe(p["address"], p["interfaces"])
    if "error" in result:
        module.fail_json(msg=result["error"])
    module.exit_json(changed=False, file_state=state_drift.read_files(p["files"]),
                     unit_state=state_drift.read_units(p["units"]), **result)


if __name__ == "__main__":
    main()
