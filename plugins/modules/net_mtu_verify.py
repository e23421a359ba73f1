#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: net_mtu_verify
short_description: DF-ping each peer's fabric address with a packet of exactly the MTU
description:
  - The net_mtu role's path proof on one host. Pings each of O(peers), sorted by inventory name,
    with DF set and a packet of exactly O(mtu) bytes from O(address) (C(ping -M do), an argv, no
    shell), and returns one verdict per pair that names it (module_utils/netcfg_mtu.py
    C(ping_targets), C(ping_argv) and C(ping_verdict)).
  - A pair is left out when either side has no fabric address, and in check mode when either
    side's MTU change (or ping's installation) was only reported, not made.
  - Changes nothing; runs its pings in check mode too (they are read-only).
version_added: "0.3.0"
author: rdmaprov developers (!UNKNOWN)
options:
  host:
    description: This host's inventory name, which the verdicts name.
    type: str
    required: true
  address:
    description: This host's fabric address, the pings' source; empty leaves every pair out.
    type: str
    default: ""
  mtu:
    description: The MTU to prove (the packet's size; the ICMP payload is 28 bytes less).
    type: int
    required: true
  peers:
    description:
      - The peers, each C({name, address, drift}) as the peer settled it (C(drift) - its MTU
        change is still to be made); an entry without a name or an address is left out.
    type: list
    elements: dict
    default: []
  drift:
    description: Whether this host's own MTU change is still to be made (check mode leaves every pair out).
    type: bool
    default: false
  count:
    description: Packets per pair (net_mtu_ping_count).
    type: int
    default: 3
  timeout:
    description: Seconds to wait for each reply (net_mtu_ping_timeout).
    type: int
    default: 2
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
"""
EXAMPLES = r"""
- name: DF ping each peer with an MTU-sized packet
  rdmaprov.cluster.net_mtu_verify:
    host: "{{ inventory_hostname }}"
    address: 10.198.250.12
    mtu: 9000
    peers: [{name: node1, address: 10.198.250.11, drift: false}]
  register: verify
"""
RETURN = r"""
report:
  description: One verdict per pair pinged, sorted by peer name - src, src_addr, dst, dst_addr, mtu, payload, ok and msg.
  returned: always
  type: list
  elements: dict
  sample: [{src: node2, dst: node1, ok: true, msg: "node2 (10.198.250.12) -> node1 (10.198.250.11): 9000-byte DF packets pass"}]
lines:
  description: The C(msg) of every verdict, in the same order.
  returned: always
  type: list
  elements: str
failures:
  description: The C(msg) of every pair whose DF packets do not pass.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_mtu


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "address": {"type": "str", "default": ""},
            "mtu": {"type": "int", "required": True},
            "peers": {"type": "list", "elements": "dict", "default": []},
            "drift": {"type": "bool", "default": False},
            "count": {"type": "int", "default": 3},
            "timeout": {"type": "int", "default": 2},
        },
        supports_check_mode=True,
    )
    p = module.params
    ping = module.get_bin_path("ping")
    targets = netcfg_mtu.ping_targets(p["address"], p["peers"], module.check_mode,
                                      p["drift"] or not ping)
    report = []
    for peer in targets:
        try:
            argv = netcfg_mtu.ping_argv(p["address"], peer["address"], p["mtu"], p["count"],
                                        p["timeout"])
        except ValueError as exc:
            module.fail_json(msg="net_mtu verify: %s" % exc)
        if ping:
            rc, out, err = module.run_command([ping] + argv[1:], environ_update={"LC_ALL": "C"})
        else:
            rc, out, err = 2, "", "ping: command not found"
        report.append(netcfg_mtu.ping_verdict(p["host"], p["address"], peer["name"],
                                              peer["address"], p["mtu"], rc, out, err))
    module.exit_json(changed=False, report=report, lines=[r["msg"] for r in report],
                     failures=[r["msg"] for r in report if not r["ok"]])


if __name__ == "__main__":
    main()
