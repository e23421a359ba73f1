"""What a training container needs on this host: `rdmaprov probe --container`.

The exact `docker run` / `podman run` flags (the RDMA CDI device where the engine reads the
spec, else the same edits by hand), the NCCL settings the container gets through the device,
and what a multi-node job adds itself. The spec and the flags come from the collection's
cdi_spec module_util, the one place the role's spec comes from too.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from rdmaprov import collection

SPEC_PATH = "/etc/cdi/rdmaprov-rdma.yaml"
CONF_PATH = "/etc/nccl.conf"
# What every multi-node job sets itself; NCCL_IB_ENABLE, which popular guides set, does not exist.
JOB_ENV = {
    "MASTER_ADDR": "the address of rank 0's host (torchrun --master-addr)",
    "MASTER_PORT": "a free TCP port on it, the same on every host (torchrun --master-port)",
    "NCCL_DEBUG": "INFO, once: the log then shows 'Using network IB' (not 'Socket')",
}


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def advice(sysfs_root: str = "/sys", spec_path: str = SPEC_PATH,
           conf_path: str = CONF_PATH) -> dict[str, Any]:
    cdi = collection.cdi_spec
    crp = collection.container_runtime_probe
    root = os.path.dirname(os.path.abspath(sysfs_root))
    dev_root = os.path.join(root, "dev") if os.path.basename(sysfs_root.rstrip("/")) == "sys" \
        and root != "/" else "/dev"
    facts = cdi.read_facts(sysfs_root, dev_root, conf_path)
    current = _read(spec_path)
    planned = cdi.plan(facts, {"conf_path": conf_path, "current": current, "path": spec_path})
    found = crp.engines()
    gpus = len(glob.glob("/proc/driver/nvidia/gpus/*"))
    engines = {}
    for name in ("docker", "podman"):
        version = (found.get(name) or {}).get("version")
        flags, why = cdi.run_flags(name, version, planned, current is not None, gpus)
        engines[name] = {"installed": name in found, "version": version,
                         "argv": [name, "run", *flags, "IMAGE"], "why": why}
    return {"spec": spec_path, "installed": current is not None, "drift": planned["drift"],
            "report": planned["report"], "gpus": gpus, "engines": engines,
            "nccl_conf": facts["nccl_conf"], "job_env": JOB_ENV}
