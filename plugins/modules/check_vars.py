#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/check_vars.py), on the
# controller; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: check_vars
short_description: Check a host's rdmaprov variables before any host is touched
description:
  - Judges the host's variables that the rdmaprov.cluster roles declare against the roles'
    argument specs (roles/*/meta/argument_specs.yml, every entry point) with Ansible's own
    ArgumentSpecValidator, then against the collection's one table of ranges; a variable no role
    declares is reported only when it is a close match of a declared one (a typo).
  - The same rule as the C(rdmaprov.cluster.input_problems) lookup and the C(rdmaprov) command's
    check before it starts Ansible (module_utils/input_check.py), so all three say the same about
    the same value.
  - Runs on the control host; needs no facts and no connection. Fails with one line that names
    each wrong variable, prefixed with the role when one role is given.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  roles:
    description: Roles of this collection whose variables are judged; empty means every role.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.attributes.action
"""

EXAMPLES = r"""
- name: Check every rdmaprov variable of the play's hosts
  rdmaprov.cluster.check_vars:

- name: Check net_mtu's own variables
  rdmaprov.cluster.check_vars:
    roles: [net_mtu]
"""

RETURN = r"""
problems:
  description: One line per problem, the variable first; empty when every value is good.
  returned: always
  type: list
  elements: str
"""
