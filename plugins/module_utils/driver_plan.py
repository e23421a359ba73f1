# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Decisions of the preflight and driver roles: which interface carries the Ansible connection
(on the control host), and the rdma_modules role's module set (module kernel_modules, option
settings): the layered kernel-module lists and the peer-memory rule merged into one, and the
lines of the files that name it."""

from __future__ import annotations

import ipaddress
import re
import socket

from ansible_collections.rdmaprov.cluster.plugins.module_utils import ssh_session

_MODULE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
# modprobe runs the `install` lines of /etc/modprobe.d in a shell: a value never breaks its line.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _ip(text: str | None):
    try:
        return ipaddress.ip_address((text or "").split("%", 1)[0])
    except ValueError:
        return None


def _addresses(facts: dict, iface: str) -> list:
    data = facts.get(iface.replace("-", "_").replace(".", "_").replace(":", "_")) or facts.get(iface) or {}
    found = []
    if isinstance(data.get("ipv4"), dict):
        found.append(data["ipv4"].get("address"))
    for extra in data.get("ipv4_secondaries") or []:
        found.append(extra.get("address"))
    for extra in data.get("ipv6") or []:
        found.append(extra.get("address"))
    return [ip for ip in (_ip(a) for a in found) if ip is not None]


def interface_holding(facts: dict, address) -> str | None:
    """The interface that holds ``address`` (an IP, as text or parsed) in Ansible's network
    facts (ipv4, its secondaries, ipv6), or None; a name that is not an IP holds nothing."""
    ip = address if not isinstance(address, str) else _ip(address)
    if ip is None:
        return None
    for name in facts.get("interfaces") or []:
        if ip in _addresses(facts, name):
            return name
    return None


def connection_interface(facts: dict, ansible_host: str | None = None,
                         connection: str | None = None) -> dict:
    """The interface carrying the Ansible connection: {"name", "address", "method"}.

    Tried in order: the server side of SSH_CONNECTION (what sshd saw), the address ansible_host
    names (resolved here, on the control host), the interface of the default IPv4 route.
    """
    if connection == "local":
        return {"name": None, "address": None, "method": "local connection: no interface"}
    candidates = []
    _client, server = ssh_session.endpoints((facts.get("env") or {}).get("SSH_CONNECTION") or "")
    if server is not None:
        candidates.append(("SSH_CONNECTION", _ip(server)))
    if ansible_host:
        host_ip = _ip(ansible_host)
        if host_ip is None:
            try:
                host_ip = _ip(socket.getaddrinfo(ansible_host, None)[0][4][0])
            except (OSError, IndexError):
                host_ip = None
        candidates.append(("ansible_host", host_ip))
    for method, ip in candidates:
        name = interface_holding(facts, ip)
        if name:
            return {"name": name, "address": str(ip), "method": method}
    default = facts.get("default_ipv4") or {}
    if default.get("interface"):
        return {"name": default["interface"], "address": default.get("address"),
                "method": "default IPv4 route"}
    return {"name": None, "address": None, "method": "unknown"}


def _entry(item) -> dict:
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict) or not item.get("name"):
        raise ValueError(f"a module entry needs a name: {item!r}")
    name = str(item["name"])
    if not _MODULE_NAME.match(name):
        raise ValueError(f"not a kernel module name: {name!r}")
    state = item.get("state", "present")
    if state not in ("present", "absent"):
        raise ValueError(f"{name}: state must be present or absent, not {state!r}")
    out = {"name": name, "state": state}
    if item.get("options") not in (None, ""):
        out["options"] = str(item["options"])
    return out


def combine_modules(*layers) -> list[dict]:
    """Merge layered module lists (role base, all, group, host) into one ordered list.

    Entries are names or {name, state: present|absent, options}. A later layer's entry for a
    name overrides the earlier one's fields; `absent` drops the name from the result. Order is
    that of first appearance, so the base set keeps its dependency order.
    """
    merged: dict[str, dict] = {}
    for layer in layers:
        for item in layer or []:
            entry = _entry(item)
            key = entry["name"].replace("-", "_")
            if key in merged:
                merged[key].update(entry)
            else:
                merged[key] = entry
    return [e for e in merged.values() if e["state"] == "present"]


def wants_peermem(peermem: str, has_gpus: bool) -> bool:
    """Whether the peer-memory module (rdma_modules_peermem_name) is in the set: C(present), or
    C(auto) on a host where preflight saw NVIDIA GPUs. C(absent) (and C(auto) without GPUs)
    leaves it out of the files; GPUDirect over DMA-BUF needs no peer-memory module, and this
    rule does not try to tell the two apart."""
    return peermem == "present" or (peermem == "auto" and bool(has_gpus))


def module_set(s: dict) -> list[dict]:
    """The rdma_modules role's module set from its settings (the rdma_modules_* variables
    without the prefix, has_gpus): the base set, ib_ipoib where asked, the peer-memory module
    (present or absent, by wants_peermem), then the extra, group and host layers, merged by
    combine_modules (a ValueError names a bad entry)."""
    peermem = {"name": s["peermem_name"],
               "state": "present" if wants_peermem(s["peermem"], s["has_gpus"]) else "absent"}
    return combine_modules(s["base"], ["ib_ipoib"] if s["ipoib"] else [], [peermem],
                           s["extra"], s["group_extra"], s["host_extra"])


def file_lines(entries: list[dict], kind: str) -> str:
    """The lines a file of the set carries after its header: C(names) one module a line
    (modules-load.d), C(options) one C(options <name> <options>) line per module that has
    options, or a comment that there are none (modprobe.d). A control character becomes a space."""
    if kind == "names":
        return "".join(f"{_CONTROL.sub(' ', e['name'])}\n" for e in entries)
    lines = [f"options {_CONTROL.sub(' ', e['name'])} {_CONTROL.sub(' ', e['options'])}\n"
             for e in entries if e.get("options") is not None]
    return "".join(lines) or "# (no options set)\n"


# The settings module_plan reads: the rdma_modules_* variables without the prefix (the
# kernel_modules action plugin fills them from the role's variables), and what preflight saw
# (has_gpus, has_hcas), which the role gives.
MODULE_SETTINGS = ("base", "ipoib", "peermem", "peermem_name", "extra", "group_extra",
                   "host_extra", "load", "verify_uverbs", "has_gpus", "has_hcas")


def module_plan(s: dict) -> dict:
    """The rdma_modules role's plan: the merged set (modules), its names in order, whether to
    load them (load) and whether to require /dev/infiniband/uverbs* (require_uverbs: asked for,
    on a host with HCAs)."""
    entries = module_set(s)
    return {"modules": entries, "names": [e["name"] for e in entries], "load": bool(s["load"]),
            "require_uverbs": bool(s["verify_uverbs"] and s["has_hcas"])}
