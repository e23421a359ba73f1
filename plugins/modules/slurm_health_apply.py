#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/slurm_health_apply.py);
# this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_health_apply
short_description: Run the slurm_health role's planned steps as one task
description:
  - Runs, in order, the steps of the slurm_health plan (C(install_steps), C(configure_steps) or
    C(slurm_conf_steps) of M(rdmaprov.cluster.slurm_health_probe)'s C(plan);
    module_utils/slurm_health.py) - each by the builtin that would run it as a task of its own,
    C(ansible.builtin.copy) and C(ansible.builtin.package) through their action plugins (a
    relative C(src) is found as the copy task finds it, in the role's files/),
    C(ansible.builtin.file), C(ansible.builtin.command) and C(ansible.builtin.blockinfile) as
    modules - so check mode, diff and their messages stay the builtins'.
  - Changed when a step changed (a step marked C(changed) counts as a change whenever it runs,
    as C(changed_when=true) would; a command skipped under check mode changed nothing). The first
    step that fails stops the rest and fails the task with that step's result, its message
    naming the step.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  steps:
    description:
      - The steps, each C(module) (one of C(copy), C(package), C(file), C(command),
        C(blockinfile)), C(args) (the builtin's arguments), C(label) (what it names, for the
        result and a failure) and optionally C(changed).
      - An empty list does nothing.
    type: list
    elements: dict
    required: true
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
- name: Write the check configuration, slurm.env and the hooks
  rdmaprov.cluster.slurm_health_apply:
    steps: "{{ probe.plan.configure_steps }}"
"""

RETURN = r"""
steps:
  description: The steps that ran, in order, each with C(label), C(module) and C(changed).
  returned: always
  type: list
  elements: dict
diff:
  description: The changed steps' diffs, in order (with --diff).
  returned: when a step changed in diff mode
  type: list
  elements: dict
"""
