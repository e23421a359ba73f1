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
    with DF set and a packet of exactly O(verify)'s C(mtu) bytes from its C(address) (C(ping -M do), an argv,
    no shell), and returns one verdict per pair that names it (module_utils/netcfg_mtu.py
    C(ping_targets), C(ping_argv) and C(ping_verdict)).
  - A pair is left out when either side has no fabric address, and in check mode when either
    side's MTU change (or ping's installation) was only reported, not made.
  - Changes nothing; runs its pings in check mode too (they are read-only). Fails, naming each
    pair, when MTU-sized DF packets do not pass between any.
version_added: "0.3.0"
author: rdmaprov developers (!UNKNOWN)
options:
  verify:
    description:
      - This host's entry of the path proof, as the probe's plan gives it (C(plan.verify) of
        M(rdmaprov.cluster.net_mtu_probe)) - C(name) (the inventory name the verdicts name),
        C(address) (the fabric address, the pings' source; empty leaves every pair out),
        C(mtu) (the packet's size; the ICMP payload is 28 bytes less), C(drift) (this host's own
        MTU change is still to be made, so check mode leaves every pair out), C(count) (packets per
        pair) and C(timeout) (seconds to wait for each reply).
      - Null (nothing to prove on this host) or, in the task, a proof the play does not ask for
        (no host of the play has anything to do and C(--tags net_mtu_verify) is not given) - the
        action plugin then skips the task.
    type: dict
  peers:
    description:
      - The peers, each C({name, address, drift}) as the peer settled it (C(drift) - its MTU
        change is still to be made); an entry without a name or an address is left out.
      - In a task, the action plugin fills it from the plans of C(net_mtu_verify_peers), else of
        the play's hosts (their registered C(_net_mtu_probe)), this host left out.
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
"""
EXAMPLES = r"""
- name: DF ping each peer with an MTU-sized packet
  rdmaprov.cluster.net_mtu_verify:
    verify: "{{ _net_mtu_probe.plan.verify }}"

- name: The same, peers given
  rdmaprov.cluster.net_mtu_verify:
    verify: {name: node2, address: 10.198.250.12, mtu: 9000, drift: false, count: 3, timeout: 2}
    peers: [{name: node1, address: 10.198.250.11, drift: false}]
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
rdmaprov_report:
  description: The verdict lines of a proof that passed (rdmaprov prints them as the host's report).
  returned: success
  type: list
  elements: str
failures:
  description: The C(msg) of every pair whose DF packets do not pass (the task then fails).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_mtu


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "verify": {"type": "dict"},
            "peers": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    v = module.params["verify"] or {}
    host, address, mtu = str(v.get("name") or "?"), str(v.get("address") or ""), v.get("mtu")
    count, timeout = int(v.get("count") or 3), int(v.get("timeout") or 2)
    ping = module.get_bin_path("ping")
    targets = netcfg_mtu.ping_targets(address, module.params["peers"], module.check_mode,
                                      bool(v.get("drift")) or not ping) if mtu else []
    report = []
    for peer in targets:
        try:
            argv = netcfg_mtu.ping_argv(address, peer["address"], mtu, count, timeout)
        except ValueError as exc:
            module.fail_json(msg="net_mtu verify: %s" % exc)
        if ping:
            rc, out, err = module.run_command([ping] + argv[1:], environ_update={"LC_ALL": "C"})
        else:
            rc, out, err = 2, "", "ping: command not found"
        report.append(netcfg_mtu.ping_verdict(host, address, peer["name"], peer["address"], mtu,
                                              rc, out, err))
    lines = [r["msg"] for r in report]
    failures = [r["msg"] for r in report if not r["ok"]]
    if failures:
        module.fail_json(msg="MTU-sized DF packets do not pass: " + "; ".join(failures),
                         report=report, lines=lines, failures=failures)
    # rdmaprov prints rdmaprov_report as the host's report (the verdicts, as the assert's were).
    module.exit_json(changed=False, report=report, lines=lines, failures=failures,
                     msg=lines or ["no peer to ping"], rdmaprov_report=lines)


if __name__ == "__main__":
    main()
