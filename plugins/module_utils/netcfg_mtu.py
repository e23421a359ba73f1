# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Pure logic of the net_mtu role: which interface carries the Ansible connection, which network
manager persists an interface's MTU, the ifupdown stanza edit, and the DF-ping verdict.

No I/O here: the role's probe module gathers the facts, these functions decide. Unit-tested in
tests/unit/test_net_mtu.py.
"""

from __future__ import annotations

import re

from ansible_collections.rdmaprov.cluster.plugins.module_utils import ranges

# Bytes an IPv4 ICMP echo adds to the payload: 20 (IPv4 header) + 8 (ICMP header).
IPV4_ICMP_OVERHEAD = 28

BACKENDS = ("netplan", "networkmanager", "networkd", "ifupdown", "ifcfg", "systemd_unit", "none")


def df_payload(mtu):
    """ICMP payload that makes an IPv4 packet of exactly `mtu` bytes (ping -s)."""
    return int(mtu) - IPV4_ICMP_OVERHEAD


def ipv4_of(ip_addr_json, ifname):
    """First global IPv4 address of `ifname`, or None."""
    for link in ip_addr_json or []:
        if link.get("ifname") != ifname:
            continue
        for info in link.get("addr_info", []):
            if info.get("family") == "inet" and info.get("scope", "global") == "global":
                return info.get("local")
    return None


def mtu_limit_error(mtu, link_type, ipoib_mode=None, declared="auto"):
    """Why `mtu` cannot be set on this host's link (sysfs link layer `link_type`, IPoIB
    `ipoib_mode`), or None when it can. The range is the one table's (ranges.py) for the link
    the host has; a `declared` link type (net_mtu's link_type) must be that link."""
    have = ranges.host_link_type(link_type, ipoib_mode)
    if declared not in (None, "", "auto") and declared != have:
        return (f"link_type is {declared} but the host's interface is {have} "
                f"(link layer {link_type or 'unknown'}, IPoIB mode {ipoib_mode or 'none'})")
    why = ranges.problem("mtu", int(mtu), have)
    if why and have.startswith("ipoib"):
        why += " (the IB port MTU of 4096 is a fabric property, reported, not set here)"
    return why


def pick_backend(probe):
    """The manager that owns an interface's configuration: (backend, reason).

    `probe` is one interface's entry from the net_mtu_probe module: which managers run, whether
    they manage this interface, which files mention it. The order follows what is the source of
    truth: netplan renders for NetworkManager or networkd, so it wins over both.
    """
    name = probe.get("name", "?")
    if probe.get("netplan_files") and probe.get("netplan_present"):
        return "netplan", f"{name}: netplan configuration in {', '.join(probe['netplan_files'])}"
    nm = probe.get("nm") or {}
    if nm.get("active") and nm.get("connection"):
        return "networkmanager", f"{name}: NetworkManager connection {nm['connection']!r}"
    nd = probe.get("networkd") or {}
    if nd.get("active") and nd.get("network_file"):
        return "networkd", f"{name}: systemd-networkd file {nd['network_file']}"
    if probe.get("ifupdown_file"):
        return "ifupdown", f"{name}: ifupdown stanza in {probe['ifupdown_file']}"
    if probe.get("ifcfg_file"):
        return "ifcfg", f"{name}: {probe['ifcfg_file']}"
    checked = [
        "netplan (/etc/netplan/*.yaml)",
        "NetworkManager (" + ("active, but no connection for it" if nm.get("active") else "not running") + ")",
        "systemd-networkd (" + ("active, but no .network file matches it" if nd.get("active")
                                else "not running") + ")",
        "ifupdown (no 'iface " + name + "' stanza)",
        "RHEL ifcfg (no ifcfg-" + name + ")",
    ]
    return None, (f"{name}: no network manager recognised to persist its MTU; checked "
                  + "; ".join(checked)
                  + ". Set net_mtu_persist to systemd_unit (a boot-time oneshot) or none.")


_IFACE_RE = re.compile(r"^\s*iface\s+(\S+)\s+")
_STANZA_START = re.compile(r"^\s*(iface|auto|allow-\S+|mapping|source|source-directory|rename)\b")
_MTU_LINE = re.compile(r"^(\s*)mtu\s+\S+\s*$")


def ifupdown_set_mtu(text, iface, mtu):
    """Set `mtu N` in every `iface IFACE ...` stanza of an interfaces(5) file; returns new text.

    Only the option lines inside the interface's stanzas are touched; other stanzas, comments and
    blank lines stay byte for byte.
    """
    lines = text.splitlines(keepends=True)
    out = []
    in_stanza = False
    seen_mtu = False
    indent = "    "

    def close():
        if in_stanza and not seen_mtu:
            # Insert before trailing blank lines so the stanza stays one block.
            tail = []
            while out and out[-1].strip() == "":
                tail.insert(0, out.pop())
            out.append(f"{indent}mtu {mtu}\n")
            out.extend(tail)

    for line in lines:
        if _STANZA_START.match(line):
            close()
            match = _IFACE_RE.match(line)
            in_stanza = bool(match and match.group(1) == iface)
            seen_mtu = False
            out.append(line)
            continue
        if in_stanza:
            mline = _MTU_LINE.match(line)
            if mline:
                seen_mtu = True
                out.append(f"{mline.group(1)}mtu {mtu}\n")
                continue
            if line.strip() and not line.lstrip().startswith("#"):
                indent = line[: len(line) - len(line.lstrip())] or indent
        out.append(line)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    close()
    return "".join(out)


def ping_verdict(src, src_addr, dst, dst_addr, mtu, rc, stdout, stderr):
    """One DF ping's result as a report entry: ok, and a sentence naming the pair when not."""
    payload = df_payload(mtu)
    text = f"{stdout}\n{stderr}"
    ok = rc == 0
    if ok:
        why = ""
    else:
        m = re.search(r"mtu\s*=\s*(\d+)", text)
        if "message too long" in text.lower() or m:
            why = ("the sender's own path MTU is smaller"
                   + (f" (kernel reports mtu={m.group(1)})" if m else ""))
        elif re.search(r"100% packet loss", text):
            why = "no reply: a hop on the path (switch port, bridge, the peer's interface) drops the frame"
        else:
            why = (stderr or stdout).strip().splitlines()[-1] if (stderr or stdout).strip() else f"rc={rc}"
    return {
        "src": src, "src_addr": src_addr, "dst": dst, "dst_addr": dst_addr, "mtu": int(mtu),
        "payload": payload, "ok": ok,
        "msg": (f"{src} ({src_addr}) -> {dst} ({dst_addr}): {mtu}-byte DF packets "
                + ("pass" if ok else f"do NOT pass (ping -M do -s {payload}): {why}")),
    }


def mtu_drift(wanted, probed):
    """Names of wanted interfaces whose runtime MTU differs (or that do not exist)."""
    current = {p.get("name"): p.get("mtu") for p in probed or []}
    return [w["name"] for w in wanted or [] if current.get(w["name"]) != int(w["mtu"])]


def ping_pair(result, src, src_addr, peer_addrs, mtu):
    """One looped `ping` task result (item = peer name) → ping_verdict for that pair."""
    dst = result.get("item")
    return ping_verdict(src, src_addr, dst, (peer_addrs or {}).get(dst), mtu, result.get("rc"),
                        result.get("stdout", ""), result.get("stderr", ""))
