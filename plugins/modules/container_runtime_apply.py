#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/container_runtime_apply.py),
# which runs builtin modules on the host; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_runtime_apply
short_description: Run one step of the container_runtime plan
description:
  - Runs one of the steps that container_runtime_probe planned (module_utils/container_runtime.py
    C(install_steps), C(configure_steps), C(image_steps)) - a builtin module (apt, dnf,
    yum_repository, get_url, copy, file, lineinfile, command, systemd_service) with its
    arguments - through that module's own action, so that check mode, diff, changed and the
    failure are the module's.
  - A step's C(check_mode) false runs it under --check too (a read-only command); its C(changed)
    overrides what the module says; its C(only_if) ({argv, stdout}) runs it only where that
    command prints that (else the step is skipped); its C(then) steps run where it changed
    (systemd re-executed after its drop-in, docker restarted after daemon.json).
version_added: "0.5.0"
author: rdmaprov developers (!UNKNOWN)
options:
  step:
    description:
      - "The plan's step: C(module), C(args), C(label), and optionally C(path), C(check_mode),
        C(changed), C(only_if), C(then)."
    type: dict
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
- name: Write the drop-ins, storage.conf, the RDMA CDI spec and enroot's files
  rdmaprov.cluster.container_runtime_apply:
    step: "{{ item }}"
  loop: "{{ probe.plan.configure_steps }}"
  loop_control:
    label: "{{ item.label }}"
"""

RETURN = r"""
then:
  description: The steps run because this one changed (C(label), C(changed)).
  returned: when the step changed and has C(then) steps
  type: list
  elements: dict
"""
