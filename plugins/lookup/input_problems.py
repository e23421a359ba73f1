# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: input_problems
short_description: What is wrong with this host's rdmaprov variables
description:
  - Checks the host's variables that a role of the rdmaprov.cluster collection declares against
    the roles' argument specs (roles/*/meta/argument_specs.yml, every entry point) with Ansible's
    own ArgumentSpecValidator, then against the collection's one table of ranges; a variable no
    role declares is reported only when it is a close match of a declared one (a typo).
  - The same validator as the C(rdmaprov) command's check before any host is touched
    (module_utils/input_check.py), so both say the same about the same value.
  - Runs on the control host; needs no facts and no connection.
  - With role names as terms, only the variables those roles declare are judged (a role's own
    entry point checks its own variables; site.yml's first play checks every role's).
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  _terms:
    description: Role names of this collection; none means every role.
    required: false
"""

EXAMPLES = r"""
- name: Validate rdmaprov's variables
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _problems: "{{ query('rdmaprov.cluster.input_problems') }}"

- name: Validate net_mtu's own variables
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _problems: "{{ query('rdmaprov.cluster.input_problems', 'net_mtu') }}"
"""

RETURN = r"""
_raw:
  description: One line per problem, C(VARIABLE) first; empty when every value is good.
  type: list
  elements: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import input_problems


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        try:
            return input_problems.problems(variables or {}, self._templar.template,
                                           [str(t) for t in terms] or None)
        except ValueError as exc:
            raise AnsibleLookupError(f"input_problems: {exc}") from exc
