#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_validate_preflight
short_description: The validation worker's image preflight on a host, and its launch
description:
  - Runs the worker's C(--preflight) in the container (or on the host) the run will use, so
    that what it finds (libibverbs, a provider per HCA, torch, libuv) is what the run gets; in
    a container whose image cannot load libibverbs.so.1, runs it again with the host's
    rdma-core mounted read-only (C(host_rdma) of O(settings)). Each run is bounded by the
    rendezvous timeout; the podman containers an earlier, interrupted run left (its
    preflight's and its run's) are removed first.
  - Says why the host cannot run the worker, in one line, and with O(rendezvous) returns the
    argv and environment that start this host's part of the run (module_utils/validate_launch.py
    C(image_preflight) and C(launch)).
  - Changes nothing on the host (the containers are removed when they exit); not run in check
    mode.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  settings:
    description:
      - The plan's settings (C(plan.settings) that the nccl_validate_probe module returns when
        given the role's settings).
    type: dict
    required: true
  rendezvous:
    description: The run's rendezvous address (C(rendezvous.addr) of nccl_validate_probe); with it, RV(launch).
    type: str
  step:
    description:
      - preflight runs the worker's C(--preflight) (above); image, which comes first, makes sure
        the container runtime's image is on the host, pulling it when absent before anything
        is timed (C(pull) and C(pull_timeout) of O(settings); module_utils/validate_launch.py
        C(image_step)), and fails with one line when it is not there; changed when it pulled.
        The host runtime needs no image.
    type: str
    choices: [image, preflight]
    default: preflight
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: Image preflight and launch
  rdmaprov.cluster.nccl_validate_preflight:
    settings: "{{ probe.plan.settings }}"
    rendezvous: "{{ rdzv.rendezvous.addr }}"
  register: preflight
"""

RETURN = r"""
document:
  description: The worker's --preflight output (a JSON document) of the last run, or ''.
  returned: always
  type: str
exit_code:
  description:
    - The last preflight run's exit code (not C(rc), which would fail the task; RV(failure)
      says why the host cannot run).
  returned: always
  type: int
failure:
  description: Why this host cannot run the worker, in one line, or ''.
  returned: always
  type: str
host_rdma:
  description: "{mounts, why}: the host's rdma-core mounted into the image, and why (or why not)."
  returned: always
  type: dict
settings:
  description: The settings with what the launch takes from the preflight (rdma_mounts, torch_libuv).
  returned: always
  type: dict
keep:
  description:
    - "[{dir, dest, content}]: the preflight's document to keep with the results on the
      controller (none when it printed nothing)."
  returned: always
  type: list
launch:
  description:
    - "With O(rendezvous) and no RV(failure): {argv, env, dir, container, rank, nnodes}: what
      starts this host's part of the run, and what the role does around it
      (validate_launch.run_plan(): start, wait, poll, members, exits, local, rails_local,
      label, timeout, host_paths, controller_paths, rm_killed, keep)."
  returned: with O(rendezvous), when the host can run
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch


def main():
    module = AnsibleModule(
        argument_spec={"settings": {"type": "dict", "required": True},
                       "rendezvous": {"type": "str"},
                       "step": {"type": "str", "default": "preflight",
                                "choices": ["image", "preflight"]}},
        supports_check_mode=False)
    s = module.params["settings"]
    if module.params["step"] == "image":
        image = validate_launch.image_step(
            s, lambda argv: module.run_command([str(a) for a in argv]))
        if image["failure"]:
            module.fail_json(msg=image["failure"], changed=image["changed"])
        module.exit_json(changed=image["changed"])
    for argv in validate_launch.leftovers(s):
        rc, _out, err = module.run_command(argv)
        if rc != 0:
            module.fail_json(msg=f"{s['engine']} rm {argv[-1]}: {err.strip() or f'rc {rc}'}")

    def run(argv, env):
        return module.run_command([str(a) for a in argv], environ_update=env)

    try:
        result = validate_launch.image_preflight(s, run)
        result["keep"] = ([validate_launch.kept(s["results"], "preflight.json",
                                                result["document"])]
                          if result["document"] else [])
        master = module.params["rendezvous"]
        if master and not result["failure"]:
            launch = validate_launch.launch(result["settings"], s["label"], s["members"],
                                            s["host"], master, s["master_port"])
            result["launch"] = {**launch,
                                **validate_launch.run_plan(result["settings"], launch, master)}
    except (ValueError, KeyError, TypeError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
