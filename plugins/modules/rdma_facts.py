#!/usr/bin/python
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_facts
short_description: Discover RDMA devices, ports, GIDs and the RDMA stack's version
description:
  - Reports every RDMA device (HCA) and port as C(ansible_facts.rdma) with state, physical
    state, rate, link layer, active MTU, LID, netdev, GIDs with their types, firmware and board id,
    plus the rdma-core and OFED versions. The shape is fixed in docs/CONTRACTS.md.
  - Uses pyverbs (rdma-core's Python binding) when it is importable and the kernel has verbs,
    and sysfs (/sys/class/infiniband) otherwise; C(source) says which.
  - A host without RDMA is not a failure; C(devices) is empty and C(kernel.reason) says why
    (for example no ib_uverbs in the kernel, where pyverbs raises PyverbsRDMAError).
  - Also returns per-port error counters (C(counters)) and RoCE congestion counters
    (C(hw_counters)) read from sysfs, the bond a port's netdev belongs to, and each GID's netdev.
  - Read-only; runs only C(ofed_info -s) and a package query (dpkg-query or rpm).
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  sysfs_root:
    description:
      - Where sysfs is mounted. Only tests change it (fixture trees); pyverbs is not used
        with C(use_pyverbs=auto) when it is not C(/sys), since pyverbs reads the running kernel.
    type: path
    default: /sys
  use_pyverbs:
    description:
      - C(auto) uses pyverbs when importable, C(yes) fails without it, C(no) reads sysfs only.
    type: str
    choices: [auto, "yes", "no"]
    default: auto
  versions:
    description: Query the rdma-core package and C(ofed_info -s) for versions.
    type: bool
    default: true
  nccl_socket_ifname:
    description:
      - Interface for NCCL's socket (bootstrap) traffic, written as C(NCCL_SOCKET_IFNAME==name)
        in the derived C(nccl.env). Usually the one carrying the host's address.
      - Empty or unset, with O(nccl_socket_facts) given, it is the interface carrying the
        Ansible connection (C(rdmaprov.ssh_interface) in those facts), else the default IPv4
        route's, else the one holding O(nccl_socket_address).
    type: str
  nccl_socket_facts:
    description:
      - Ansible's facts of this host (its network facts, and C(rdmaprov) from the preflight
        role), to find the socket interface when O(nccl_socket_ifname) is empty.
    type: dict
  nccl_socket_address:
    description: The address Ansible connects to (C(ansible_host)), for O(nccl_socket_facts).
    type: str
  nccl_ib_tc:
    description:
      - RoCE traffic class for C(NCCL_IB_TC) (the roce_qos role's C(roce_qos_nccl_ib_tc));
        used only when a RoCE port is in use. A negative value sets none.
    type: int
  nccl_ib_tc_roce_qos:
    description:
      - The roce_qos role's C(roce_qos_nccl_ib_tc), taken for C(NCCL_IB_TC) when O(nccl_ib_tc)
        is unset or negative.
    type: int
  nccl_extra:
    description:
      - More NCCL_* settings to write (the nccl_env role's C(nccl_env_extra)), on top of the
        derived ones in C(nccl.settings) and C(nccl.lines); linted as O(nccl_lint_env) is when
        that is not given.
    type: dict
  nccl_lint_env:
    description:
      - NCCL_* variables to check against this host (for example a container image's
        environment); the findings are returned as C(nccl.lint).
    type: dict
  nccl_lint_fail:
    description:
      - Fail when the lint of C(nccl_lint_env) finds an error; the message lists each one.
    type: bool
    default: false
  settings:
    description:
      - The nccl_env role's settings (rdma_nccl.SETTINGS, its variables without the
        C(nccl_env_) prefix, and C(address), the address Ansible connects to), with C(facts)
        (the host's Ansible facts) and C(ib_tc_roce_qos) (the roce_qos role's
        C(roce_qos_nccl_ib_tc)). With them the NCCL options above come from the settings
        (rdma_nccl.role_params), the lint of C(extra) fails the host per C(lint_fail), and
        C(nccl) also returns C(path) (C(conf_path)) and C(verify).
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py) from the role variable
        C(nccl_env_<key>), C(address) from the play, C(facts) and C(ib_tc_roce_qos) from the
        host's variables. C({}) gives the role's settings whole.
    type: dict
  verify_conf:
    description:
      - "The C(nccl) an earlier call with O(settings) returned ({path, lines, summary,
        verify}): reads the file at C(path) back and fails, with one line, unless it holds every
        one of C(lines) (rdma_nccl.conf_check); nothing is discovered. Skipped in check mode
        (the file may not be written yet) and when C(verify) is false."
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - rdmaprov.cluster.attributes
attributes:
  facts:
    support: full
