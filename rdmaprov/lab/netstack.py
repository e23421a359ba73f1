"""The network stacks a lab node can run, so that a site's own stack owns the fabric interface.

`lab up --netstack nm|netplan|ifupdown` installs the stack from the lab's apt repository into a
cached overlay layer shared by the nodes, and gives each node a configuration in which that stack
brings up eth1 (its address) at boot. eth0 (management, SSH) stays configured from outside, as a
lab's out-of-band path: a stack that took it over could cut the lab's own access. `none` is the
plain node: eth1's address is set from outside too, and nothing persists an MTU but rdmaprov.
"""

from __future__ import annotations

NETSTACKS = ("none", "nm", "netplan", "ifupdown")

# Debian packages per stack. Names marked optional exist only in some suites (trixie splits
# systemd-networkd out of systemd; bookworm's systemd carries it).
PACKAGES: dict[str, tuple[str, ...]] = {
    "none": (),
    "nm": ("network-manager",),
    "netplan": ("netplan.io", "systemd-networkd"),
    "ifupdown": ("ifupdown",),
}
OPTIONAL = frozenset({"systemd-networkd"})

# Units the layer enables (package scripts do not enable them all in a chroot, or at all).
UNITS: dict[str, tuple[str, ...]] = {
    "none": (),
    "nm": ("NetworkManager.service",),
    "netplan": ("systemd-networkd.service",),
    "ifupdown": ("networking.service",),
}

# Files every node of a stack shares (in the layer). NetworkManager would otherwise take eth0
# over with a DHCP profile of its own ("Wired connection 1") and drop the lab's SSH address.
LAYER_FILES: dict[str, dict[str, tuple[str, int]]] = {
    "nm": {
        "etc/NetworkManager/conf.d/90-rdmaprov-lab.conf": (
            "# rdmaprov lab: eth0 is the lab's management path, set from outside.\n"
            "[main]\nno-auto-default=*\n\n[keyfile]\nunmanaged-devices=interface-name:eth0\n",
            0o644),
    },
}


# Per stack: a command run in a node whose output shows the stack owns eth1, and what that output
# holds once it has brought eth1 up. NetworkManager passes through "connecting (checking IP
# connectivity)" before "connected": a lab is up only once the stack is done, as after a boot.
OWNS: dict[str, tuple[tuple[str, ...], str]] = {
    "nm": (("nmcli", "-g", "GENERAL.STATE,GENERAL.CONNECTION", "device", "show", "eth1"),
           "(connected)\nfabric"),
    "netplan": (("networkctl", "status", "--no-pager", "eth1"), "10-netplan-eth1.network"),
    "ifupdown": (("ifquery", "--state", "eth1"), "eth1=eth1"),
    "none": (("ip", "-br", "addr", "show", "eth1"), "/24"),
}


def all_packages() -> tuple[str, ...]:
    """Every stack's packages, for the lab's apt repository."""
    return tuple(p for stack in NETSTACKS for p in PACKAGES[stack])


def node_files(netstack: str, iface: str, address: str) -> dict[str, tuple[str, int]]:
    """Path below the node's root → (content, mode): the stack's own configuration of `iface`
    with `address` (CIDR), as the site's installer would have written it."""
    if netstack == "nm":
        text = (f"[connection]\nid=fabric\ntype=ethernet\ninterface-name={iface}\n"
                "autoconnect=true\n\n[ethernet]\n\n"
                f"[ipv4]\nmethod=manual\naddress1={address}\n\n[ipv6]\nmethod=disabled\n")
        return {"etc/NetworkManager/system-connections/fabric.nmconnection": (text, 0o600)}
    if netstack == "netplan":
        text = ("# The fabric interface (rdmaprov lab up --netstack netplan)\n"
                "network:\n  version: 2\n  renderer: networkd\n  ethernets:\n"
                f"    {iface}:\n      addresses: [{address}]\n")
        return {"etc/netplan/50-fabric.yaml": (text, 0o600)}
    if netstack == "ifupdown":
        text = ("# The fabric interface (rdmaprov lab up --netstack ifupdown)\n"
                "source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n\n"
                f"auto {iface}\niface {iface} inet static\n    address {address}\n")
        return {"etc/network/interfaces": (text, 0o644)}
    return {}
