#!/usr/bin/env python3
"""RDMA port state and counters as the worker sees them (inside the container, or on the
host), read before and after a run. One JSON document out; standard library only.

The worker itself checks the causes of a fallback to Socket (its "preflight" section).
"""
import glob
import json
import os


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def ports():
    out = []
    for port_dir in sorted(glob.glob("/sys/class/infiniband/*/ports/*")):
        dev = port_dir.split("/")[4]
        port = int(os.path.basename(port_dir))
        counters = {}
        for name in ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
                     "symbol_error", "link_downed", "port_rcv_errors", "port_xmit_discards"):
            value = read(f"{port_dir}/counters/{name}")
            if value is not None and value.isdigit():
                counters[name] = int(value)
        state = (read(f"{port_dir}/state") or "").split(":")[-1].strip()
        out.append({"device": dev, "port": port, "state": state,
                    "link_layer": read(f"{port_dir}/link_layer"),
                    "rate": read(f"{port_dir}/rate"), "counters": counters})
    return out


def main():
    print(json.dumps({"ports": ports()}))


if __name__ == "__main__":
    main()
