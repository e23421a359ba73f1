# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Pure logic of the firewall role: backend choice, the NCCL/ephemeral port range, and reading
`nft -j list table` back. Unit-tested in tests/unit/test_firewall_logic.py."""

from __future__ import annotations

import ipaddress
import json
import re

BACKENDS = ("nftables", "firewalld", "ufw")


def pick_backend(choice, firewalld_active, ufw_active, nft_present):
    """(backend, reason). An active firewalld or ufw owns the host's netfilter policy: writing
    our own nftables table beside it would work, but the host's admin manages it with their tool."""
    if choice != "auto":
        return choice, f"chosen: firewall_backend={choice}"
    if firewalld_active:
        return "firewalld", "firewalld is running"
    if ufw_active:
        return "ufw", "ufw is active"
    if nft_present:
        return "nftables", "neither firewalld nor ufw is active; nft is installed"
    return None, ("no firewall backend found: firewalld and ufw are not active and nft is not "
                  "installed (install nftables or set firewall_backend)")


def port_range(value, local_port_range):
    """NCCL's bootstrap and socket transport listen on ephemeral ports (bind to port 0), so the
    range to open is the kernel's net.ipv4.ip_local_port_range unless pinned. → (low, high)."""
    if value == "auto":
        low, high = (int(x) for x in str(local_port_range).split())
    else:
        parts = str(value).replace(":", "-").split("-")
        low, high = int(parts[0]), int(parts[-1])
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"port range {low}-{high} is not within 1..65535")
    return low, high


def normalise_subnets(subnets):
    """Validated, de-duplicated CIDRs split by family: {'ipv4': [...], 'ipv6': [...]}."""
    out = {"ipv4": [], "ipv6": []}
    for s in subnets or []:
        net = ipaddress.ip_network(str(s), strict=False)
        key = "ipv4" if net.version == 4 else "ipv6"
        if str(net) not in out[key]:
            out[key].append(str(net))
    return out


def control_host_allowed(control_ip, subnets):
    """Is the control host's address inside one of the declared subnets?"""
    if not control_ip:
        return False
    addr = ipaddress.ip_address(control_ip)
    return any(addr in ipaddress.ip_network(s, strict=False) for s in subnets or [])


def nft_table_summary(text):
    """`nft -j list table inet NAME` → {'chains': [...], 'rules': N, 'sets': [...]} (None if absent)."""
    if not (text or "").strip():
        return None
    data = json.loads(text)
    chains, sets, rules = [], [], 0
    for item in data.get("nftables", []):
        if "chain" in item:
            c = item["chain"]
            chains.append({"name": c.get("name"), "hook": c.get("hook"), "policy": c.get("policy")})
        elif "set" in item:
            sets.append(item["set"].get("name"))
        elif "rule" in item:
            rules += 1
    return {"chains": chains, "rules": rules, "sets": sets}


def port_specs(tcp_ports, udp_port):
    """[{port, proto}] for backends that take one port (or LOW-HIGH range) per rule."""
    specs = [{"port": str(p), "proto": "tcp"} for p in tcp_ports or []]
    specs.append({"port": str(udp_port), "proto": "udp"})
    return specs


_HASH_RE = re.compile(r'comment\s+"rdmaprov sha1=([0-9a-f]{40})"')


def live_hash(nft_list_text):
    """The ruleset fingerprint the role wrote into the live table's comment, or ''."""
    match = _HASH_RE.search(nft_list_text or "")
    return match.group(1) if match else ""
