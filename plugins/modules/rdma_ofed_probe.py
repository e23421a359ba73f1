#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_ofed_probe
short_description: "Read installed package versions and the installed OFED version"
description:
  - "Asks dpkg (or rpm) for the version of each package and runs C(ofed_info -s) where MLNX_OFED/DOCA put it; changes nothing (check mode safe)."
  - "The rdma_ofed role plans on the control host (package_plan, ofed_plan) and installs only what differs."
  - With O(files) and O(units), also reads the files and units the role keeps, so that one call
    tells the control host whether a converged host needs any further task.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  packages:
    description: Package names to look up.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.state_probe
"""
EXAMPLES = r"""
- name: What is installed
  rdmaprov.cluster.rdma_ofed_probe:
    packages: [rdma-core, ibverbs-providers]
  register: probe
"""
RETURN = r"""
packages_stdout:
  description: "C(dpkg-query) or C(rpm -q) answer, one C(name<TAB>version<TAB>status) line per package (the package_versions filter reads it)."
  returned: always
  type: str
ofed_info:
  description: C(ofed_info -s), or empty where it is not installed.
  returned: always
  type: str
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
from ansible_collections.rdmaprov.cluster.plugins.module_utils import rdma_ofed_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def main() -> None:
    module = AnsibleModule(
        argument_spec={**{"packages": {"type": "list", "elements": "str", "default": []}},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC},
        supports_check_mode=True,
    )
    p = module.params
    result = probe.probe(p["packages"])
    if "error" in result:
        module.fail_json(msg=result["error"])
    module.exit_json(changed=False, file_state=state_drift.read_files(p["files"]),
                     unit_state=state_drift.read_units(p["units"]), **result)


if __name__ == "__main__":
    main()
