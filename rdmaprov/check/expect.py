"""What a healthy node looks like, for ``rdmaprov check``: a small YAML file and/or flags.

The file (``--config``, ``$RDMAPROV_CHECK_CONFIG``, else /etc/rdmaprov/check.yml when present)
holds the same names as the flags; flags win. Every value is checked (types, MTU/PFC ranges,
unknown keys with a did-you-mean) and a bad one is a UserError: one line, exit 1.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from rdmaprov import collection
from rdmaprov.errors import UserError
from rdmaprov.values import check_value, convert

DEFAULT_CONFIG = Path("/etc/rdmaprov/check.yml")
# Survives reboots (a flap before a reboot still counts for its window) and is root's, as a
# prolog or health check runs; counters themselves reset at boot, which the judge allows for.
DEFAULT_LINK_STATE = Path("/var/lib/rdmaprov/check-links.json")
# The verbs stack every RDMA job needs (kernel_caps.VERBS_STACK); the HCA driver is a site choice.
DEFAULT_MODULES: tuple[str, ...] = tuple(collection.kernel_caps.VERBS_STACK)
# inbox name, then the legacy MOFED one: the collection's list (rdma_sysfs.gpudirect reads them)
PEERMEM_MODULES: tuple[str, ...] = tuple(collection.rdma_sysfs.PEERMEM_MODULES)


class Expectations:
    """What this node must have. A plain class, not a dataclass: ``dataclasses`` imports
    ``inspect`` (and ``ast``, ``dis``), about a tenth of the check's start-up on a GPU host
    (bench/RESULTS.md); every field's default is in DEFAULTS below, copied for each instance."""

    ports: int | None  # ACTIVE ports wanted; None: at least one
    rate: int | None  # Gb/s each ACTIVE port must reach; None: any
    link_layer: str | None  # InfiniBand or Ethernet; None: either
    hcas: list[str]  # only these devices; []: all
    hca_pci: list[str]  # PCI addresses of HCAs that must be there
    gpu_nic: dict[str, str]  # GPU PCI address -> nearest NIC
    firmware: dict[str, str]  # board_id (PSID) -> fw_ver wanted
    mtu: int | None  # wanted MTU of the RDMA netdevs and `interfaces`
    interfaces: list[str]  # netdevs checked besides the ports'
    modules: list[str]  # kernel modules that must be loaded (default: the verbs stack)
    pfc_priority: int | None  # RoCE: the one lossless priority; None: QoS not checked
    gpus: int | None  # None: at least one; 0: not a GPU node
    peermem: bool  # GPUDirect RDMA (peermem or DMA-BUF) required on GPU nodes
    memlock: str  # or a minimum in KiB, e.g. "65536"
    nccl: bool  # run the single-node NCCL loopback (slower: starts torch)
    nccl_min_busbw: float | None  # GB/s the loopback must reach
    nccl_python: str | None  # the Python (with torch) the loopback runs in; None: ours
    # Link health over time (plugins/module_utils/link_counters.py): the per-node state file
    # ("" keeps none: only this run's snapshot is judged), thresholds per counter class, the
    # stable time that clears a flap and the window counter growth is summed over.
    link_state: str
    kernel_log: bool  # read the kernel's messages since the last check (check/kernel.py)
    link_thresholds: dict[str, int]
    link_stable_s: int
    link_window_s: int

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(DEFAULTS))
        if unknown:
            raise TypeError(f"Expectations: no field {', '.join(unknown)}")
        for name, default in DEFAULTS.items():
            value = values.get(name, default)
            setattr(self, name, type(value)(value) if isinstance(value, (list, dict)) else value)

    def as_dict(self) -> dict[str, Any]:
        return {name: _copy(getattr(self, name)) for name in DEFAULTS}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expectations) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return "Expectations(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# Each field's default (lists and dicts are copied for each instance).
DEFAULTS: dict[str, Any] = {
    "ports": None,
    "rate": None,
    "link_layer": None,
    "hcas": [],
    "hca_pci": [],
    "gpu_nic": {},
    "firmware": {},
    "mtu": None,
    "interfaces": [],
    "modules": list(DEFAULT_MODULES),
    "pfc_priority": None,
    "gpus": None,
    "peermem": True,
    "memlock": "unlimited",
    "nccl": False,
    "nccl_min_busbw": None,
    "nccl_python": None,
    "link_state": str(DEFAULT_LINK_STATE),
    "kernel_log": False,
    "link_thresholds": {},
    "link_stable_s": int(collection.link_counters.STABLE_S),
    "link_window_s": int(collection.link_counters.WINDOW_S),
}


