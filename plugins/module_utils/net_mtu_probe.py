# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Read-only probe of the net_mtu role (module net_mtu_probe): interfaces, the interface
carrying the connection, and the network manager of each. The decisions are netcfg_mtu.plan()'s,
which the module runs on these facts."""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import subprocess

from ansible_collections.rdmaprov.cluster.plugins.module_utils import ssh_session


def run(argv):
    if not shutil.which(argv[0]):
        return None
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"},
                          check=False)
    return proc.returncode, proc.stdout, proc.stderr


def active(unit):
    res = run(["systemctl", "is-active", unit])
    return bool(res and res[1].strip() == "active")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def owner_of(addrs, address):
    for link in addrs:
        for info in link.get("addr_info", []):
            if info.get("local") == address:
                return link.get("ifname")
    return None


def ipv4_of(addrs, name):
    for link in addrs:
        if link.get("ifname") == name:
            for info in link.get("addr_info", []):
                if info.get("family") == "inet" and info.get("scope", "global") == "global":
                    return info.get("local")
    return None


def probe(conn_addr, ifaces):
    res = run(["ip", "-j", "addr", "show"])
    if not res or res[0] != 0:
        if ifaces:
            return {"error": "ip -j addr show failed: is iproute2 installed?"}
        # No interface to read or set: a host without iproute2 (a container or a minimal
        # image under a local connection) has nothing for this role to do, not a failure.
        return {"connection_iface": None, "control_ip": ssh_session.endpoints()[0],
                "interfaces": [], "ping": shutil.which("ping"),
                "apt": bool(shutil.which("apt-get"))}
    addrs = json.loads(res[1] or "[]")
    res = run(["ip", "-j", "-d", "link", "show"])
    links = {lk["ifname"]: lk for lk in json.loads(res[1] or "[]")} if res and res[0] == 0 else {}

    control_ip, server_ip = ssh_session.endpoints()
    conn_iface = owner_of(addrs, server_ip) if server_ip else None
    if conn_iface is None and conn_addr:
        try:
            conn_iface = owner_of(addrs, socket.getaddrinfo(conn_addr, None)[0][4][0])
        except OSError:
            pass

    nm_active, nd_active = active("NetworkManager"), active("systemd-networkd")
    netplan_present = bool(shutil.which("netplan"))
    netplan_yaml = sorted(glob.glob("/etc/netplan/*.yaml"))
    ifupdown_files = ["/etc/network/interfaces"] + sorted(glob.glob("/etc/network/interfaces.d/*"))

    out = []
    for name in ifaces:
        link = links.get(name)
        entry = {"name": name, "exists": link is not None, "mtu": link.get("mtu") if link else None,
                 "link_type": link.get("link_type") if link else None,
                 "ipoib_mode": (read(f"/sys/class/net/{name}/mode") or "").strip() or None,
                 "ipv4": ipv4_of(addrs, name), "netplan_present": netplan_present,
                 "nm": {"active": nm_active}, "networkd": {"active": nd_active},
                 "ifupdown_file": None, "ifupdown_text": None, "ifcfg_file": None,
                 "ifcfg_text": None}
        word = re.compile(r"(^|[\s:\"'])" + re.escape(name) + r"($|[\s:\"'])", re.M)
        entry["netplan_files"] = [p for p in netplan_yaml if word.search(read(p) or "")]
        if nm_active:
            r = run(["nmcli", "-g", "GENERAL.CONNECTION", "device", "show", name])
            conn = r[1].strip() if r and r[0] == 0 else ""
            entry["nm"]["connection"] = conn or None
            if conn:
                key = "infiniband.mtu" if entry["link_type"] == "infiniband" else "802-3-ethernet.mtu"
                r = run(["nmcli", "-g", key, "connection", "show", conn])
                entry["nm"]["setting_key"] = key
                entry["nm"]["mtu_setting"] = r[1].strip() if r and r[0] == 0 else None
        if nd_active:
            r = run(["networkctl", "status", "--no-pager", name])
            m = re.search(r"Network File:\s*(\S+)", r[1]) if r and r[0] == 0 else None
            entry["networkd"]["network_file"] = m.group(1) if m and m.group(1) != "n/a" else None
        stanza = re.compile(r"^\s*iface\s+" + re.escape(name) + r"\s", re.M)
        for path in ifupdown_files:
            text = read(path)
            if text and stanza.search(text):
                entry["ifupdown_file"], entry["ifupdown_text"] = path, text
                break
        ifcfg = f"/etc/sysconfig/network-scripts/ifcfg-{name}"
        if os.path.isfile(ifcfg):
            entry["ifcfg_file"], entry["ifcfg_text"] = ifcfg, read(ifcfg)
        out.append(entry)

    return {"connection_iface": conn_iface, "control_ip": control_ip, "interfaces": out,
            "ping": shutil.which("ping"), "apt": bool(shutil.which("apt-get"))}