notes:
  - pyverbs comes from the distribution (Debian/Ubuntu C(python3-pyverbs), RHEL C(python3-pyverbs));
    the interpreter Ansible uses on the node must be able to import it.
"""

EXAMPLES = r"""
- name: Discover RDMA devices
  rdmaprov.cluster.rdma_facts:

- name: Active ports
  ansible.builtin.debug:
    msg: >-
      {{ ansible_facts.rdma.devices | map(attribute='ports') | flatten
         | selectattr('state', 'equalto', 'ACTIVE') | list }}

- name: Fail early on a node that cannot do RDMA
  ansible.builtin.assert:
    that: ansible_facts.rdma.kernel.uverbs
    fail_msg: "{{ ansible_facts.rdma.kernel.reason }}"
"""

RETURN = r"""
rdmaprov_report:
  description: "With O(verify_conf), when the file holds every setting: the line saying so; rdmaprov shows it as the host's report."
  returned: when O(verify_conf) read the file back
  type: list
  elements: str
  sample: ["nccl_env: /etc/nccl.conf sets NCCL_SOCKET_IFNAME"]
nccl:
  description:
    - NCCL settings derived from the facts (C(env)), why ports were left out (C(notes)), and,
      with C(nccl_lint_env) or C(nccl_extra), findings on the given variables (C(lint)).
    - What /etc/nccl.conf holds (rdma_nccl.conf, O(nccl_extra) on top of C(env)) as C(settings),
      C(lines) (NAME=value, sorted by name) and C(summary) (what it sets, and the first note).
  returned: always
  type: dict
  sample:
    env: {NCCL_IB_HCA: "=mlx5_0:1,mlx5_1:1", NCCL_IB_GID_INDEX: "3", NCCL_SOCKET_IFNAME: "=eth0"}
    notes: ["mlx5_bond_0:1 left out: bond bond0 (front-end network)"]
    settings: {NCCL_IB_HCA: "=mlx5_0:1,mlx5_1:1", NCCL_IB_GID_INDEX: "3", NCCL_SOCKET_IFNAME: "=eth0"}
    lines: [NCCL_IB_GID_INDEX=3, "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", NCCL_SOCKET_IFNAME==eth0]
    summary: "sets NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_GID_INDEX (mlx5_bond_0:1 left out: bond bond0 (front-end network))"
    lint: [{level: error, variable: NCCL_IB_ENABLE, message: "NCCL_IB_ENABLE does not exist ..."}]
rdma:
  description: The RDMA facts (also set as C(ansible_facts.rdma)).
  returned: always
  type: dict
  contains:
    kernel:
      description:
        - Whether this kernel can do RDMA from user space, and why (not).
        - C(modules) holds ib_core, ib_uverbs and rdma_ucm as loaded, builtin or absent with the
          evidence (kernel_caps.module_status, the answer every rdmaprov command gives).
      type: dict
      sample:
        uverbs: false
        reason: "no /sys/class/infiniband_verbs: the kernel has no RDMA (ib_uverbs) support"
        modules:
          ib_uverbs: {state: absent, evidence: "not in /proc/modules, /sys/module or modules.builtin"}
    rdma_core_version:
      description: Upstream version of the installed rdma-core package, or null.
      type: str
      sample: "44.0"
    ofed_version:
      description: C(ofed_info -s) without its trailing colon, or null.
      type: str
      sample: MLNX_OFED_LINUX-23.10-1.1.9.0
    source:
      description: Where the device facts came from.
      type: str
      choices: [pyverbs, sysfs, none]
    devices:
      description: One entry per RDMA device, with its ports.
      type: list
      elements: dict
      sample:
        - name: mlx5_0
          fw_ver: "28.39.1002"
          board_id: MT_0000000838
          node_guid: "b83f:d203:00aa:bbcc"
          hca_type: MT4129
          ports:
            - port: 1
              state: ACTIVE
              phys_state: LinkUp
              rate_gbps: 400
              link_layer: InfiniBand
              active_mtu: 4096
              lid: 12
              netdev: ib0
              gids: [{index: 0, gid: "fe80:0000:0000:0000:b83f:d203:00aa:bbcc", type: IB}]
              bond: null
              netdev_mtu: 4092
              path_mtu: {ib0: 4092}
              counters: {symbol_error: 0, link_downed: 0, port_rcv_errors: 0}
              hw_counters: {}
              admin_down: false
    gpus:
      description: >-
        NVIDIA GPUs of the host (kernel_caps.gpus): C(count) the driver shows (what
        rdmaprov check counts), C(on_pci) on the PCI bus, C(models); null when only a sysfs
        tree (not a whole root) was read.
      type: dict
      sample: {count: 8, on_pci: 8, models: [NVIDIA H100 80GB HBM3]}
