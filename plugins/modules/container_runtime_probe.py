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
  - With O(settings), also plans (C(plan) in module_utils/container_runtime.py) what the
    container_runtime role does on this host and returns it as RV(plan) - the engine, its
    packages, podman's storage driver, the files to write, docker's daemon.json, the check
    container, what differs, what to refuse and why, the report lines - so that the role acts
    only on what the plan says. The engine, the images, the RDMA CDI spec and the files read
    then come from O(settings) (O(engine), O(images), O(rdma_cdi) and O(files) are not needed);
    the plan renders rdmaprov's drop-ins and compares them with the files read. On a Debian
    family host where the role installs the engine, it also asks apt whether its index has a
    candidate for the engine's package (C(apt-cache policy), read-only).
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  storage_conf:
    description: podman's storage.conf (with O(settings), its podman_storage_conf instead).
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
  settings:
    description:
      - The container_runtime role's settings (its C(container_runtime_*) variables without the
        prefix), with the host's inventory name, its OS family and whether the play runs under
        --check. Given, the module returns RV(plan). Omit to read only.
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py), from the role variable
        C(container_runtime_<key>) where one is defined, else from the play (C(host), C(address),
        C(hosts), C(check_mode), C(connection), C(managed)). C({}) gives the role's settings whole.
    type: dict
    suboptions:
      host:
        description: The host's inventory name, which the refusals name.
        type: str
        default: ''
      os_family:
        description: The OS family (Ansible's fact), which picks the engine's packages.
        type: str
        default: Debian
      check_mode:
        description: Whether the play runs under --check (no podman info, no check container).
        type: bool
        default: false
      architecture:
        description: The CPU architecture (Ansible's fact), for NVIDIA's apt source.
        type: str
        default: x86_64
      engine:
        description: container_runtime_engine.
        type: str
        default: "auto"
      install:
        description: container_runtime_install.
        type: bool
        default: true
      podman_packages:
        description: container_runtime_podman_packages.
        type: list
        elements: str
        default: []
      docker_packages:
        description: container_runtime_docker_packages.
        type: list
        elements: str
        default: []
      docker_daemon_json:
        description: container_runtime_docker_daemon_json (read here when the engine is docker).
        type: str
        default: /etc/docker/daemon.json
      docker_daemon_options:
        description: container_runtime_docker_daemon_options.
        type: dict
        default: {}
      podman_conf:
        description: container_runtime_podman_conf.
        type: str
        default: /etc/containers/containers.conf.d/90-rdmaprov.conf
      pids_limit:
        description: container_runtime_pids_limit (auto, an integer, or null to leave it alone).
        type: raw
      podman_storage_driver:
        description: container_runtime_podman_storage_driver.
        type: str
        default: "auto"
      memlock:
        description: container_runtime_memlock.
        type: str
        default: unlimited
      limits_file:
        description: container_runtime_limits_file.
        type: str
        default: /etc/security/limits.d/90-rdmaprov-memlock.conf
      systemd_dropin:
        description: container_runtime_systemd_dropin.
        type: str
        default: /etc/systemd/system.conf.d/90-rdmaprov-memlock.conf
      nvidia:
        description: container_runtime_nvidia (auto, true, false).
        type: raw
        default: "auto"
      nvidia_mode:
        description: container_runtime_nvidia_mode.
        type: str
        default: both
      nvidia_repo:
        description: container_runtime_nvidia_repo (nvidia, local, none).
        type: str
        default: nvidia
      nvidia_repo_url:
        description: container_runtime_nvidia_repo_url.
        type: str
        default: https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)
      nvidia_local_repo:
        description: container_runtime_nvidia_local_repo.
        type: str
        default: ''
      nvidia_default_runtime:
        description: container_runtime_nvidia_default_runtime.
        type: bool
        default: false
      rdma_cdi:
        description: container_runtime_rdma_cdi.
        type: bool
        default: true
      rdma_cdi_spec:
        description: container_runtime_rdma_cdi_spec.
        type: str
        default: /etc/cdi/rdmaprov-rdma.yaml
      rdma_cdi_kind:
        description: container_runtime_rdma_cdi_kind.
        type: str
        default: rdmaprov.io/rdma
      rdma_cdi_mad:
        description: container_runtime_rdma_cdi_mad.
        type: bool
        default: false
      rdma_cdi_nccl_conf:
        description: container_runtime_rdma_cdi_nccl_conf.
        type: str
        default: /etc/nccl.conf
      rdma_cdi_env:
        description: container_runtime_rdma_cdi_env.
        type: dict
        default: {}
      enroot_conf_dir:
        description: container_runtime_enroot_conf_dir.
        type: str
        default: /etc/enroot
      images:
        description: container_runtime_images ({name, src, archive, format}).
        type: list
        elements: dict
        default: []
      verify_image:
        description: container_runtime_verify_image.
        type: str
        default: "docker.io/library/busybox:1.36"
      verify_timeout:
        description: container_runtime_verify_timeout.
        type: int
        default: 120
      verify_args:
        description: container_runtime_verify_args.
        type: list
        elements: str
        default: []
      managed:
        description: The first comment line of rdmaprov's drop-ins (Ansible's DEFAULT_MANAGED_STR, as ansible_managed).
        type: str
        default: Ansible managed
      python_apt:
        description: Whether python3-apt is there (the preflight role's fact); without it the apt module installs it, which --check must not.
        type: bool
        default: true
      apt_cache_valid_time:
        description: container_runtime_apt_cache_valid_time.
        type: int
        default: 3600
      podman_storage_conf:
        description: container_runtime_podman_storage_conf (the probe reads it).
        type: str
        default: /etc/containers/storage.conf
      verify:
        description: container_runtime_verify.
        type: bool
        default: true
      nvidia_repo_key_url:
        description: container_runtime_nvidia_repo_key_url.
        type: str
        default: https://nvidia.github.io/libnvidia-container/gpgkey
      nvidia_packages:
        description: container_runtime_nvidia_packages.
        type: list
        elements: str
        default: [nvidia-container-toolkit]
      cdi_spec:
        description: container_runtime_cdi_spec (NVIDIA's CDI spec).
        type: str
        default: /etc/cdi/nvidia.yaml
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
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
      report, drift, hcas, nccl_conf, present (whether the spec file is on the host); engines (podman and docker: cdi, why, version) and
      docker_feature (whether daemon.json should enable CDI); enroot (path -> text of enroot's
      mounts.d/environ.d files, where enroot is installed)."
  returned: when O(rdma_cdi) is set
  type: dict
plan:
  description:
    - "What the container_runtime role does here (C(plan) in module_utils/container_runtime.py).
      Keys: engine, gpu, container_engine, packages, install_engine, install, apt_module,
      apt_install_engine, apt_cache_valid_time, docker_cli_check, start_docker,
      pids_limit, pids_controller, memlock_why, storage, systemd, dirs, dropins,
      systemd_dropin, files, writes, rdma_cdi_content, remove, nvidia_cdi, nvidia_source,
      daemon_json, images_to_copy, image_dirs, images_to_load, cdi, verify, drift, drift_why,
      differs, unprobed, errors, refusal, report, install_steps, configure_steps, image_steps."
    - "C(differs) is what the probe read to differ, C(unprobed) what it cannot read (docker's
      daemon.json, NVIDIA's toolkit): both are in C(drift_why) and make C(drift)."
    - "The three lists of steps are what the role's apply tasks run, one
      C(rdmaprov.cluster.container_runtime_apply) call each."
  returned: when O(settings) is given
  type: dict
daemon_json:
  description: docker's daemon.json as read (C(text), null when absent; C(error) when unreadable).
  returned: when O(settings) is given and the engine is docker
  type: dict
apt_candidate:
  description: Whether apt's index has a candidate for the engine's first package (C(apt-cache policy)).
  returned: when O(settings) is given, the role installs the engine and the OS family is not RedHat
  type: bool
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
from ansible_collections.rdmaprov.cluster.plugins.module_utils import container_runtime
from ansible_collections.rdmaprov.cluster.plugins.module_utils import container_runtime_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def main() -> None:
    module = AnsibleModule(
        argument_spec={**{"storage_conf": {"type": "str",
                                           "default": "/etc/containers/storage.conf"},
                          "images": {"type": "list", "elements": "str", "default": []},
                          "engine": {"type": "str", "default": "none"},
                          "rdma_cdi": {"type": "dict", "default": {}},
                          "settings": {"type": "dict",
                                       "options": container_runtime.argument_spec()}},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC},
        supports_check_mode=True,
    )
    p = module.params
    settings = p["settings"]
    # podman's storage.conf: the role's (its settings) where the role asks, else the argument.
    result = probe.probe(p["storage_conf"] if settings is None
                         else settings["podman_storage_conf"])
    engine, images, cdi, files = p["engine"], p["images"], p["rdma_cdi"], p["files"]
    if settings is not None:
        # The role's settings decide what to ask: the engine as the plan picks it, the images,
        # the RDMA CDI spec and the files rdmaprov writes.
        engine = container_runtime.pick_engine(settings["engine"], result["engines"])
        images = [str(i.get("name")) for i in settings["images"]]
        cdi = container_runtime.rdma_cdi_settings(settings)
        files = list(files) + container_runtime.probed_paths(settings)
    result["images_missing"] = probe.images_missing(engine, images)
    if cdi:
        result["rdma_cdi"] = probe.rdma_cdi(cdi, result["engines"])
    result["file_state"] = state_drift.read_files(files)
    if settings is not None:
        if engine == "docker":
            result["daemon_json"] = probe.read_text(settings["docker_daemon_json"])
        if settings["install"] and engine != "none" and settings["os_family"] != "RedHat":
            result["apt_candidate"] = probe.apt_candidate(
                container_runtime.engine_packages(result, settings)[0])
        try:
            result["plan"] = container_runtime.plan(result, settings)
        except (ValueError, KeyError, TypeError) as exc:
            module.fail_json(msg="container_runtime plan: %s" % exc, **result)
    module.exit_json(changed=False, unit_state=state_drift.read_units(p["units"]), **result)


if __name__ == "__main__":
    main()
