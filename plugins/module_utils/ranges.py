# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The one table of value ranges: which of our variables holds which kind of number, and the
range of each kind (the MTU's depends on the link type); and the few strings and mappings that
have a form beyond their type (FORMS).

Pure Python, no imports: the control host's input check (rdmaprov/inventory.py through
input_check.py), the validate_inventory entry point, the roles' filters and modules on the
nodes, and ``rdmaprov check`` (which must not import Ansible) all read this one table.
"""

from __future__ import annotations

MTU_MIN = 68
# The largest MTU of each link type. Ethernet: what data-centre switches carry (9216). IPoIB
# in datagram mode carries the IB MTU (4096) less its 4-byte header; connected mode up to 65520.
MTU_MAX = {"ethernet": 9216, "ipoib_datagram": 4092, "ipoib_connected": 65520}
# net_mtu's link_type option: auto is the host's own link, judged on the host; on the control
# host, where the link is not known, auto gets Ethernet's range (the usual fabric).
LINK_TYPES = ("auto", "ethernet", "ipoib_datagram", "ipoib_connected")

# kind -> (lowest, highest, what it is)
KINDS = {
    "mtu": (MTU_MIN, MTU_MAX["ethernet"], "MTU"),
    "pfc_priority": (0, 7, "PFC priority"),
    "priority": (0, 7, "802.1p priority"),
    "dscp": (0, 63, "DSCP value"),
    "tos": (0, 255, "ToS value"),
    "ib_tc": (-1, 255, "traffic class (-1 for none)"),
    "port": (1, 65535, "TCP/UDP port"),
    # A port, or a "LOW-HIGH" range of ports (firewall_allow[].port).
    "port_range": (1, 65535, "TCP/UDP port or LOW-HIGH range"),
}

# Our variables and sub-options (VAR[].KEY: the KEY of each element of the list VAR) that hold
# a ranged number. A list variable's range applies to each element.
VARIABLES = {
    "net_mtu_default": "mtu",
    "net_mtu_interfaces[].mtu": "mtu",
    "net_mtu_interfaces_group[].mtu": "mtu",
    "net_mtu_interfaces_host[].mtu": "mtu",
    "roce_qos_pfc_priority": "pfc_priority",
    "roce_qos_cnp_priority": "priority",
    "roce_qos_dscp": "dscp",
    "roce_qos_cnp_dscp": "dscp",
    "nccl_env_ib_tc": "ib_tc",
    "firewall_ssh_port": "port",
    "firewall_roce_udp_port": "port",
    "firewall_rendezvous_ports": "port",
    "firewall_allow[].port": "port_range",
    "ansible_port": "port",
}

# Our variables whose value has a form beyond its type (checked with the ranges, the same way):
# name -> (form, what it must be).
FORMS = {
    "nccl_env_conf_path": ("absolute_path", "an absolute path"),
    "nccl_env_extra": ("nccl_keys", "a mapping whose keys are NCCL_* names (NCCL_[A-Z0-9_]+)"),
}


def form_problem(name, value):
    """Why ``value`` of variable ``name`` does not have its form (FORMS), or None."""
    if name not in FORMS or value is None:
        return None
    form, what = FORMS[name]
    if form == "absolute_path":
        ok = isinstance(value, str) and value.startswith("/")
        return None if ok else "%r is not %s" % (value, what)
    if not isinstance(value, dict):
        return None  # not a mapping: the type check reports it
    bad = sorted(str(k) for k in value if not _nccl_name(str(k)))
    return "%s: keys %s are not NCCL_* names" % (what, ", ".join(bad)) if bad else None


def _nccl_name(key):
    rest = key[len("NCCL_"):] if key.startswith("NCCL_") else ""
    return bool(rest) and all(c.isupper() or c.isdigit() or c == "_" for c in rest)


# The key of a list element that says which link an MTU is for.
LINK_KEY = "link_type"


def kind_of(name):
    """The kind of number ``name`` (a variable, VAR[].KEY, or a kind's own name) holds."""
    if name in VARIABLES:
        return VARIABLES[name]
    return name if name in KINDS else None


def bounds(kind, link_type=None):
    """(lowest, highest, what) of a kind; an MTU's highest depends on the link type."""
    low, high, what = KINDS[kind]
    if kind == "mtu" and link_type in MTU_MAX:
        high = MTU_MAX[link_type]
        what = "MTU for " + link_type.replace("_", " ").replace("ipoib", "IPoIB")
    return low, high, what


def problem(kind, value, link_type=None):
    """Why ``value`` (already of its argument-spec type) is out of range for ``kind``, or
    None. A bool is judged as the integer Ansible takes it for, and said to be one."""
    low, high, what = bounds(kind, link_type)
    if kind == "port_range" and isinstance(value, str):
        text = value.strip()
        first, sep, last = text.replace(":", "-").partition("-")
        if first.isdigit() and (not sep or last.isdigit()):
            lo, hi = int(first), int(last or first)
            if low <= lo <= hi <= high:
                return None
        return "%r is not a %s (%d..%d)" % (value, what, low, high)
    if kind == "port_range":
        what = KINDS["port"][2]
    if isinstance(value, bool):
        number = int(value)
        shown = "%s (a boolean, which Ansible takes as %d)" % (str(value).lower(), number)
    elif isinstance(value, int):
        number, shown = value, str(value)
    else:
        return None  # not a number: the type check reports it
    if low <= number <= high:
        return None
    return "%s is not a valid %s (%d..%d)" % (shown, what, low, high)


def host_link_type(link_layer, ipoib_mode=None):
    """Our link type of a host's interface from its facts (sysfs link layer and IPoIB mode)."""
    if link_layer == "infiniband":
        return "ipoib_connected" if ipoib_mode == "connected" else "ipoib_datagram"
    return "ethernet"


def problems(values):
    """["NAME: why"] for the ranged variables among ``values`` (name -> value; a string of
    digits, as INI gives it, is taken as its number)."""
    out = []
    for name in sorted(values):
        kind = kind_of(name)
        value = values[name]
        why = form_problem(name, value)
        if why:
            out.append("%s: %s" % (name, why))
        if kind is None or value is None:
            continue
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        elif isinstance(value, float) and value.is_integer():
            value = int(value)  # as Ansible converts it for an int option
        if not isinstance(value, (int, str)):
            out.append("%s: %r is not a number" % (name, value))
            continue
        why = problem(kind, value)
        if why is None and isinstance(value, str) and kind != "port_range":
            why = "%r is not a number" % value
        if why:
            out.append("%s: %s" % (name, why))
    return out
