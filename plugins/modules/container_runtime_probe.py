#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_runtime_probe
short_description: "Read what a host offers containers: engines, GPUs, RDMA devices, locked memory, storage"
description:
  - "Reads engine binaries and versions, NVIDIA driver nodes, /dev/infiniband, the memlock limits
    (raising them only in a forked child that exits at once), cgroup controllers and the filesystem
    under podman's storage; changes nothing (check mode safe)."
  - With O(files) and O(units), also reads the files and units the role keeps, so that one call
    tells the control host whether a converged host needs any further task.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  storage_conf:
    description: podman's storage.conf.
    type: str
    default: /etc/containers/storage.conf
  images:
    description: Image names to look up with the engine (C(ENGINE image inspect)); those it does not have are in RV(images_missing).
    type: list
    elements: str
    default: []
  engine:
    description: Engine to ask about O(images) (podman or docker); none asks nothing.
    type: str
    default: none
  rdma_cdi:
    description:
      - The RDMA CDI spec to plan (module_utils/cdi_spec.py) from this host's sysfs, with its
        text and its drift against the file at the path in O(rdma_cdi); empty plans none.
      - "Keys: path, kind, mad, conf_path, env, enroot_dir."
    type: dict
    default: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.state_probe
"""
EXAMPLES = r"""
- name: What containers can get here
  rdmaprov.cluster.container_runtime_probe:
    engine: podman
    images: [localhost/worker:latest]
  register: probe
"""
RETURN = r"""
engines:
  description: Installed engines and whether each is usable.
  returned: always
  type: dict
nvidia:
  description: GPUs, driver, nvidia-ctk and nvidia_peermem.
  returned: always
  type: dict
infiniband_devices:
  description: The files under /dev/infiniband.
  returned: always
  type: list
  elements: str
memlock:
  description: Locked-memory limits and whether they can be raised.
  returned: always
  type: dict
storage:
  description: podman's storage.conf, graph root and its filesystem, and the driver podman would choose.
  returned: always
  type: dict
rdma_cdi:
  description:
    - "The RDMA CDI plan: spec, content (the file's text, null for no spec), devices, problems,
      report, drift, hcas, nccl_conf; engines (podman and docker: cdi, why, version) and
      docker_feature (whether daemon.json should enable CDI); enroot (path -> text of enroot's
      mounts.d/environ.d files, where enroot is installed)."
  returned: when O(rdma_cdi) is set
  type: dict
images_missing:
  description: The O(images) the engine does not have.
  returned: always
  type: list
  elements: str
file_state:
  description: For each of O(files), whether it exists and its sha1, mode, owner and group.
  returned: always
  type: dict
  sample: {/etc/systemd/system/rdmaprov-mtu.service: {exists: true, sha1: 3f78..., mode: "0644", owner: root, group: root}}
unit_state:
  description: For each of O(units), what C(systemctl is-enabled) answers.
  returned: always
  type: dict
  sample: {rdmaprov-mtu.service: enabled}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import container_runtime_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def main() -> None:
    module = AnsibleModule(
        argument_spec={**{"storage_conf": {"type": "str",
                                           "default": "/etc/containers/storage.conf"},
                          "images": {"type": "list", "elements": "str", "default": []},
                          "engine": {"type": "str", "default": "none"},
                          "rdma_cdi": {"type": "dict", "default": {}}},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC},
        supports_check_mode=True,
    )
    p = module.params
    result = probe.probe(p["storage_conf"])
    result["images_missing"] = probe.images_missing(p["engine"], p["images"])
    if p["rdma_cdi"]:
        result["rdma_cdi"] = probe.rdma_cdi(p["rdma_cdi"], result["engines"])
    module.exit_json(changed=False, file_state=state_drift.read_files(p["files"]),
                     unit_state=state_drift.read_units(p["units"]), **result)


if __name__ == "__main__":
    main()
