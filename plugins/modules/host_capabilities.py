#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_capabilities
short_description: Report what a node's kernel lets the driver roles do
description:
  - Reads /proc and /sys only; changes nothing (check mode safe).
  - Whether kernel modules can be loaded now (/proc/modules, kernel.modules_disabled,
    CAP_SYS_MODULE, /lib/modules for the running kernel) and why not.
  - NVIDIA GPUs as the driver shows them (/proc/driver/nvidia/gpus, /dev/nvidiaN); lspci is not needed.
  - For one network interface, the devices and drivers below it (through bonds and VLANs), and
    whether an RDMA driver restart would take it down.
  - Sets C(ansible_facts.rdmaprov), the facts the other roles of the collection read (see
    RETURN); with O(rdma), also C(ansible_facts.rdma) as M(rdmaprov.cluster.rdma_facts) does, so
    one call reads the whole host.
  - With O(preflight), also the preflight role's plan, RV(plan), with the interface carrying the
    connection (traced as O(interface) is), the report lines and what to refuse.
  - With O(gather_subset), also Ansible's own facts of those subsets, gathered in this call as
    M(ansible.builtin.setup) gathers them (the same collectors, the same C(ansible_facts)), so
    one call reads the whole host.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  interface:
    description: Network interface to trace to its drivers (e.g. the one carrying the Ansible connection).
    type: str
  rdma:
    description:
      - Also read the RDMA devices and ports (pyverbs when importable, else sysfs) and the
        rdma-core / OFED versions, as M(rdmaprov.cluster.rdma_facts) with its defaults does.
    type: bool
    default: false
  gather_subset:
    description:
      - Ansible's fact subsets to gather in this call, as M(ansible.builtin.setup)'s option of
        that name takes them (the preflight role gives C(["!all", "min", "network"])). They are
        returned in C(ansible_facts) as setup returns them, and O(preflight) plans with them.
      - Omitted, no Ansible facts are gathered.
    type: list
    elements: str
  fact_path:
    description: Where the C(local) subset reads custom facts, as M(ansible.builtin.setup)'s option.
    type: path
    default: /etc/ansible/facts.d
  preflight:
    description:
      - The preflight role's inputs; the module then returns RV(plan)
        (C(host_report.plan) in plugins/module_utils). Under check mode the plan says the apt
        tasks are skipped where python3-apt is missing.
      - In a task, the module's action plugin fills every key it lacks on the control host
        (plugins/plugin_utils/role_settings.py, the table C(host_report.SETTINGS)) - from the role
        variables C(preflight_supported_os_families), C(preflight_supported_distributions),
        C(preflight_require_gpus), C(preflight_require_rdma_devices) and C(preflight_report)
        where defined, O(preflight.ansible_host) and O(preflight.connection) from the play
        (C(ansible_host), else the inventory name; C(ansible_connection)). C({}) gives the
        role's inputs whole.
    type: dict
    suboptions:
      facts:
        description:
          - The gathered facts (C(ansible_facts), min and network subsets); the facts this call
            gathers (O(gather_subset)) are laid over them.
        type: dict
        default: {}
      ansible_host:
        description: The address Ansible connects to (resolved on this host when a name).
        type: str
      connection:
        description: C(ansible_connection); C(local) has no network path to keep up.
        type: str
        default: ssh
      os_families:
        description: The supported OS families (preflight_supported_os_families).
        type: list
        elements: str
        default: []
      distributions:
        description: The supported distributions (preflight_supported_distributions).
        type: list
        elements: str
        default: []
      require_gpus:
        description: Refuse a host with no NVIDIA GPU visible (preflight_require_gpus).
        type: bool
        default: false
      require_rdma_devices:
        description: Refuse a host with no RDMA device (preflight_require_rdma_devices).
        type: bool
        default: false
      report:
        description:
          - RV(plan)'s C(message) is the report's lines (preflight_report); false, the assert's
            own words.
        type: bool
        default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
"""

EXAMPLES = r"""
- name: What can this kernel do?
  rdmaprov.cluster.host_capabilities:
    interface: eth0
  register: caps