"""

# Ansible's layout: the documentation strings come first, so imports follow them.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.parsing.convert_bool import boolean  # noqa: E402
from ansible_collections.rdmaprov.cluster.plugins.module_utils import (  # noqa: E402
    rdma_nccl,
    rdma_sysfs,
)
from ansible_collections.rdmaprov.cluster.plugins.module_utils.rdma_pyverbs import (  # noqa: E402
    PyverbsMissing,
    gather,
    module_runner,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys"},
            "use_pyverbs": {"type": "str", "choices": ["auto", "yes", "no"], "default": "auto"},
            "versions": {"type": "bool", "default": True},
            "nccl_socket_ifname": {"type": "str"},
            "nccl_socket_facts": {"type": "dict"},
            "nccl_socket_address": {"type": "str"},
            "nccl_ib_tc": {"type": "int"},
            "nccl_ib_tc_roce_qos": {"type": "int"},
            "nccl_extra": {"type": "dict"},
            "nccl_lint_env": {"type": "dict"},
            "nccl_lint_fail": {"type": "bool", "default": False},
            "settings": {"type": "dict"},
            "verify_conf": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    verify = module.params["verify_conf"]
    if verify is not None:
        if module.check_mode or not boolean(verify.get("verify", True)):
            module.exit_json(changed=False, skipped=True,
                             msg=f"nccl_env: {verify['path']} not read back"
                             + (" in check mode" if module.check_mode else ""))
        try:
            with open(verify["path"], encoding="utf-8", errors="replace", newline="") as fh:
                text = fh.read()
        except OSError:
            text = None
        ok, line = rdma_nccl.conf_check(verify, text)
        if not ok:
            module.fail_json(msg=line)
        # The line is the host's report under rdmaprov (its progress reads rdmaprov_report).
        module.exit_json(changed=False, msg=line, rdmaprov_report=[line])
    settings = module.params["settings"]
    if settings is not None:
        try:
            module.params.update(rdma_nccl.role_params(settings),
                                 nccl_lint_fail=boolean(settings["lint_fail"]))
        except (KeyError, TypeError, ValueError) as exc:
            module.fail_json(msg=f"settings: {exc}")

    try:
        facts = gather(module.params["sysfs_root"], module.params["use_pyverbs"],
                       module_runner(module) if module.params["versions"] else None)
    except PyverbsMissing as exc:
        module.fail_json(msg=str(exc))
    params = module.params
    socket = params["nccl_socket_ifname"]
    if params["nccl_socket_facts"] is not None:
        socket = rdma_nccl.socket_ifname(socket, params["nccl_socket_facts"],
                                         params["nccl_socket_address"])
    nccl = rdma_nccl.derive(facts, rdma_nccl.ib_tc(params["nccl_ib_tc"],
                                                   params["nccl_ib_tc_roce_qos"]), socket)
    nccl.update(rdma_nccl.conf(nccl, params["nccl_extra"]))
    lint_env = params["nccl_lint_env"]
    if lint_env is None:
        lint_env = params["nccl_extra"]
    if lint_env is not None:
        env = {str(k): str(v) for k, v in lint_env.items()}
        nccl["lint"] = rdma_nccl.lint(env, facts, rdma_sysfs.list_netdevs(params["sysfs_root"]))
        errors = [f["message"] for f in nccl["lint"] if f["level"] == "error"]
        if params["nccl_lint_fail"] and errors:
            module.fail_json(msg="NCCL lint: " + "; ".join(errors), rdma=facts, nccl=nccl)
    if settings is not None:
        nccl.update(path=settings["conf_path"], verify=boolean(settings["verify"]))
    module.exit_json(changed=False, rdma=facts, nccl=nccl, ansible_facts={"rdma": facts})


if __name__ == "__main__":
    main()
