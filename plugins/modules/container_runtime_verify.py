#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_runtime_verify
short_description: Prove podman's storage, or what a container gets here
description:
  - The container_runtime role's proofs on one host, each as container_runtime_probe planned it.
  - With O(storage), asks podman which storage driver it runs (C(podman info), the plan's
    C(storage.info_argv)) and fails with one line where podman cannot use its storage
    (module_utils/container_runtime.py C(judge_storage)).
  - With O(verify), runs the check container that container_runtime_probe planned (the plan's
    C(verify.argv), no shell) and judges what it printed (module_utils/container_runtime.py
    C(judge_check)) - its locked-memory limit, its /dev/infiniband entries and, through the
    RDMA CDI spec, the NCCL settings it sees at /etc/nccl.conf. It fails with one line where
    the container does not start or does not see what the host gives it.
  - Passed, it reports the driver podman runs, or what the container saw.
  - Changes nothing on the host (the container is removed); does nothing in check mode.
version_added: "0.4.0"
author: rdmaprov developers (!UNKNOWN)
options:
  verify:
    description:
      - "The plan's check container: C(argv), C(host), C(label), C(cdi), C(unlimited),
        C(wanted_ib), C(wanted_nccl), C(wanted), C(memlock_note), C(start_failure), C(hint)."
    type: dict
  storage:
    description: "The plan's podman storage: C(info_argv), C(shown), C(tail), C(failure)."
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
"""
EXAMPLES = r"""
- name: Assert podman's storage works
  rdmaprov.cluster.container_runtime_verify:
    storage: "{{ probe.plan.storage }}"
  when: probe.plan.storage.ask_podman

- name: Report what a container gets here
  rdmaprov.cluster.container_runtime_verify:
    verify: "{{ probe.plan.verify }}"
  when: probe.plan.verify.run
"""
RETURN = r"""
msg:
  description: The driver podman runs, or what the check container saw (its memlock limit, /dev/infiniband, the NCCL settings).
  returned: success
  type: str
rdmaprov_report:
  description: The same line, as the host's report.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import container_runtime


def main() -> None:
    module = AnsibleModule(argument_spec={"verify": {"type": "dict"}, "storage": {"type": "dict"}},
                           required_one_of=[("verify", "storage")],
                           mutually_exclusive=[("verify", "storage")],
                           supports_check_mode=True)
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: nothing run")
    plan = p["storage"] if p["storage"] is not None else p["verify"]
    judge = (container_runtime.judge_storage if p["storage"] is not None
             else container_runtime.judge_check)
    try:
        argv = [str(a) for a in plan["info_argv" if p["storage"] is not None else "argv"]]
        try:
            rc, out, err = module.run_command(argv, handle_exceptions=False)
        except OSError as exc:  # as the command module: its errno, nothing said
            rc, out, err = exc.errno or 2, "", ""
        failure, report = judge(plan, rc, out, err)
    except (KeyError, TypeError) as exc:
        module.fail_json(msg="container_runtime verify: the plan has no %s" % exc)
    if failure:
        module.fail_json(msg=failure, rc=rc)
    module.exit_json(changed=False, msg=report, rdmaprov_report=[report])


if __name__ == "__main__":
    main()
