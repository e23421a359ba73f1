#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_ofed_probe
short_description: "Read installed package versions and the installed OFED version"
description:
  - "Asks dpkg (or rpm) for the version of each package and runs C(ofed_info -s) where MLNX_OFED/DOCA put it; changes nothing (check mode safe)."
  - "With O(settings), the module also plans (plan() in module_utils/driver_versions.py): what
    differs, what to refuse and the report line; the rdma_ofed role acts on the plan."
  - With O(files) and O(units), also reads the files and units the role keeps, so that one call
    tells the control host whether a converged host needs any further task.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  packages:
    description: Package names to look up (without O(settings); with it, the plan's packages).
    type: list
    elements: str
    default: []
  settings:
    description:
      - The rdma_ofed role's settings (its rdma_ofed_* variables without the prefix, the OS's
        package lists and the connection's interface). With them the module reads the packages
        the source installs and returns the plan.
      - Without them, only the probe's answers are returned.
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py), from the role variable
        C(rdma_ofed_<key>) where one is defined, else from the play (C(host), C(address),
        C(hosts), C(check_mode), C(connection), C(managed)), else from the host's facts (the OS,
        the connection's interface, python3-apt). C({}) gives the role's settings whole.
    type: dict
    suboptions:
      source: {description: rdma_ofed_source., type: str, required: true, choices: [inbox, doca, mlnx_ofed]}
      inbox_packages: {description: "rdma_ofed_inbox_packages (empty for the OS's list, driver_versions.OS_PACKAGES).", type: list, elements: str, default: []}
      inbox_extra_packages: {description: rdma_ofed_inbox_extra_packages., type: list, elements: str, default: []}
      inbox_version: {description: rdma_ofed_inbox_version., type: str, default: ""}
      doca_packages: {description: rdma_ofed_doca_packages., type: list, elements: str, default: []}
      doca_version: {description: rdma_ofed_doca_version., type: str, default: ""}
      doca_repo_url: {description: rdma_ofed_doca_repo_url., type: str, default: ""}
      doca_gpg_key_url: {description: rdma_ofed_doca_gpg_key_url., type: str, default: ""}
      doca_repo_trusted: {description: rdma_ofed_doca_repo_trusted., type: bool, default: false}
      mlnx_ofed_src: {description: rdma_ofed_mlnx_ofed_src., type: str, default: ""}
      mlnx_ofed_sha256: {description: rdma_ofed_mlnx_ofed_sha256., type: str, default: ""}
      mlnx_ofed_version: {description: rdma_ofed_mlnx_ofed_version., type: str, default: ""}
      mlnx_ofed_workdir: {description: rdma_ofed_mlnx_ofed_workdir., type: str, default: /var/cache/rdmaprov/mlnx_ofed}
      restart_openibd: {description: rdma_ofed_restart_openibd., type: bool, default: false}
      reboot_ok: {description: rdma_ofed_reboot_ok., type: bool, default: false}
      allow_connection_interface_down: {description: rdma_ofed_allow_connection_interface_down., type: bool, default: false}
      os_name: {description: The distribution and its version (named in a refusal)., type: str, default: ""}
      os_family: {description: "The OS family (C(ansible_facts.os_family)): picks the OS's package lists.", type: str, default: ""}
      distribution: {description: "The distribution (C(ansible_facts.distribution)), before O(settings.os_family).", type: str, default: ""}
      distribution_major_version: {description: "Its major version: C(<distribution>-<major>) is looked up first.", type: str, default: ""}
      ssh_interface: {description: The interface carrying the Ansible connection., type: str, default: ""}
      ssh_interface_rdma: {description: Whether that interface is on an HCA., type: bool, default: false}
      python_apt: {description: "Whether python3-apt is installed (preflight's fact): without it apt cannot act under check mode.", type: bool, default: true}
      check_mode: {description: "Whether the play runs in check mode (the probe itself always reads).", type: bool, default: false}
      mlnx_ofed_flags:
        description: rdma_ofed_mlnx_ofed_flags (the installer's argv in RV(bundle)).
        type: list
        elements: str
        default: [--force, --without-fw-update]
  check_bundle:
    description:
      - With O(settings), only hold the file O(settings.mlnx_ofed_src) where the module runs
        (C(delegate_to) the control host) to O(settings.mlnx_ofed_sha256); fail with the line
        that says why not. Reads no package; returns only C(msg).
    type: bool
    default: false
  before:
    description:
      - The RV(state) of the module's first call (with O(settings)). The module then reads the
        host again after an install and returns the verification and the report line
        (RV(verify), RV(report)) instead of a plan; under check mode for what the run would do.
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.state_probe
"""
EXAMPLES = r"""
- name: What is installed
  rdmaprov.cluster.rdma_ofed_probe:
    packages: [rdma-core, ibverbs-providers]
  register: probe
"""
RETURN = r"""
packages_stdout:
  description: "C(dpkg-query) or C(rpm -q) answer, one C(name<TAB>version<TAB>status) line per package (the package_versions filter reads it)."
  returned: always
  type: str
ofed_info:
  description: C(ofed_info -s), or empty where it is not installed.
  returned: always
  type: str
file_state:
  description: For each of O(files), whether it exists and its sha1, mode, owner and group.
  returned: always
  type: dict
  sample: {/etc/systemd/system/rdmaprov-mtu.service: {exists: true, sha1: 3f78..., mode: "0644", owner: root, group: root}}
state:
  description:
    - The installed versions (package name to version, from dpkg or rpm) and the OFED version
      (C(ofed_info -s) parsed; null where there is none).
  returned: always
  type: dict
  sample: {versions: {rdma-core: 44.0-2}, ofed: null}
packages:
  description: The packages the source installs.
  returned: when O(settings) is given without O(before)
  type: list
  elements: str
plan:
  description: What a package install must do (missing, wrong_version, install, ok).
  returned: when O(settings) is given without O(before)
  type: dict
mlnx_plan:
  description: MLNX_OFED's installed and wanted version, and whether to install.
  returned: when O(settings) is given without O(before)
  type: dict
request:
  description: The names (with version pins) an install asks the package manager for.
  returned: when O(settings) is given without O(before)
  type: list
  elements: str
bundle:
  description:
    - The MLNX_OFED bundle's C(src), C(workdir), C(file) and C(dir) on the node, whether the node
      fetches it (C(remote)), whether it is an ISO (C(iso)), its C(installer) and the installer's
      C(argv), its C(sha256) and get_url's C(checksum), and what check mode would do (C(would)),
      as M(rdmaprov.cluster.rdma_ofed_bundle) takes them.
  returned: when O(settings) is given without O(before)
  type: dict
install_packages:
  description: Whether the source installs packages (inbox, doca), with the tasks of RV(package_tasks).
  returned: when O(settings) is given without O(before)
  type: bool
package_tasks:
  description: The role's task file for the OS family (C(setup-Debian.yml), C(setup-RedHat.yml)).
  returned: when O(settings) is given without O(before)
  type: str
doca_repo:
  description:
    - The DOCA repository - whether to C(configure) it (source C(doca)), its C(url), whether it is
      C(trusted) without a signature, and then C(gpgcheck), the key for dnf (C(gpgkey)) and apt's
      keyring (C(signed_by)), empty for a trusted mirror, and the key's URL (C(key_url)).
  returned: when O(settings) is given without O(before)
  type: dict
can_install:
  description: Whether the package manager may act (not under check mode on a Debian-family host without python3-apt).
  returned: when O(settings) is given without O(before)
  type: bool
setting_errors:
  description: What the install path refuses, one line each.
  returned: when O(settings) is given without O(before)
  type: list
  elements: str
refusal:
  description: RV(setting_errors) joined by C(; ), empty when there are none.
  returned: when O(settings) is given without O(before)
  type: str
install_bundle:
  description: Whether the MLNX_OFED bundle is installed (source C(mlnx_ofed), another version in place).
  returned: when O(settings) is given without O(before)
  type: bool
doca_key:
  description: Whether the DOCA repository's signing key is installed (source C(doca), not a trusted mirror).
  returned: when O(settings) is given without O(before)
  type: bool
activate:
  description:
    - How a newly installed driver comes into use (the role's handlers) - C(reboot),
      C(restart) (openibd), C(say) that it is not active yet, or empty for the inbox source.
  returned: when O(settings) is given without O(before)
  type: str
drift:
  description: Whether the install path runs (something differs, a DOCA repository, or a setting to refuse).
  returned: when O(settings) is given without O(before)
  type: bool
rdmaprov_report:
  description:
    - The role's report line where nothing differs (rdmaprov shows it as the host's report);
      empty where something differs, which the role's install path reports.
  returned: when O(settings) is given without O(before)
  type: list
  elements: str
  sample: ["inbox: 7/7 packages installed (rdma-core 44.0-2); nothing to do"]
verify:
  description: After an install, whether the host holds to the plan (C(applies), C(ok)) and the line that says so (C(msg)).
  returned: when O(before) is given
  type: dict
report:
  description: The role's report line after the install path (under check mode, what it would do).
  returned: when O(before) is given
  type: str
unit_state:
  description: For each of O(units), what C(systemctl is-enabled) answers.
  returned: always
  type: dict
  sample: {rdmaprov-mtu.service: enabled}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import driver_versions as versions
from ansible_collections.rdmaprov.cluster.plugins.module_utils import rdma_ofed_probe as probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def _state(result: dict) -> dict:
    """The installed versions and the OFED version, parsed from the probe's answers."""
    return {"versions": versions.parse_package_query(result["packages_stdout"]),
            "ofed": versions.parse_ofed_info(result["ofed_info"])}


SETTINGS = {
    "source": {"type": "str", "required": True, "choices": ["inbox", "doca", "mlnx_ofed"]},
    **{k: {"type": "list", "elements": "str", "default": []}
       for k in ("inbox_packages", "inbox_extra_packages", "doca_packages")},
    **{k: {"type": "str", "default": ""}
       for k in ("inbox_version", "doca_version", "doca_repo_url", "mlnx_ofed_src",
                 "mlnx_ofed_sha256", "mlnx_ofed_version", "os_name", "ssh_interface",
                 "os_family", "distribution", "distribution_major_version")},
    "python_apt": {"type": "bool", "default": True},
    # A key's URL, not a secret (validate-modules guesses from the name).
    "doca_gpg_key_url": {"type": "str", "default": "", "no_log": False},
    "mlnx_ofed_flags": {"type": "list", "elements": "str",
                        "default": ["--force", "--without-fw-update"]},
    "mlnx_ofed_workdir": {"type": "str", "default": "/var/cache/rdmaprov/mlnx_ofed"},
    **{k: {"type": "bool", "default": False}
       for k in ("doca_repo_trusted", "restart_openibd", "reboot_ok",
                 "allow_connection_interface_down", "ssh_interface_rdma", "check_mode")},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={"packages": {"type": "list", "elements": "str", "default": []},
                       "settings": {"type": "dict", "options": SETTINGS},
                       "before": {"type": "dict"},
                       "check_bundle": {"type": "bool", "default": False},
                       "files": state_drift.PATHS_SPEC, "units": state_drift.PATHS_SPEC},
        supports_check_mode=True,
    )
    p = module.params
    settings = p["settings"]
    if p["check_bundle"]:
        if not settings:
            module.fail_json(msg="check_bundle needs settings (mlnx_ofed_src, mlnx_ofed_sha256)")
        problem = versions.bundle_check(settings["mlnx_ofed_src"], settings["mlnx_ofed_sha256"])
        if problem:
            module.fail_json(msg=problem)
        module.exit_json(changed=False, msg=f"{settings['mlnx_ofed_src']}: sha256 as expected")
    packages = versions.wanted_packages(settings) if settings else p["packages"]
    result = probe.probe(packages)
    if "error" in result:
        module.fail_json(msg=result["error"])
    result["state"] = _state(result)
    if settings and p["before"] is not None:
        # Read again after the install path; under check mode, what it would have done.
        result.update(versions.after(settings, p["before"], result["state"], module.check_mode))
    elif settings:
        result.update(versions.plan(settings, result["state"]))
    module.exit_json(changed=False, file_state=state_drift.read_files(p["files"]),
                     unit_state=state_drift.read_units(p["units"]), **result)


if __name__ == "__main__":
    main()
