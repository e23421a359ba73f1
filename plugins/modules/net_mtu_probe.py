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
  - With O(settings), also plans (netcfg_mtu.plan) what the net_mtu role does on this host and
    returns it as RV(plan) - the merged interfaces, each one's persistence, the boot-time unit as
    it must be, what differs (the boot unit and its enablement read here), what to refuse and
    why - so that the role acts only on what differs.
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
  settings:
    description:
      - The net_mtu role's settings. Given, the interfaces of its three layers are probed too
        and the module returns RV(plan).
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py), from the role variable
        C(net_mtu_<key>) where one is defined, else from the play (C(host), C(address),
        C(hosts), C(check_mode), C(connection), C(managed)). C({}) gives the role's settings whole.
    type: dict
    suboptions:
      interfaces:
        description: net_mtu_interfaces, each C({name, mtu, link_type}).
        type: list
        elements: dict
        default: []
      interfaces_group:
        description: net_mtu_interfaces_group (overrides net_mtu_interfaces per name).
        type: list
        elements: dict
        default: []
      interfaces_host:
        description: net_mtu_interfaces_host (overrides the others per name).
        type: list
        elements: dict
        default: []
      default:
        description: net_mtu_default, the MTU of an entry that gives none.
        type: int
        default: 9000
      allow_connection_interface:
        description: net_mtu_allow_connection_interface.
        type: bool
        default: false
      persist:
        description: net_mtu_persist.
        type: str
        default: auto
      verify:
        description: net_mtu_verify (the proof needs C(ping)).
        type: bool
        default: true
      verify_interface:
        description: net_mtu_verify_interface, the interface the path proof runs over; empty means the first one set.
        type: str
        default: ""
      fabric_address:
        description: net_mtu_fabric_address, the address the peers ping; empty means the verify interface's IPv4.
        type: str
        default: ""
      ping_package:
        description: net_mtu_ping_package, the package giving the proof its ping; empty means iputils-ping with apt, iputils elsewhere.
        type: str
        default: ""
      host:
        description: The host's inventory name, which the refusals name.
        type: str
        default: ""
      unit_name:
        description: net_mtu_unit_name, the boot-time unit's name; the module reads the unit and its file and the plan says where they differ.
        type: str
        default: rdmaprov-mtu.service
      networkd_dropin:
        description: net_mtu_networkd_dropin, the name of the systemd-networkd drop-in the plan writes.
        type: str
        default: 60-rdmaprov-mtu.conf
      managed:
        description: The header of the files the plan renders (the boot unit, the netplan file), as a template's C(ansible_managed).
        type: str
        default: Ansible managed
      address:
        description: The address Ansible connects to, where O(address) is not given (the action plugin fills it from the play).
        type: str
        default: ""
      check_mode:
        description: Whether the play runs with --check (the plan then leaves out what only a real run can do).
        type: bool
        default: false
      python_apt:
        description: Whether the host has python3-apt (without it the apt module installs it, which --check must not do).
        type: bool
        default: true
      netplan_file:
        description: net_mtu_netplan_file, the netplan file the plan writes for the interfaces netplan owns.
        type: str
        default: /etc/netplan/60-rdmaprov-mtu.yaml
      verify_peers:
        description: net_mtu_verify_peers, the hosts the path proof pings; empty means the play's hosts.
        type: list
        elements: str
        default: []
      ping_count:
        description: net_mtu_ping_count, packets per pair of the path proof.
        type: int
        default: 3
      ping_timeout:
        description: net_mtu_ping_timeout, seconds to wait for each reply of the path proof.
        type: int
        default: 2
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.state_probe
"""
EXAMPLES = r"""
- name: Interfaces and their managers
  rdmaprov.cluster.net_mtu_probe:
    address: "{{ ansible_host }}"
    interfaces: [eth1]
  register: probe

