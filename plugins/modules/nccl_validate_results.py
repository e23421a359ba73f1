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
  fresh:
    description:
      - "Before a run, its launch (nccl_validate_ready's C(launch)): the run's fresh result
        directory on the host (C(host_paths), through the file module, mode 0755, never
        reported changed), then the controller's (C(controller_paths), as O(paths))."
    type: dict
  ended:
    description:
      - "After a run, its launch: how this host's part ended (nccl_validate_probe's C(result),
        RV(part)), what it lists fetched onto the controller (the fetch action, flat, missing
        files skipped), the run recorded (the launch's C(keep), as O(files)); then the host
        fails with the part's one line when it failed."
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.attributes.action
"""

EXAMPLES = r"""
- name: Keep the image preflight with the results
  rdmaprov.cluster.nccl_validate_results:
    files: "{{ preflight.keep }}"
"""

RETURN = r"""
part:
  description: "With O(ended): {rc, reason, fetch} (nccl_validate_probe's C(part))."
  returned: with O(ended)
  type: dict
kept:
  description: The files of O(files), written or already as given.
  returned: success
  type: list
  elements: str
"""
