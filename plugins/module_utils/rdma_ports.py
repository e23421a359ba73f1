# Copyright: rdmaprov developers
# Apache-2.0
"""The one reader of RDMA ports in sysfs: state, link layer, rate, netdev, counters.

Standard library only and no import of its own package, because it runs in three places: under
rdma_sysfs (the rdma_facts module, `rdmaprov probe`, `check`), beside the validation worker on a
host or in a job's container, where the worker reads its ports with it, and as a script there
(``python3 rdma_ports.py``), which prints the ports and their counters as one JSON document
before and after a run (counters_before.json / counters_after.json, which the control host's
judge reads). Attribute formats are the kernel's drivers/infiniband/core/sysfs.c: state
"4: ACTIVE", rate "400 Gb/sec (4X NDR)".

RDMAPROV_SYSFS_ROOT (default /sys) points the script at a fixture sysfs tree.
"""

from __future__ import annotations

import json
import os
import re
import sys

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
_NUMBERED = re.compile(r"^\s*(\d+)\s*:\s*(.*?)\s*$")
IB_CLASS = "class/infiniband"

# What a run's before/after snapshot carries: traffic, and every counter of the error classes
# of link_counters.CLASSES (the pre-job check's rule, which judges the run's deltas too; this
# file cannot import it where it runs alone, so tests/cli/test_validate_judge.py holds the two
# together).
RUN_COUNTERS = (
    ("counters", ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
                  "symbol_error", "link_downed", "link_error_recovery",
                  "local_link_integrity_errors", "port_rcv_errors",
                  "excessive_buffer_overrun_errors", "port_rcv_remote_physical_errors",
                  "port_xmit_discards")),
    ("hw_counters", ("out_of_sequence", "packet_seq_err", "implied_nak_seq_err",
                     "local_ack_timeout_err", "rnr_nak_retry_err")),
)


def read(path):
    """A sysfs attribute's text without the trailing newline; None if absent or unreadable
    (an unpopulated GID's gid_attrs entry answers EINVAL, which lands here too)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def parse_rate(text):
    """'400 Gb/sec (4X NDR)' -> 400; '2.5 Gb/sec (1X SDR)' -> 2.5; garbage -> None."""
    m = _RATE.match(text or "")
    if not m:
        return None
    value = float(m.group(1))
    return int(value) if value.is_integer() else value


def parse_state(text):
    """'4: ACTIVE' -> 'ACTIVE' (the name after the number, as sysfs prints it)."""
    m = _NUMBERED.match(text or "")
    if not m:
        return (text or "").strip() or None
    return m.group(2) or None


def port_netdev(ib_dir, device, port):
    """The netdev of a port: the default GID's ndev (which names the bond for RoCE LAG), else
    the PCI function's netdev whose dev_port is port-1 (how rdma-core's ibdev2netdev maps them),
    else the function's only netdev (IPoIB, or RoCE with an empty GID table)."""
    base = os.path.join(ib_dir, device)
    ndev = read(os.path.join(base, "ports", str(port), "gid_attrs/ndevs/0"))
    if ndev:
        return ndev
    candidates = sorted(listdir(os.path.join(base, "device/net")))
    for name in candidates:
        dev_port = read(os.path.join(base, "device/net", name, "dev_port"))
        if dev_port is not None and dev_port.isdigit() and int(dev_port) == port - 1:
            return name
    return candidates[0] if len(candidates) == 1 else None


def normalise_gid_type(raw, link_layer):
    """sysfs says 'IB/RoCE v1' for both IB and RoCE v1 GIDs; the link layer tells them apart."""
    if raw is None:
        return None
    if raw == "IB/RoCE v1":
        return "IB" if link_layer == "InfiniBand" else "RoCE v1"
    return raw


def gid_kind(gid):
    """'ipv4-mapped' (::ffff:a.b.c.d), 'link-local' (fe80::/64), 'zero', 'invalid' or 'ipv6'."""
    groups = gid.lower().split(":")
    if len(groups) != 8:
        return "invalid"
    if gid.lower() == ZERO_GID:
        return "zero"
    if groups[:6] == ["0000"] * 5 + ["ffff"]:
        return "ipv4-mapped"
    if groups[0] == "fe80" and groups[1:4] == ["0000"] * 3:
        return "link-local"
    return "ipv6"


