# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The options every role probe module shares: the files and units it reads for the control
host's drift comparison (module_utils/state_drift.py). Their attributes are
rdmaprov.cluster.attributes."""

from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    DOCUMENTATION = r"""
options:
  files:
    description:
      - Files the role writes; each one's existence, sha1 checksum, mode, owner and group are in
        RV(file_state), for the role's plan or the control host to compare with what it renders.
    type: list
    elements: str
    default: []
  units:
    description: systemd units the role enables; C(systemctl is-enabled) of each is in RV(unit_state).
    type: list
    elements: str
    default: []
"""
