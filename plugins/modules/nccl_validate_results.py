#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/nccl_validate_results.py),
# on the controller; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_validate_results
short_description: The validation's result directories and files on the controller
description:
  - Runs on the controller, where the nccl_validate role keeps each run's results. Makes each of
    O(paths) a directory (mode 0755, with its missing parents) or removes it, in order; then
    writes each of O(files) (mode 0644) into its directory, made as above, when its content
    differs (module_utils/validate_launch.py C(keep_results)).
  - Changed when a file or a file's directory was written; O(paths), which reset an earlier
    run's, do not count. In check mode nothing is touched.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  paths:
    description: "[{path, state}]: state directory or absent (C(controller_paths) of the launch)."
    type: list
    elements: dict
    default: []
  files:
    description:
      - "[{dir, dest, content}]: C(keep) of the nccl_validate_probe plan, of
        nccl_validate_preflight and of its launch."
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Keep the image preflight with the results
  rdmaprov.cluster.nccl_validate_results:
    files: "{{ preflight.keep }}"
"""

RETURN = r"""
kept:
  description: The files of O(files), written or already as given.
  returned: success
  type: list
  elements: str
"""