def read_gids(port_dir, link_layer):
    """The port's populated GIDs in index order: index, gid, type (normalise_gid_type) and the
    netdev it belongs to (RoCE)."""
    gids = []
    for index in sorted((n for n in listdir(os.path.join(port_dir, "gids")) if n.isdigit()),
                        key=int):
        gid = (read(os.path.join(port_dir, "gids", index)) or "").lower()
        if not gid or gid_kind(gid) in ("zero", "invalid"):
            continue
        raw_type = read(os.path.join(port_dir, "gid_attrs/types", index))
        entry = {"index": int(index), "gid": gid,
                 "type": normalise_gid_type(raw_type, link_layer)}
        ndev = read(os.path.join(port_dir, "gid_attrs/ndevs", index))
        if ndev:
            entry["netdev"] = ndev
        gids.append(entry)
    return gids


def roce_gid_index(ib_dir, device, port):
    """The GID index a RoCE connection of ours needs (ib_write_bw's -x): a RoCE v2 GID, an
    IPv4-mapped one first (what NCCL picks by default); None on InfiniBand or when none is."""
    port_dir = os.path.join(ib_dir, device, "ports", str(port))
    link_layer = read(os.path.join(port_dir, "link_layer"))
    if (link_layer or "").lower() != "ethernet":
        return None
    found = [(0 if gid_kind(g["gid"]) == "ipv4-mapped" else 1, g["index"])
             for g in read_gids(port_dir, link_layer) if g["type"] == "RoCE v2"]
    return min(found)[1] if found else None


def counters(path, names=None):
    """Integer counters of one directory; 'N/A (no PMA)' and other non-numbers are left out."""
    found = {}
    for name in sorted(listdir(path)):
        if names is not None and name not in names:
            continue
        text = read(os.path.join(path, name))
        if text is not None and text.isdigit():
            found[name] = int(text)
    return found


def pci_function(dev_dir, link=None):
    """The PCI address of the device (link None) or of its SR-IOV parent (link "physfn")."""
    path = os.path.join(dev_dir, "device", *([link] if link else []))
    if link and not os.path.exists(path):
        return None
    name = os.path.basename(os.path.realpath(path))
    return name if ":" in name else None


def port_numbers(ib_dir, device):
    return sorted(int(n) for n in listdir(os.path.join(ib_dir, device, "ports")) if n.isdigit())


def ports(ib_dir="/sys/" + IB_CLASS, with_counters=True):
    """Every port of every RDMA device under ``ib_dir`` (/sys/class/infiniband): device, port,
    state, link_layer, rate (the kernel's text), rate_gbps (its number, None when unknown),
    netdev, and with ``with_counters`` the run's counters (RUN_COUNTERS, one flat dict) and the
    PCI function, SR-IOV parent and the card's sys_image_guid (VFs of one PF, and the functions
    of one port on a multi-host card, share one wire; the judge counts it once)."""
    out = []
    for device in sorted(listdir(ib_dir)):
        for port in port_numbers(ib_dir, device):
            port_dir = os.path.join(ib_dir, device, "ports", str(port))
            rate = read(os.path.join(port_dir, "rate"))
            entry = {"device": device, "port": port,
                     "state": parse_state(read(os.path.join(port_dir, "state"))),
                     "link_layer": read(os.path.join(port_dir, "link_layer")),
                     "rate": rate, "rate_gbps": parse_rate(rate),
                     "netdev": port_netdev(ib_dir, device, port)}
            if with_counters:
                found = {}
                for sub, names in RUN_COUNTERS:
                    found.update(counters(os.path.join(port_dir, sub), names))
                dev_dir = os.path.join(ib_dir, device)
                entry.update(counters=found, pci=pci_function(dev_dir),
                             physfn=pci_function(dev_dir, "physfn"),
                             sys_image_guid=read(os.path.join(dev_dir, "sys_image_guid")))
            out.append(entry)
    return out


def main():
    sysfs = os.environ.get("RDMAPROV_SYSFS_ROOT", "/sys")
    sys.stdout.write(json.dumps({"ports": ports(os.path.join(sysfs, IB_CLASS))}) + "\n")


if __name__ == "__main__":
    main()