# name → (argument-spec type, elements, choices): the value rule the inventory uses too
# (rdmaprov/values.py, which imports no Ansible: a prolog runs this before every job).
SPEC: dict[str, dict[str, Any]] = {
    "ports": {"type": "int"},
    "rate": {"type": "int"},
    "link_layer": {"type": "str", "choices": ["InfiniBand", "Ethernet"]},
    "hcas": {"type": "list", "elements": "str"},
    "hca_pci": {"type": "list", "elements": "str"},
    "gpu_nic": {"type": "raw"},  # {GPU PCI address: RDMA device name or PCI address}
    "firmware": {"type": "raw"},  # {board_id: fw_ver}, e.g. {MT_0000000838: 28.39.1002}
    "mtu": {"type": "int"},
    "interfaces": {"type": "list", "elements": "str"},
    "modules": {"type": "list", "elements": "str"},
    "pfc_priority": {"type": "int"},
    "gpus": {"type": "int"},
    "peermem": {"type": "bool"},
    "gpudirect": {"type": "bool"},  # the same as peermem (its older name), read as one
    "memlock": {"type": "str"},
    "nccl": {"type": "bool"},
    "nccl_min_busbw": {"type": "float"},
    "nccl_python": {"type": "str"},
    "link_state": {"type": "str"},
    "kernel_log": {"type": "bool"},
    "link_thresholds": {"type": "raw"},  # {counter class: int >= 1}, checked by link_counters
    "link_stable_s": {"type": "int"},
    "link_window_s": {"type": "int"},
}


# How the CLI spells each expectation (for messages about a flag's value).
FLAG_NAMES = {"ports": "--expect-ports", "rate": "--expect-rate", "mtu": "--expect-mtu",
              "pfc_priority": "--expect-pfc", "gpus": "--expect-gpus",
              "link_layer": "--expect-link-layer", "hcas": "--hca",
              "hca_pci": "--expect-hca-pci", "interfaces": "--interface",
              "modules": "--module", "memlock": "--expect-memlock", "link_state": "--link-state",
              "nccl_python": "--nccl-python"}


def _convert(name: str, value: Any, label: str) -> Any:
    spec = SPEC[name]
    if name == "gpu_nic":
        import re

        pci = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and re.fullmatch(pci, k) and isinstance(v, str) and v
                for k, v in value.items()):
            raise UserError(f"{label}: must map GPU PCI addresses to their nearest NIC, e.g. "
                            "{'0000:18:00.0': mlx5_0}")
        return {k.lower(): v for k, v in value.items()}
    if name == "firmware":
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and k and isinstance(v, (str, int, float))
                and not isinstance(v, bool) and str(v) for k, v in value.items()):
            raise UserError(f"{label}: must map a card's board_id to its firmware version, "
                            "e.g. {MT_0000000838: '28.39.1002'}")
        return {k: str(v) for k, v in value.items()}
    if name == "link_thresholds":
        if not isinstance(value, dict):
            raise UserError(f"{label}: must be a mapping of counter class to a number, e.g. "
                            "{symbol: 10}")
        try:
            collection.link_counters.thresholds(value)
        except ValueError as exc:
            raise UserError(f"{label}: {exc}") from None
        return dict(value)
    problems = check_value(name, label, value, spec)
    if problems:
        raise UserError(problems[0])
    if value is None:
        return None
    value = convert(value, spec["type"])
    if spec["type"] == "int" and value < 0:
        raise UserError(f"{label}: {value} must not be negative")
    if spec["type"] == "list":
        value = [str(x) for x in value]
    if name == "hca_pci":
        import re

        bad = [v for v in value if not re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:"
                                                     r"[0-9a-fA-F]{2}\.[0-7]", v)]
        if bad:
            raise UserError(f"{label}: {bad[0]!r} is not a PCI address like 0000:3b:00.0")
        value = [v.lower() for v in value]
    if name == "memlock" and value != "unlimited" and not value.isdigit():
        raise UserError(f"{label}: {value!r} is not 'unlimited' or a size in KiB")
    return value


def load_file(path: Path) -> dict[str, Any]:
    import yaml  # only when there is a file: a check given flags alone does without

    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such check configuration file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise UserError(f"{path}: {line}not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a mapping of expectations, not {type(data).__name__}")
    for key in data:
        if key not in SPEC:
            close = difflib.get_close_matches(str(key), list(SPEC), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UserError(f"{path}: unknown key {key!r}{hint}")
    return {k: _convert(k, v, f"{path}: {k}") for k, v in data.items()}


def default_config(root: str = "/") -> Path | None:
    """The node's own file when no --config is given: under --sysroot first (a check run in a
    container reads the host's file from the host's root, which describes that host), then this
    filesystem's /etc/rdmaprov/check.yml; None when neither exists."""
    if os.path.realpath(root) != "/":
        there = Path(root) / str(DEFAULT_CONFIG).lstrip("/")
        if there.is_file():
            return there
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def build(config: Path | None, flags: dict[str, Any], root: str = "/") -> Expectations:
    """The file's values (--config, else default_config(root)), then the flags given."""
    values: dict[str, Any] = {}
    config = config if config is not None else default_config(root)
    if config is not None:
        values.update(load_file(config))
    for name, value in flags.items():
        if value is not None:
            flag = FLAG_NAMES.get(name, "--" + name.replace("_", "-"))
            values[name] = _convert(name, value, flag)
    if "gpudirect" in values:
        gdr = values.pop("gpudirect")
        values["peermem"] = gdr if gdr is not None else values.get("peermem", True)
    return Expectations(**values)
