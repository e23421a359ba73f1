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
  - "With O(source), the module also plans (package_plan, ofed_plan in module_utils/driver_versions.py); the rdma_ofed role installs only what differs."
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
  source:
    description:
      - Where the RDMA stack comes from. With it the module also plans
        (package_plan and ofed_plan in module_utils/driver_versions.py) and reports where nothing differs.
      - Without it, only the probe's answers are returned.
    type: str
    choices: [inbox, doca, mlnx_ofed]
  pin_version:
    description: The version to pin O(pinned) to; empty for any version.
    type: str
    default: ""
  pinned:
    description: The packages that carry O(pin_version).
    type: list
    elements: str
    default: []
  pin_separator:
    description: What joins a name and its version in an install request (C(=) apt, C(-) dnf).
    type: str
    default: "="
  mlnx_ofed_version:
    description: The MLNX_OFED version wanted (O(source=mlnx_ofed)).
    type: str
    default: ""
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
state:
  description:
    - The installed versions (package name to version, from dpkg or rpm) and the OFED version
      (C(ofed_info -s) parsed; null where there is none).
  returned: always
  type: dict
  sample: {versions: {rdma-core: 44.0-2}, ofed: null}
plan:
  description: What a package install must do (missing, wrong_version, install, ok).
  returned: when O(source) is given
  type: dict
mlnx_plan:
  description: MLNX_OFED's installed and wanted version, and whether to install.
  returned: when O(source) is given
  type: dict
rdmaprov_report:
  description:
    - The role's report line where nothing differs (rdmaprov shows it as the host's report);
      empty where something differs, which the role's install path reports.
  returned: when O(source) is given
  type: list
  elements: str
  sample: ["inbox: 7/7 packages installed (rdma-core 44.0-2); nothing to do"]
unit_state:
  description: For each of O(units), what C(systemctl is-enabled) answers.
  returned: always
  type: dict
  sample: {rdmaprov-mtu.service: enabled}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import driver_versions as versions
from ansible_collections.rdmaprov.cluster.plugins.module_utils import rdma_ofed_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def _state(result: dict) -> dict:
    """The installed versions and the OFED version, parsed from the probe's answers."""
    return {"versions": versions.parse_package_query(result["packages_stdout"]),
            "ofed": versions.parse_ofed_info(result["ofed_info"])}


def _plan(p: dict, result: dict) -> dict:
    """The plan the role acts on, and its report line where nothing differs."""
    before = result["state"]
    plan = versions.package_plan(p["packages"], before["versions"], p["pin_version"],
                                 p["pinned"], p["pin_separator"])
    mlnx_plan = versions.ofed_plan(before["ofed"], p["mlnx_ofed_version"])
    differs = mlnx_plan["install"] if p["source"] == "mlnx_ofed" else not plan["ok"]
    report = [] if differs else [versions.stack_report(p["source"], p["packages"], plan,
                                                       mlnx_plan, before)]
    return {"plan": plan, "mlnx_plan": mlnx_plan, "rdmaprov_report": report}


def main() -> None:
    module = AnsibleModule(
        argument_spec={"packages": {"type": "list", "elements": "str", "default": []},
                       "source": {"type": "str", "choices": ["inbox", "doca", "mlnx_ofed"]},
                       "pin_version": {"type": "str", "default": ""},
                       "pinned": {"type": "list", "elements": "str", "default": []},
                       "pin_separator": {"type": "str", "default": "="},
                       "mlnx_ofed_version": {"type": "str", "default": ""},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC},
        supports_check_mode=True,
    )
    p = module.params
    result = probe.probe(p["packages"])
    if "error" in result:
        module.fail_json(msg=result["error"])
    result["state"] = _state(result)
    if p["source"]:
        result.update(_plan(p, result))
    module.exit_json(changed=False, file_state=state_drift.read_files(p["files"]),
                     unit_state=state_drift.read_units(p["units"]), **result)


if __name__ == "__main__":
    main()