- name: Interfaces and what the net_mtu role would do
  rdmaprov.cluster.net_mtu_probe:
    address: "{{ ansible_host }}"
    settings:
      interfaces: [{name: eth1, mtu: 9000}]
      host: "{{ inventory_hostname }}"
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
plan:
  description:
    - What the net_mtu role does on this host (netcfg_mtu.plan) - C(wanted) (the merged
      interfaces), C(mtu) (name to MTU), C(runtime) and C(drift) (the runtime MTUs that differ),
      C(backends) and C(by_backend) (each interface's persistence and why), C(networkmanager),
      C(networkd), C(ifupdown) and C(ifcfg) (the persistence edits), C(unit) and C(unit_path)
      (the boot-time unit as it must be), C(persist_drift) (with the boot unit's and its
      enablement's), C(errors) (what to refuse, one line each), C(report), C(unpersisted),
      C(ping_package) (the package to install where ping is missing, else null) and
      C(ping_install) (apt, package or null), C(host_drift), C(provable) and C(verify) (the
      path proof's entry for this host - C(name), C(interface), C(address), C(mtu), C(drift) -
      or null when there is nothing to prove).
  returned: when O(settings) is given
  type: dict
  sample: {wanted: [{name: eth1, mtu: 9000, link_type: auto}], drift: [eth1], errors: [], host_drift: true}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import net_mtu_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_mtu
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


_LAYER = {"type": "list", "elements": "dict", "default": []}
SETTINGS_SPEC = {
    "interfaces": _LAYER, "interfaces_group": _LAYER, "interfaces_host": _LAYER,
    "default": {"type": "int", "default": 9000},
    "allow_connection_interface": {"type": "bool", "default": False},
    "persist": {"type": "str", "default": "auto"},
    "verify": {"type": "bool", "default": True},
    "verify_interface": {"type": "str", "default": ""},
    "fabric_address": {"type": "str", "default": ""},
    "ping_package": {"type": "str", "default": ""},
    "host": {"type": "str", "default": ""},
    "unit_name": {"type": "str", "default": "rdmaprov-mtu.service"},
    "networkd_dropin": {"type": "str", "default": "60-rdmaprov-mtu.conf"},
    "managed": {"type": "str", "default": "Ansible managed"},
    "address": {"type": "str", "default": ""},
    "check_mode": {"type": "bool", "default": False},
    "python_apt": {"type": "bool", "default": True},
    "netplan_file": {"type": "str", "default": "/etc/netplan/60-rdmaprov-mtu.yaml"},
    "verify_peers": {"type": "list", "elements": "str", "default": []},
    "ping_count": {"type": "int", "default": 3},
    "ping_timeout": {"type": "int", "default": 2},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={**{"address": {"type": "str", "default": ""}, "interfaces": {"type": "list", "elements": "str", "default": []}},
                       "settings": {"type": "dict", "options": SETTINGS_SPEC},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC},
        supports_check_mode=True,
    )
    p = module.params
    settings = p["settings"]
    names = list(p["interfaces"])
    if settings is not None:
        try:
            wanted = netcfg_mtu.merge_interfaces(
                [settings["interfaces"], settings["interfaces_group"], settings["interfaces_host"]],
                settings["default"])
        except (ValueError, KeyError, TypeError) as exc:
            module.fail_json(msg="net_mtu plan: %s" % exc)
        names += [i["name"] for i in wanted if i["name"] not in names]
    # The address Ansible connects to: the option, else the settings' (the action plugin fills it).
    address = p["address"] or (settings or {}).get("address") or ""
    result = probe.probe(address, names)
    if "error" in result:
        module.fail_json(msg=result["error"])
    files, units = list(p["files"]), list(p["units"])
    result.update(file_state=state_drift.read_files(files), unit_state=state_drift.read_units(units))
    if settings is not None:
        settings = {**settings, "address": address}
        try:
            plan = netcfg_mtu.plan(result, settings)
            # The files the plan keeps (each manager's, the boot unit) and the boot unit's
            # enablement, read so that the plan says which differ; then the plan again.
            more = [f["path"] for f in plan["to_write"]
                    if f["path"] and f["path"] not in result["file_state"]]
            unit = settings["unit_name"]
            if more or (plan["unit"] and unit not in result["unit_state"]):
                result["file_state"].update(state_drift.read_files(more))
                if plan["unit"]:
                    result["unit_state"].update(state_drift.read_units([unit]))
                plan = netcfg_mtu.plan(result, settings)
            result["plan"] = plan
        except (ValueError, KeyError, TypeError) as exc:
            module.fail_json(msg="net_mtu plan: %s" % exc)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
