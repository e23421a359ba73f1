#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
# The work is done by the action plugin of the same name (plugins/action/rdma_ofed_bundle.py), on
# the controller; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_ofed_bundle
short_description: Fetch, verify and install an MLNX_OFED bundle
description:
  - The rdma_ofed role's MLNX_OFED path in one task, from the plan of M(rdmaprov.cluster.rdma_ofed_probe)
    (RV(rdmaprov.cluster.rdma_ofed_probe#module:bundle)); the steps are driver_versions.bundle_steps().
  - A bundle on the control host is held to its sha256 there, before a byte of it reaches the
    node; it is then copied to the node. A URL is fetched by the node with C(get_url), which
    checks the sha256 before it moves the download into place.
  - The bundle is then unpacked (a tarball) or mounted (an ISO, unmounted afterwards whatever
    happened) and its installer run, which always reports a change.
  - In check mode the work directory and the bundle are only checked (each step says whether it
    would change) and the installer is neither unpacked nor run; the result's C(msg) says what
    the run would install.
  - Fails with one line that names the step that failed, the builtin's message and the last line
    it wrote to stderr, and, where the installer did not run, that nothing was installed.
version_added: "0.4.0"
author: rdmaprov developers (!UNKNOWN)
options:
  bundle:
    description:
      - The RV(rdmaprov.cluster.rdma_ofed_probe#module:bundle) that
        M(rdmaprov.cluster.rdma_ofed_probe) returns with
        O(rdmaprov.cluster.rdma_ofed_probe#module:settings) -
        C(src), C(sha256), C(checksum), C(workdir), C(file), C(dir), C(remote), C(iso),
        C(installer), C(argv) and C(would).
    type: dict
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.attributes.action
attributes:
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Probe and plan
  rdmaprov.cluster.rdma_ofed_probe:
    settings: {}
  register: probe

- name: Fetch, verify and install the bundle
  rdmaprov.cluster.rdma_ofed_bundle:
    bundle: "{{ probe.bundle }}"
  when: probe.install_bundle
"""

RETURN = r"""
msg:
  description: What the run installed, or under check mode what it would install; on failure, why.
  returned: always
  type: str
  sample: would install MLNX_OFED 24.10-1.1.4.0 from https://mirror.example/MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64.tgz (installed - none)
"""
