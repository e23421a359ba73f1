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


# The settings module_plan reads: the rdma_modules_* variables without the prefix, what
# preflight saw (has_gpus, has_hcas) and the managed-file header (managed); the kernel_modules
# action plugin fills them (role_settings: the role's variables, FACTS, CONTEXT).
MODULE_SETTINGS = ("base", "ipoib", "peermem", "peermem_name", "extra", "group_extra",
                   "host_extra", "load", "verify_uverbs", "has_gpus", "has_hcas", "load_conf",
                   "modprobe_conf", "managed")

# What each file of the set says about itself under the managed-file header, by the lines it
# carries (file_lines' kind).
FILE_NOTES = {
    "names": "# RDMA kernel modules loaded at boot by systemd-modules-load"
             " (rdmaprov.cluster.rdma_modules).",
    "options": "# Options of the RDMA kernel modules (rdmaprov.cluster.rdma_modules). modprobe"
               " runs the `install`\n# lines of this directory in a shell: a value never breaks"
               " its line.",
}


def managed_comment(managed: str) -> str:
    """The managed-file header as a comment, as Ansible's C(comment) filter writes
    C({{ ansible_managed | comment }}): a line C(#), each line of it after C(# ) (a line C(#)
    where one is empty before another), a line C(#)."""
    text = ("# " + managed.replace("\n", "\n# ")).replace("# \n", "#\n")
    return f"#\n{text}\n#"


def module_files(s: dict) -> list[dict]:
    """The files that name the set (kernel_modules' persist entries): the modules-load.d file
    (load_conf) and the modprobe.d file (modprobe_conf), each the header and its note, the set's
    lines appended; a file whose path is empty is not kept."""
    managed = managed_comment(s["managed"])
    return [{"path": path, "content": f"{managed}\n{FILE_NOTES[kind]}", "append": kind,
             "mode": "0644"}
            for path, kind in ((s["load_conf"], "names"), (s["modprobe_conf"], "options"))
            if path]


def module_plan(s: dict) -> dict:
    """The rdma_modules role's plan: the merged set (modules), its names in order, whether to
    load them (load), whether to require /dev/infiniband/uverbs* (require_uverbs: asked for,
    on a host with HCAs) and the files that name the set (files: module_files())."""
    entries = module_set(s)
    return {"modules": entries, "names": [e["name"] for e in entries], "load": bool(s["load"]),
            "require_uverbs": bool(s["verify_uverbs"] and s["has_hcas"]),
            "files": module_files(s)}
