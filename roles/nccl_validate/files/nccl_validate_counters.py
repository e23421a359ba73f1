"""RDMA port state and counters as the worker sees them (inside the container, or on the
host), read before and after a run. One JSON document out; standard library only.

Each port: device, port, state, link_layer, rate (the kernel's text, "400 Gb/sec (4X NDR)"),
rate_gbps (its number, null when unknown), netdev (RoCE: the netdev of GID 0; InfiniBand: the
IPoIB interface of the port; null when none) and the error/traffic counters. The controller's
verdict takes each host's line rate from counters_before.json.

RDMAPROV_SYSFS_ROOT (default /sys) lets a test point it at a fixture sysfs tree.
The worker itself checks the causes of a fallback to Socket (its "preflight" section).
"""
import glob
import json
import os

SYSFS = os.environ.get("RDMAPROV_SYSFS_ROOT", "/sys")


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def netdev(dev, port_dir, root="/sys/class/infiniband"):
    """The network interface of an RDMA port: RoCE names it in its GID table (ndevs/0), else
    the device's own net/ directory (IPoIB, or a RoCE device whose GID table is empty)."""
    name = read(f"{port_dir}/gid_attrs/ndevs/0")
    if name:
        return name
    try:
        names = sorted(os.listdir(f"{root}/{dev}/device/net"))
    except OSError:
        return None
    return names[0] if names else None


def rate_gbps(text):
    """'400 Gb/sec (4X NDR)' -> 400.0; None when the kernel gives no number."""
    try:
        return float((text or "").split()[0])
    except (IndexError, ValueError):
        return None


# Traffic, and every counter of the error classes in plugins/module_utils/link_counters.py
# (CLASSES: the pre-job check's rule, which judges them before and after a run too); this file
# runs alone in the container, so it lists them (tests/cli/test_validate_judge.py holds the two
# together).
COUNTERS = (
    ("counters", ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
                  "symbol_error", "link_downed", "link_error_recovery",
                  "local_link_integrity_errors", "port_rcv_errors",
                  "excessive_buffer_overrun_errors", "port_rcv_remote_physical_errors",
                  "port_xmit_discards")),
    ("hw_counters", ("out_of_sequence", "packet_seq_err", "implied_nak_seq_err",
                     "local_ack_timeout_err", "rnr_nak_retry_err")),
)


def pci_function(dev_dir, link=None):
    """The PCI address of the device (link None) or of its SR-IOV parent (link "physfn")."""
    path = os.path.join(dev_dir, "device", *([link] if link else []))
    if link and not os.path.exists(path):
        return None
    real = os.path.realpath(path)
    name = os.path.basename(real)
    return name if ":" in name else None


def ports():
    out = []
    for dev_dir in sorted(glob.glob(os.path.join(SYSFS, "class", "infiniband", "*"))):
        dev = os.path.basename(dev_dir)
        for port_dir in sorted(glob.glob(os.path.join(dev_dir, "ports", "*"))):
            base = os.path.basename(port_dir)
            if not base.isdigit():
                continue
            port = int(base)
            counters = {}
            for sub, names in COUNTERS:
                for name in names:
                    value = read(f"{port_dir}/{sub}/{name}")
                    if value is not None and value.isdigit():
                        counters[name] = int(value)
            state = (read(f"{port_dir}/state") or "").split(":")[-1].strip()
            rate = read(f"{port_dir}/rate")
            out.append({"device": dev, "port": port, "state": state,
                        "link_layer": read(f"{port_dir}/link_layer"),
                        "rate": rate, "rate_gbps": rate_gbps(rate),
                        "netdev": netdev(dev_dir, port), "counters": counters,
                        # SR-IOV: VFs of one PF share its wire; the judge counts it once.
                        "pci": pci_function(dev_dir), "physfn": pci_function(dev_dir, "physfn")})
    return out


def main():
    print(json.dumps({"ports": ports()}))


if __name__ == "__main__":
    main()