"""

RETURN = r"""
kernel_release:
  description: Running kernel release (uname -r).
  returned: always
  type: str
modules:
  description: Whether modules can be loaded, and the reason.
  returned: always
  type: dict
  sample: {can_load: false, by: kernel, reason: "no /proc/modules: this kernel has no loadable-module support"}
gpus:
  description: NVIDIA GPUs seen through the driver.
  returned: always
  type: dict
  sample: {count: 8, models: ["NVIDIA H200"], devices: [nvidia0], driver_version: "570.86.15", source: procfs}
python:
  description: >-
    The Python this module ran in (the one Ansible uses on the host), whether it can import apt
    (python3-apt), which Ansible's apt module needs, whether it is the system's /usr/bin/python3
    (is_system) and, when it is not and cannot import apt, whether /usr/bin/python3 can
    (system_apt), under which the apt module then runs.
  returned: always
  type: dict
  sample: {executable: /usr/bin/python3, apt: true, is_system: true, system_apt: null}
interface:
  description: The interface asked about, the devices below it and their drivers.
  returned: when interface is given
  type: dict
  sample: {name: bond0, exists: true, rdma_backed: true, devices: [{name: bond0, driver: null, rdma: false, virtual: true}]}
plan:
  description:
    - The preflight role's plan; C(errors) are the lines of its refusal (empty, the host passes)
      and C(error) them in one line, C(report) the lines of its report and C(message) the role's
      success message (the report, or the assert's own words under O(preflight.report)=false),
      C(apt) what it says about python3-apt (error, note, usable) and C(connection) the
      interface carrying the connection (name, address, method).
  returned: when preflight is given
  type: dict
  sample: {errors: [], error: "", report: ["Debian 12 (Debian family), kernel 6.1.0-28-amd64"],
           message: ["Debian 12 (Debian family), kernel 6.1.0-28-amd64"],
           apt: {error: null, note: null, usable: true},
           connection: {name: eth0, address: 10.0.0.5, method: SSH_CONNECTION}}
ansible_facts:
  description: C(rdmaprov) always (the contract with the other roles); C(rdma) with O(rdma).
  returned: always
  type: dict
  contains:
    rdmaprov:
      description:
        - C(can_load_modules) and C(modules_reason) from RV(modules); C(gpus) and C(has_gpus)
          from RV(gpus); C(has_hcas) (with O(rdma), whether any RDMA device was found, else
          false); C(ssh_interface) (O(interface), or an empty string) and C(ssh_interface_rdma) (whether a
          driver restart would take it down); C(python_apt) (whether Ansible's apt module finds
          python3-apt without installing it, as this interpreter or /usr/bin/python3 imports apt).
      type: dict
      sample: {can_load_modules: true, modules_reason: "", has_gpus: true, has_hcas: true,
               gpus: {count: 8}, ssh_interface: eth0, ssh_interface_rdma: false, python_apt: true}
"""

import importlib
import os
import subprocess
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.facts import ansible_collector, default_collectors
from ansible.module_utils.facts.namespace import PrefixFactNamespace

from ansible_collections.rdmaprov.cluster.plugins.module_utils import (
    driver_plan,
    host_report,
    kernel_caps,
)
from ansible_collections.rdmaprov.cluster.plugins.module_utils.rdma_pyverbs import (
    gather,
    module_runner,
)


def _imports(name: str) -> bool:
    """Whether this Python can import NAME (found is not enough: python3-apt built for another
    Python version is found and fails to load)."""
    try:
        importlib.import_module(name)
    except Exception:  # any failure to load is the answer
        return False
    return True


SYSTEM_PYTHON = "/usr/bin/python3"


def _python() -> dict:
    """This interpreter, whether it imports apt, and whether the system's /usr/bin/python3 does
    (Ansible's apt module runs under that one when it can; None: this is that one)."""
    apt = _imports("apt")
    # A venv's python resolves to the system binary but has its own site-packages: not the system's.
    is_system = (os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON)
                 and sys.prefix == getattr(sys, 'base_prefix', sys.prefix))
    system_apt = None
    if not apt and not is_system and os.path.exists(SYSTEM_PYTHON):
        try:
            system_apt = subprocess.run([SYSTEM_PYTHON, "-c", "import apt"], timeout=20,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        check=False).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            system_apt = False
    return {"executable": sys.executable, "apt": apt, "is_system": is_system,
            "system_apt": system_apt}


# What ansible.builtin.setup's "min" subset is (its minimal_gather_subset).
MINIMAL_GATHER_SUBSET = frozenset((
    "apparmor", "caps", "cmdline", "date_time", "distribution", "dns", "env", "fips", "local",
    "lsb", "pkg_mgr", "platform", "python", "selinux", "service_mgr", "ssh_pub_keys", "user"))


def _ansible_facts(module) -> dict:
    """Ansible's facts of O(gather_subset), collected as ansible.builtin.setup collects them
    (its collectors, its ansible_ prefix), so that the host is read in one module call."""
    try:
        collector = ansible_collector.get_ansible_collector(
            all_collector_classes=default_collectors.collectors,
            namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
            filter_spec=[], gather_subset=module.params["gather_subset"], gather_timeout=10,
            minimal_gather_subset=MINIMAL_GATHER_SUBSET)
    except Exception as exc:  # a bad subset name: setup's own words
        module.fail_json(msg="gather_subset: %s" % exc)
    return collector.collect(module=module)


PREFLIGHT_OPTIONS = {
    "facts": {"type": "dict", "default": {}},
    "ansible_host": {"type": "str"},
    "connection": {"type": "str", "default": "ssh"},
    "os_families": {"type": "list", "elements": "str", "default": []},
    "distributions": {"type": "list", "elements": "str", "default": []},
    "require_gpus": {"type": "bool", "default": False},
    "require_rdma_devices": {"type": "bool", "default": False},
    "report": {"type": "bool", "default": True},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "interface": {"type": "str"},
            "rdma": {"type": "bool", "default": False},
            "preflight": {"type": "dict", "options": PREFLIGHT_OPTIONS},
            "gather_subset": {"type": "list", "elements": "str"},
            "fact_path": {"type": "path", "default": "/etc/ansible/facts.d"},
        },
        supports_check_mode=True,
    )
    preflight = module.params["preflight"]
    gathered = _ansible_facts(module) if module.params["gather_subset"] is not None else {}
    seen = {**(preflight or {}).get("facts", {}),
            **{k[len("ansible_"):] if k.startswith("ansible_") else k: v
               for k, v in gathered.items()}}
    connection = None
    if preflight:
        connection = driver_plan.connection_interface(
            seen, preflight["ansible_host"], preflight["connection"])
        if not module.params["interface"]:
            module.params["interface"] = connection["name"]
    release = os.uname().release
    result = {
        "changed": False,
        "kernel_release": release,
        "modules": kernel_caps.module_loading("/", release),
        "gpus": kernel_caps.gpus("/"),
        "python": _python(),
    }
    if module.params["interface"]:
        result["interface"] = kernel_caps.netdev_drivers(module.params["interface"], "/")
    facts = {}
    if module.params["rdma"]:
        facts["rdma"] = gather("/sys", "auto", module_runner(module))
    facts["rdmaprov"] = {
        "can_load_modules": result["modules"]["can_load"],
        "modules_reason": result["modules"]["reason"],
        "gpus": result["gpus"],
        "has_gpus": result["gpus"]["count"] > 0,
        "has_hcas": bool(facts.get("rdma", {}).get("devices")),
        "ssh_interface": module.params["interface"] or "",
        "ssh_interface_rdma": bool(result.get("interface", {}).get("rdma_backed")),
        "python_apt": bool(result["python"]["apt"] or result["python"]["system_apt"]),
    }
    if preflight:
        settings = {"connection_type": preflight["connection"],
                    **{k: preflight[k] for k in ("os_families", "distributions", "require_gpus",
                                                 "require_rdma_devices", "report")}}
        seen.update({"rdma": facts["rdma"]} if "rdma" in facts else {})
        result["plan"] = host_report.plan(seen, result, connection, settings, module.check_mode)
    module.exit_json(ansible_facts={**gathered, **facts}, **result)


if __name__ == "__main__":
    main()
