# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Read-only probe of the roce_qos role (module roce_qos_probe): raw tool output per interface,
which the module then plans with (netcfg_qos.plan, on the host)."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess

from ansible_collections.rdmaprov.cluster.plugins.module_utils import rdma_ports

read = rdma_ports.read  # a sysfs/configfs attribute, stripped; None when unreadable


def run(argv):
    if not shutil.which(argv[0]):
        return None
    proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "LC_ALL": "C"})
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def probe(names):
    out = []
    for name in names:
        base = f"/sys/class/net/{name}"
        entry = {"name": name, "exists": os.path.isdir(base)}
        if entry["exists"]:
            mq = run(["mlnx_qos", "-i", name])
            entry["mlnx_qos"] = mq
            entry["dcb_pfc"] = run(["dcb", "-j", "pfc", "show", "dev", name])
            entry["dcb_app"] = run(["dcb", "-j", "-N", "app", "show", "dev", name])
            for kind in ("roce_np", "roce_rp"):
                entry["ecn_" + kind[5:]] = {os.path.basename(p): read(p)
                                            for p in glob.glob(f"{base}/ecn/{kind}/enable/[0-7]")}
            ibdevs = sorted(os.listdir(f"{base}/device/infiniband")) if os.path.isdir(
                f"{base}/device/infiniband") else []
            entry["ibdev"] = ibdevs[0] if ibdevs else None
            entry["ibport"] = 1
            if entry["ibdev"]:
                cm = f"/sys/kernel/config/rdma_cm/{entry['ibdev']}/ports/1"
                entry["roce_tos"] = read(f"{cm}/default_roce_tos")
                entry["roce_mode"] = read(f"{cm}/default_roce_mode")
        out.append(entry)
    return out
