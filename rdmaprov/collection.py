"""The collection's Python (plugins/module_utils) for rdmaprov's own commands and tests.

`from rdmaprov.collection import rdma_sysfs` gives the module Ansible ships to a node as
`ansible_collections.rdmaprov.cluster.plugins.module_utils.rdma_sysfs`. The module_utils import
each other by those names, so the first use mounts this installation's collection tree
(`resources.collection_root()`: the checkout, or `rdmaprov/_collection` in a wheel) under them
with three namespace-package entries in sys.modules; an `ansible_collections.rdmaprov.cluster`
that is importable already (Ansible's own loader, an installed collection) is left as it is.
A module is imported when it is first named, so a command pays only for the ones it uses.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

from rdmaprov.resources import COLLECTION_FQCN, collection_root

if TYPE_CHECKING:
    # What mypy and a reader follow: the same files, named by their place in this checkout.
    pass

PACKAGE = f"ansible_collections.{COLLECTION_FQCN}.plugins.module_utils"
MODULE_UTILS = frozenset((
    "cdi_spec", "container_runtime", "container_runtime_probe", "driver_plan",
    "driver_versions", "firewall_probe", "host_report", "input_check", "kernel_caps",
    "link_counters", "nccl_names", "net_mtu_probe", "netcfg_firewall", "netcfg_mtu", "netcfg_qos",
    "node_state", "node_tool", "ranges", "rdma_nccl", "rdma_ofed_probe", "rdma_ports",
    "rdma_pyverbs", "rdma_sysfs", "roce_qos_probe", "slurm_health", "ssh_session", "state_drift",
    "unit_words", "validate_launch",
))


def _namespace(name: str, path: list[str]) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__path__ = path  # a namespace package: submodules are looked up under these dirs
        sys.modules[name] = module


def _mount() -> None:
    try:
        importlib.import_module(PACKAGE)
        return
    except ImportError:
        pass
    namespace = COLLECTION_FQCN.split(".")[0]
    _namespace("ansible_collections", [])
    _namespace(f"ansible_collections.{namespace}", [])
    _namespace(f"ansible_collections.{COLLECTION_FQCN}", [str(collection_root())])


def __getattr__(name: str) -> types.ModuleType:
    if name not in MODULE_UTILS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _mount()
    module = importlib.import_module(f"{PACKAGE}.{name}")
    globals()[name] = module
    return module
