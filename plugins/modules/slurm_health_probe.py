#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_health_probe
short_description: Read a node for the slurm_health role and plan the role's work
description:
  - Reads what only the node can tell (whether python3 can make a venv, the rdmaprov build
    installed in the venv, whether NHC's scripts directory exists, slurm.conf's text), each only
    where the settings need it, and plans the slurm_health role on it (C(plan) in
    module_utils/slurm_health.py) - what to install, the hooks and slurm.conf's lines, the
    node's check.yml, what to refuse and why, and the line to print. Changes nothing.
  - Its action plugin reads, on the control host, the expectations directory's hosts.yml and
    this host's class file (found as the file lookup finds files - a relative directory beside
    the playbook), the wheelhouse's wheels and the rdmaprov wheel's checksum, and passes them
    as O(controller).
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  settings:
    description:
      - The slurm_health role's variables without the prefix, the host's name and the play's
        check mode.
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py), from the role variable
        C(slurm_health_<key>) where one is defined, else from the play (C(host), C(address),
        C(hosts), C(check_mode), C(connection), C(managed)). C({}) gives the role's settings whole.
    type: dict
    required: true
    suboptions:
      install: {description: slurm_health_install., type: str, choices: [node_tool, wheelhouse, none], default: node_tool}
      wheelhouse: {description: slurm_health_wheelhouse., type: str, default: ""}
      venv: {description: slurm_health_venv., type: str, default: /opt/rdmaprov}
      budget: {description: slurm_health_budget., type: int, default: 0}
      healthcheck_interval: {description: slurm_health_healthcheck_interval., type: int, default: 300}
      expect: {description: slurm_health_expect., type: dict, default: {}}
      expect_dir: {description: slurm_health_expect_dir., type: str, default: ""}
      hooks: {description: slurm_health_hooks., type: list, elements: str, default: [prolog]}
      script_dir: {description: slurm_health_script_dir., type: str, default: /etc/slurm}
      nhc_dir: {description: slurm_health_nhc_dir., type: str, default: /etc/nhc/scripts}
      edit_slurm_conf: {description: slurm_health_edit_slurm_conf., type: bool, default: false}
      slurm_conf: {description: slurm_health_slurm_conf., type: str, default: /etc/slurm/slurm.conf}
      rdmaprov: {description: slurm_health_rdmaprov., type: str, default: /usr/local/bin/rdmaprov}
      config_dir: {description: slurm_health_config_dir., type: str, default: /etc/rdmaprov}
      nccl_python: {description: slurm_health_nccl_python., type: str, default: ""}
      textfile_dir: {description: slurm_health_textfile_dir., type: str, default: ""}
      prolog_drain: {description: slurm_health_prolog_drain., type: bool, default: true}
      force: {description: slurm_health_force., type: bool, default: false}
      host: {description: The host's inventory name., type: str, default: ""}
      check_mode: {description: Whether the play runs in check mode., type: bool, default: false}
      managed:
        description: The header of the files the role writes (the play's C(ansible_managed), else ansible.cfg's DEFAULT_MANAGED_STR).
        type: str
        default: Ansible managed
  controller:
    description:
      - What the control host read (the action plugin fills it) - C(expect_index) (hosts.yml
        found), C(expect_file) (the class file it names for this host), C(expect_found) and
        C(expect) (that file found, and its content), C(wheels) (the wheelhouse's wheels) and
        C(wheel_sha256) (the rdmaprov wheel's checksum).
    type: dict
    default: {}
  python_apt:
    description:
      - Whether the node's Python has apt's bindings; the action plugin fills it from the host's
        C(ansible_facts.rdmaprov.python_apt) where the task does not give it (true without it).
    type: bool
    default: true
  verify:
    description:
      - Instead of the probe and plan, the role's proof (C(verify) in module_utils/slurm_health.py)
        - each installed hook run once as slurmd runs it (C(env -i), no PATH, the node's
        SLURMD_NODENAME; the prolog and health-check scripts with C(--verify), the same check
        without C(--drain)). Exit 0 or 2 (healthy, unhealthy) is a verdict, which C(arm) counts;
        any other exit fails the module (a configuration error, which would drain every node),
        and so does a node without the rdmaprov command (not in check mode), with RV(failure)
        as its message.
    type: bool
    default: false
  pending:
    description:
      - With O(verify) in check mode, that the role's files would change, so the installed
        hooks are not what a real run would prove; nothing is run or refused then.
    type: bool
    default: false
  arm:
    description:
      - Instead of the probe, once for the play - whether to arm the hooks (C(arm) in
        module_utils/slurm_health.py), from every host's registered C(_slurm_health_verdict)
        among the play's current hosts (read by the action plugin on the control host). Fails
        when the check would drain more than half of them, unless slurm_health_force.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
"""
EXAMPLES = r"""
- name: Probe the node and plan
  rdmaprov.cluster.slurm_health_probe:
    settings:
      hooks: [prolog, healthcheck]
      edit_slurm_conf: true
      host: "{{ inventory_hostname }}"
  register: probe
"""
RETURN = r"""
failure:
  description: With O(verify), why the role fails - the rdmaprov command is not on the node (not in check mode; the module fails with it) - or empty.
  returned: when O(verify) is true
  type: str
verdict:
  description: "With O(verify), C(healthy), C(unhealthy: <the check's line>), C(config error: <its line>) or why it did not run; empty where nothing ran."
  returned: when O(verify) is true
  type: str
state:
  description: With O(verify), C(healthy), C(unhealthy), C(config_error) or C(not_run).
  returned: when O(verify) is true
  type: str
reason:
  description: With O(verify), the check's reason line (empty when healthy or not run).
  returned: when O(verify) is true
  type: str
runs:
  description: With O(verify), each hook's run - C(hook), C(argv), C(exit_code), C(stdout), C(stderr).
  returned: when O(verify) is true
  type: list
  elements: dict
refuse:
  description: With O(arm), why the hooks are not armed (the module fails with it), or empty.
  returned: when O(arm) is true
  type: str
probe:
  description: What the node told (venv_ok, installed, nhc_dir, slurm_conf; each only where the settings need it).
  returned: always
  type: dict
plan:
  description:
    - The role's work on this node (module_utils/slurm_health.py C(plan)) - C(refuse_all) (a
      refusal for the whole play, or empty), C(errors) (this host's refusals) and C(error)
      (them in one line, or empty), C(expect) and C(expect_source) (check.yml; through the
      action plugin also C(check_yml), its text), C(conf_lines) and C(conf_block) (slurm.conf), C(scripts),
      C(nhc), C(report) (the line to print, or empty), C(install), and the steps the
      slurm_health_apply action runs - C(install_steps), C(configure_steps) (check.yml's and
      slurm.env's content among them; check.yml's filled through the action plugin) and
      C(slurm_conf_steps).
  returned: always
  type: dict
  sample:
    refuse_all: ""
    errors: []
    error: ""
    expect: {mtu: 1500}
    expect_source: slurm_health_expect
    conf_lines: [Prolog=/etc/slurm/rdmaprov-prolog.sh]
    conf_block: Prolog=/etc/slurm/rdmaprov-prolog.sh
    scripts: [prolog]
    nhc: false
    report: ""
    install: {venv_package: false, wheelhouse: /opt/rdmaprov-wheelhouse, checksum: 9f2c..., commands: []}
    install_steps: []
    configure_steps:
      - {module: file, label: /etc/rdmaprov, args: {path: /etc/rdmaprov, state: directory, mode: "0755"}}
    slurm_conf_steps: []
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import slurm_health

SETTINGS_SPEC = {
    "install": {"type": "str", "choices": ["node_tool", "wheelhouse", "none"], "default": "node_tool"},
    "wheelhouse": {"type": "str", "default": ""},
    "venv": {"type": "str", "default": "/opt/rdmaprov"},
    "budget": {"type": "int", "default": 0},
    "healthcheck_interval": {"type": "int", "default": 300},
    "expect": {"type": "dict", "default": {}},
    "expect_dir": {"type": "str", "default": ""},
    "hooks": {"type": "list", "elements": "str", "default": ["prolog"]},
    "script_dir": {"type": "str", "default": "/etc/slurm"},
    "nhc_dir": {"type": "str", "default": "/etc/nhc/scripts"},
    "edit_slurm_conf": {"type": "bool", "default": False},
    "slurm_conf": {"type": "str", "default": "/etc/slurm/slurm.conf"},
    "rdmaprov": {"type": "str", "default": "/usr/local/bin/rdmaprov"},
    "config_dir": {"type": "str", "default": "/etc/rdmaprov"},
    "nccl_python": {"type": "str", "default": ""},
    "textfile_dir": {"type": "str", "default": ""},
    "prolog_drain": {"type": "bool", "default": True},
    "force": {"type": "bool", "default": False},
    "host": {"type": "str", "default": ""},
    "check_mode": {"type": "bool", "default": False},
    "managed": {"type": "str", "default": "Ansible managed"},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={"settings": {"type": "dict", "required": True, "options": SETTINGS_SPEC},
                       "controller": {"type": "dict", "default": {}},
                       "python_apt": {"type": "bool", "default": True},
                       "verify": {"type": "bool", "default": False},
                       "pending": {"type": "bool", "default": False},
                       "arm": {"type": "bool", "default": False}},
        supports_check_mode=True,
    )
    p = module.params
    if p["arm"]:
        module.fail_json(msg="slurm_health_probe: arm is decided on the control host (its "
                             "action plugin)")
    if p["verify"]:
        got = slurm_health.verify(p["settings"], module.run_command,
                                  socket.gethostname().split(".")[0], p["pending"])
        if got["failure"]:
            module.fail_json(msg=got["failure"], **got)
        module.exit_json(changed=False, **got)
    found = slurm_health.probe(p["settings"])
    plan = slurm_health.plan(found, p["settings"], p["controller"], p["python_apt"])
    module.exit_json(changed=False, probe=found, plan=plan)


if __name__ == "__main__":
    main()
