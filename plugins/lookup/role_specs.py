# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: role_specs
short_description: The argument specs of every role in the rdmaprov.cluster collection
description:
  - Reads roles/*/meta/argument_specs.yml next to this plugin (the installed collection or a
    checkout), on the control host.
  - Returns one item per role - C(role) (its name, which is also its variables' prefix) and
    C(options) (the C(main) entry point's options).
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options: {}
"""

EXAMPLES = r"""
- name: Validate every role's variables
  ansible.builtin.validate_argument_spec:
    argument_spec: "{{ item.options }}"
  loop: "{{ query('rdmaprov.cluster.role_specs') }}"
"""

RETURN = r"""
_raw:
  description: One dict per role, sorted by name.
  type: list
  elements: dict
"""

import os

import yaml

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        found = []
        try:
            names = sorted(os.listdir(ROLES_DIR))
        except OSError as exc:
            raise AnsibleLookupError(f"role_specs: cannot list {ROLES_DIR}: {exc}") from exc
        for name in names:
            path = os.path.join(ROLES_DIR, name, "meta", "argument_specs.yml")
            if not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as handle:
                    data = yaml.safe_load(handle) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise AnsibleLookupError(f"role_specs: {path}: {exc}") from exc
            main = (data.get("argument_specs") or {}).get("main") or {}
            found.append({"role": name, "options": main.get("options") or {}})
        return found
