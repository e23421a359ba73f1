# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""What is wrong with a host's rdmaprov variables, on the control host: the one body of the
input_problems lookup and the check_vars action. The rules are module_utils/input_check.py's
(the roles' argument specs with Ansible's ArgumentSpecValidator, then ranges.py), which the
rdmaprov command applies too before any host is touched."""

from __future__ import annotations

import os

from ansible_collections.rdmaprov.cluster.plugins.module_utils import input_check

ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


def declared_options(roles=None):
    """Every option of every entry point of the collection's roles (or of ``roles``), by name.
    Raises ValueError naming a role that is not there."""
    return input_check.declared_options(input_check.role_specs(ROLES_DIR, roles))


def problems(variables, template, roles=None):
    """One line per problem with the variables a role of ``roles`` (none: every role) declares,
    in ``variables`` (a host's, templated with ``template`` where they can be here); a name no
    role declares counts only as a close match of a declared one (a typo)."""
    every = declared_options()
    options = declared_options(list(roles)) if roles else every
    values = {}
    for name in variables:
        if name not in options:
            if name not in every:
                values[name] = None  # only its name is judged: a typo of ours or not
            continue
        value = variables[name]
        if not input_check.unknown_now(value):
            try:
                value = template(value)
            except Exception:  # left for the role's own check at run time
                continue
        values[name] = value
    return [line for _name, line in input_check.check(values, options)]
