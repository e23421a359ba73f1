"""Import the collection's module_utils (plugins/module_utils/rdma_*.py) without Ansible.

The module_utils import each other the collection way (`ansible_collections.rdmaprov.cluster.
plugins.module_utils...`), which is what Ansible ships to a node. For the local `rdmaprov probe`
the same names must resolve to this installation's collection tree: three namespace-package
entries in sys.modules do that, and nothing else is touched. An `ansible_collections` already
importable (Ansible's own loader, installed collections) is left as it is.
"""

from __future__ import annotations

import importlib
import sys
import types
from types import ModuleType

from rdmaprov.resources import COLLECTION_FQCN, collection_root

_PACKAGE = f"ansible_collections.{COLLECTION_FQCN}"


def _ensure_package(name: str, path: list[str]) -> None:
    if name in sys.modules:
        return
    module = types.ModuleType(name)
    module.__path__ = path  # a namespace package: submodules are looked up under these dirs
    sys.modules[name] = module


def module_utils(name: str) -> ModuleType:
    """`module_utils(\"rdma_sysfs\")` -> the collection's plugins/module_utils/rdma_sysfs.py."""
    try:
        return importlib.import_module(f"{_PACKAGE}.plugins.module_utils.{name}")
    except ImportError:
        pass
    namespace = COLLECTION_FQCN.split(".")[0]
    _ensure_package("ansible_collections", [])
    _ensure_package(f"ansible_collections.{namespace}", [])
    _ensure_package(_PACKAGE, [str(collection_root())])
    return importlib.import_module(f"{_PACKAGE}.plugins.module_utils.{name}")
