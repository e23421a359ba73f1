#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: roce_qos_probe
short_description: "Read each NIC's QoS state (mlnx_qos, dcb, ECN, RoCE ToS)"
description:
  - "Runs C(mlnx_qos -i) and C(dcb pfc/app show) and reads the ECN and rdma_cm configfs nodes of each interface; changes nothing (check mode safe)."
  - "With O(settings) the raw answers are planned on the host (see below); without, they are returned as read."
  - With O(files) and O(units), also reads the files and units the role keeps, so that one call
    tells the control host whether a converged host needs any further task.
  - With O(settings), also plans each interface on the host (C(host_plan) in module_utils/netcfg_qos.py), giving RV(plans), the
    not-capable interfaces as RV(rdmaprov_report), and a failure when a listed interface does not
    exist; and renders the boot-time script and unit, reads them and says what differs (RV(plan)).
    The role reads its state, decides and reports in this one call.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  interfaces:
    description:
      - Interfaces to read. With O(settings), empty means the role's C(interfaces) setting, else
        the netdevs of the Ethernet ports in O(rdma).
    type: list
    elements: str
    default: []
  settings:
    description:
      - The role's QoS settings (C(pfc_priority), C(dscp), C(ecn), C(ecn_codepoint),
        C(cnp_dscp), C(cnp_priority), C(roce_v2), C(rdma_cm_defaults), C(backend)), as C(plan) in
        module_utils/netcfg_qos.py takes them, and C(interfaces), C(script), C(unit_name),
        C(host) (the inventory name the verification lines start with), C(check_mode) (no
        verification lines under --check) and C(rdma) (the host's RDMA facts, where O(rdma) is
        empty). Omit to read only.
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py), from the role variable
        C(roce_qos_<key>) where one is defined, else from the play (C(host), C(address),
        C(hosts), C(check_mode), C(connection), C(managed)), else from the host's facts
        (C(rdma), from C(ansible_facts.rdma)). C({}) gives the role's settings whole.
    type: dict
  rdma:
    description: The host's RDMA facts (C(ansible_facts.rdma), from rdma_facts), whose Ethernet
      ports' netdevs are the interfaces when the settings list none; empty means the settings'
      C(rdma).
    type: dict
    default: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.state_probe
"""
EXAMPLES = r"""
- name: QoS state of eth1
  rdmaprov.cluster.roce_qos_probe:
    interfaces: [eth1]
  register: probe
"""
RETURN = r"""
interfaces:
  description: One entry per interface, with the raw tool answers (rc, stdout, stderr; null where the tool is missing).
  returned: always
  type: list
  elements: dict
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
plans:
  description: One plan per interface (state, drift, commands, sysfs writes), as C(plan) in module_utils/netcfg_qos.py gives.
  returned: when O(settings) is given
  type: list
  elements: dict
reports:
  description: What the role reports per interface (name, capable, reason, backend, drift, trust, pfc, tos), one per plan.
  returned: when O(settings) is given
  type: list
  elements: dict
plan:
  description:
    - The host's plan (C(host_plan) in module_utils/netcfg_qos.py) less the per-interface parts
      above, the script and unit as they must be (C(script), C(unit), C(unit_path), and as the
      files to write, C(files), each C(path), C(content), C(mode), C(owner), C(group)), the lines
      that say where they differ (C(file_drift)), whether a capable NIC's QoS differs
      (C(qos_drift)), whether anything is to do (C(drift)), the commands that apply it
      (C(apply), each C(argv) and C(removes)) and one verification line per capable interface
      (C(checks), each C(name), C(ok), C(msg); none under --check).
  returned: when O(settings) is given
  type: dict
rdmaprov_report:
  description: One line per interface that cannot do DCB, and why (rdmaprov prints it as the host's report).
  returned: when O(settings) is given
  type: list
  elements: str
  sample: ["not capable: eth1: dcb pfc show answers 'Attribute read: Operation not supported': ..."]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_qos as qos
from ansible_collections.rdmaprov.cluster.plugins.module_utils import roce_qos_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def main() -> None:
    module = AnsibleModule(
        argument_spec={"interfaces": {"type": "list", "elements": "str", "default": []},
                       "settings": {"type": "dict"},
                       "rdma": {"type": "dict", "default": {}},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC},
        supports_check_mode=True,
    )
    p, settings = module.params, module.params["settings"]
    names = p["interfaces"]
    if settings is not None and not names:
        names = qos.pick_interfaces(settings.get("interfaces"), p["rdma"] or settings.get("rdma"))
    files, units = list(p["files"]), list(p["units"])
    if settings is not None:
        try:
            files += [settings["script"], "/etc/systemd/system/%s" % settings["unit_name"]]
            units.append(settings["unit_name"])
        except KeyError as exc:
            module.fail_json(msg="roce_qos plan: settings has no %s" % exc)
    result = {"changed": False, "file_state": state_drift.read_files(files),
              "unit_state": state_drift.read_units(units),
              "interfaces": probe.probe(names)}
    if settings is not None:
        try:
            hp = qos.host_plan(result["interfaces"], settings, result["file_state"],
                               result["unit_state"])
        except (KeyError, ValueError, TypeError) as exc:
            module.fail_json(msg="roce_qos plan: %s" % exc, **result)
        if hp["errors"]:
            module.fail_json(msg="; ".join(hp["errors"]), **result)
        result.update(plans=hp.pop("plans"), reports=hp.pop("reports"),
                      rdmaprov_report=hp.pop("rdmaprov_report"), plan=hp)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
