"""`probe INVENTORY --write-expectations DIR`: rdmaprov check's config per node class, derived
from the facts `probe` gathered (rdma_facts' document per host), never typed per SKU.

The rule, once: hosts are grouped by the hardware they carry (the kinds of HCA and the link
layer of their ports: a host with one card fewer is still in its class, and is named for it);
within a class every expectation is the majority value of its hosts (a tie goes to the stricter,
greater value, as fabric.py breaks ties) and every host whose own value differs is named, never
folded in. Only what the probe saw is written: ports (ACTIVE ports of the class's link layer,
counted the way check counts them), rate (the slowest ACTIVE port), link_layer and mtu (the
ports' netdev MTU). The probe does not read GPUs, PFC or PCIe links, so those keys are left out
(check's defaults hold); firmware is no check key: it is compared, recorded in the header and
its odd hosts named.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rdmaprov.errors import UserError
from rdmaprov.textsafe import safe_line

# The check keys derived here, in the order they are written; firmware is compared only.
KEYS = ("link_layer", "ports", "rate", "mtu")
COMPARED = (*KEYS, "firmware")
INDEX = "hosts.yml"


def host_values(rdma: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(class name, {key: value}) of one host's rdma fact, or None when it has no RDMA port."""
    ports = [(d, p) for d in rdma.get("devices") or [] for p in d.get("ports") or []]
    if not ports:
        return None
    layers = sorted({str(p.get("link_layer")) for _, p in ports})
    kinds = sorted({str(d.get("hca_type") or d.get("board_id") or "unknown") for d, _ in ports})
    name = re.sub(r"[^a-z0-9.-]+", "-", "-".join([*layers, *kinds]).lower()).strip("-")
    active = [p for _, p in ports if p.get("state") == "ACTIVE"]
    rates = [p.get("rate_gbps") for p in active]
    mtus = {p.get("netdev_mtu") for p in active}
    firmware = sorted({str(d.get("fw_ver")) for d, _ in ports if d.get("fw_ver")})
    values = {
        # one layer: check filters its ports by it; a host with both is checked on all ports
        "link_layer": layers[0] if len(layers) == 1 and layers[0] in ("InfiniBand", "Ethernet")
        else None,
        "ports": len(active),
        "rate": min(rates) if rates and None not in rates else None,
        # one MTU across the ports' netdevs, else none can be expected of all of them
        "mtu": next(iter(mtus)) if len(mtus) == 1 and None not in mtus else None,
        "firmware": ",".join(firmware) or None,
    }
    return name, values


def _majority(values: list[Any]) -> Any:
    counts = Counter(values)
    # the most hosts; on a tie a known value over None, then the greater (stricter) value
    return max(counts.items(), key=lambda kv: (kv[1], kv[0] is not None,
                                               kv[0] if kv[0] is not None else 0))[0]


def derive(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """{"classes": {name: {"hosts": [...], "expect": {key: value}, "firmware": str|None}},
    "hosts": {host: class}, "differs": {host: [text]}, "unclassified": {host: reason}}."""
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    unclassified: dict[str, str] = {}
    for host, rdma in sorted(hosts.items()):
        found = host_values(rdma)
        if found is None:
            reason = (rdma.get("kernel") or {}).get("reason") or "none found"
            unclassified[host] = f"no RDMA port ({reason})"
            continue
        groups.setdefault(found[0], {})[host] = found[1]
    classes: dict[str, Any] = {}
    differs: dict[str, list[str]] = {}
    index: dict[str, str] = {}
    for name, members in sorted(groups.items()):
        ref = {key: _majority([v[key] for v in members.values()]) for key in COMPARED}
        for host, vals in members.items():
            index[host] = name
            odd = [f"{key} {vals[key] if vals[key] is not None else 'mixed or unknown'} "
                   f"(class {name}: {ref[key]} on "
                   f"{sum(1 for v in members.values() if v[key] == ref[key])} of {len(members)} "
                   "hosts)" for key in COMPARED if vals[key] != ref[key]]
            if odd:
                differs[host] = odd
        classes[name] = {"hosts": sorted(members),
                         "expect": {k: ref[k] for k in KEYS if ref[k] is not None},
                         "firmware": ref["firmware"]}
    return {"classes": classes, "hosts": index, "differs": differs,
            "unclassified": unclassified}


def check_dir(path: Path) -> None:
    """--write-expectations DIR usable (a directory, or one that can be made, and writable)."""
    flag = f"--write-expectations {path}"
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag}: not a directory")
    existing = path if path.exists() else next((p for p in path.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UserError(f"{flag}: {existing} is not a directory")
    if existing is None or not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{flag}: not writable")


def _dump(doc: Any) -> str:
    import yaml

    return str(yaml.safe_dump(doc, default_flow_style=False, sort_keys=False))


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write(directory: Path, derived: Mapping[str, Any], inventory: str) -> list[Path]:
    """DIR/<class>.yml (check's config) per class and DIR/hosts.yml (host -> file, the hosts
    that differ, the hosts left out), each written atomically. Returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, cls in derived["classes"].items():
        odd = [h for h in cls["hosts"] if h in derived["differs"]]
        header = [f"# rdmaprov check expectations for node class {name}, written by",
                  f"# `rdmaprov probe {inventory} --write-expectations`: the majority value of",
                  f"# each key over the {len(cls['hosts'])} host(s) of this class, as probed:",
                  *(f"#   {h}" for h in cls["hosts"]),
                  f"# firmware (compared, not a check key): {cls['firmware'] or 'unknown'}",
                  "# hosts that differ from this (named in hosts.yml): "
                  + (", ".join(odd) if odd else "none"),
                  "# GPUs, PFC and PCIe links are not probed: their keys are left to check's "
                  "defaults."]
        path = directory / f"{name}.yml"
        _write_atomic(path, "\n".join(safe_line(h) for h in header) + "\n" + _dump(cls["expect"]))
        written.append(path)
    index = {"hosts": {h: f"{c}.yml" for h, c in sorted(derived["hosts"].items())},
             "differs": derived["differs"], "unclassified": derived["unclassified"]}
    path = directory / INDEX
    _write_atomic(path, f"# rdmaprov probe {safe_line(inventory)} --write-expectations: each "
                        "host's check\n# config file, the hosts that differ from their class's "
                        "majority and\n# the hosts with no RDMA port (no file).\n" + _dump(index))
    written.append(path)
    return written
