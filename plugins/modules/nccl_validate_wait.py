#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/nccl_validate_wait.py),
# on the controller; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_validate_wait
short_description: Wait for a host's part of a validation run, or for a peer that could not run
description:
  - Polls the host's async job (the launch the nccl_validate role started with C(async) and
    C(poll 0)) every C(poll) seconds of O(launch). When it has finished, its exit code is
    recorded on the controller under C(exits) of O(launch), one file per host, where the other
    members' waits read it.
  - The wait ends when the job finishes, or when another of the run's members could not run
    (its worker exited 2 or 3, or its container engine 125 to 127); RV(stop_reason) then says
    which and why, and this host's part is stopped (the reason, in the worker's JSON form,
    appended to the run's C(worker.log), then SIGTERM to the launch; validate_launch.stop_argv)
    and waited for, 30 seconds at most. A member that failed in a collective (exit 1) does not
    end the others' waits, which end on their own watchdogs.
  - Then the run's container is removed (C(rm_killed) of O(launch), when the run has one), as
    a killed run's is still there.
  - Fails when the job has not finished after O(launch)'s C(wait) seconds.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  jid:
    description: The async job's id (C(ansible_job_id) of the launch).
    type: str
    required: true
  launch:
    description:
      - "The launch (C(launch) of nccl_validate_preflight): {exits, members, wait, poll, dir,
        rm_killed}: the run's directory of exit codes on the controller, its hosts (inventory
        names), the seconds to wait at most and between two polls, the run directory on the
        host and the engine's argv that removes the run's container ([] without one)."
    type: dict
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.attributes.action
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: Wait for the run, or for a peer that could not run
  rdmaprov.cluster.nccl_validate_wait:
    jid: "{{ job.ansible_job_id }}"
    launch: "{{ preflight.launch }}"
  register: done
"""

RETURN = r"""
finished:
  description: Whether the job finished (else a peer could not run).
  returned: always
  type: bool
exit_code:
  description:
    - The job's exit code (the launch prints it last), or null. Not C(rc), which would fail
      the task when it is not 0 (a failed part is judged after its results are fetched).
  returned: success
  type: int
stop_reason:
  description: "Why this host's part cannot succeed any more ('stopped: PEER could not run
    (its worker exited N)'), or ''."
  returned: always
  type: str
"""
