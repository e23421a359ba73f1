"""`probe INVENTORY --write-expectations DIR`: rdmaprov check's config per node class, derived
from the facts `probe` gathered (rdma_facts' document per host), never typed per SKU.

The rule, once: hosts are grouped by the hardware they carry (the kinds of HCA, the link layer
of their ports, and whether NVIDIA GPUs sit on their PCI bus: a host with one card or GPU fewer
is still in its class, and is named for it; a CPU node is never judged by its GPU neighbours);
within a class every expectation is the majority value of its hosts (a tie goes to the stricter,
greater value, as fabric.py breaks ties) and every host whose own value differs is named, never
folded in. Only what the probe saw is written, each value read the way check reads it:
- ports: ACTIVE ports of the class's link layer; rate: the slowest ACTIVE port; link_layer;
- mtu: the one MTU of every netdev check compares (rdma_sysfs.mtu_netdevs: each port's netdev,
  DOWN ports too but not one set down (judge.excluded), the VLANs on top of a RoCE port and a
  bond's members: the facts' path_mtu).
  A host whose netdevs differ (a VLAN at 9000 on a port at 9216, an unused port left at 1500)
  has no single MTU that check could pass; when that is the class's majority no mtu is
  written, and the header says why;
- gpus: the GPUs the driver shows, on a class with GPUs on PCI (0 on a class without: a CPU node
  with an HCA is not drained for "no GPU"); not written when the majority shows none (driver
  not loaded at probe time: no count to trust).
Not derived, with the reason in the header: pfc_priority (a site setting the roce_qos role
applies, and this probe does not read DCB), hca_pci and gpu_nic (PCI addresses are per host:
slurm_health_expect, or a host's own file, sets them), PCIe widths (check judges each link
against its own maximum: there is no expectation key). firmware is written per board_id
({board_id: fw_ver}, the class's majority; a board whose cards disagree on a host is left out
of that host's value) and its odd hosts named.
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

# The check keys derived here, in the order they are written (firmware after them, per board).
KEYS = ("link_layer", "ports", "rate", "mtu", "gpus")
COMPARED = (*KEYS, "firmware")
INDEX = "hosts.yml"
NOT_DERIVED = (
    "pfc_priority: a site setting (roce_qos_pfc_priority), not read by this probe (no DCB query)",
    "hca_pci, gpu_nic: PCI addresses are per host (set them in slurm_health_expect)",
    "PCIe widths: check judges each link against its own maximum (no key to write)",
)


def path_mtus(port: Mapping[str, Any]) -> dict[str, Any]:
    """{netdev: MTU} check compares for one port: the facts' path_mtu (rdma_sysfs.mtu_netdevs),
    else (facts without it) the port's own netdev."""
    found = port.get("path_mtu")
    if isinstance(found, Mapping):
        return dict(found)
    return {port["netdev"]: port.get("netdev_mtu")} if port.get("netdev") else {}


def host_values(rdma: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(class name, {key: value}) of one host's rdma fact, or None when it has no RDMA port.
    "mtu_detail" says which netdevs disagree when there is no single MTU."""
    ports = [(d, p) for d in rdma.get("devices") or [] for p in d.get("ports") or []]
    if not ports:
        return None
    layers = sorted({str(p.get("link_layer")) for _, p in ports})
    kinds = sorted({str(d.get("hca_type") or d.get("board_id") or "unknown") for d, _ in ports})
    gpus = rdma.get("gpus") if isinstance(rdma.get("gpus"), Mapping) else None
    has_gpu = gpus is not None and bool(gpus.get("on_pci") or gpus.get("count"))
    name = re.sub(r"[^a-z0-9.-]+", "-", "-".join([*layers, *kinds, *(["gpu"] if has_gpu else [])])
                  .lower()).strip("-")
    active = [p for _, p in ports if p.get("state") == "ACTIVE"]
    rates = [p.get("rate_gbps") for p in active]
    # Every port's netdevs, whatever its state, but a port set down (a spare: the check's one
    # exclusion rule, judge.excluded): check compares the rest with one MTU.
    from rdmaprov.check.judge import excluded

    netdevs: dict[str, Any] = {}
    for _, p in ports:
        if not excluded(p):
            netdevs.update(path_mtus(p))
    mtus = set(netdevs.values())
    firmware = sorted({str(d.get("fw_ver")) for d, _ in ports if d.get("fw_ver")})
    # check's firmware key: {board_id: fw_ver} of the boards whose cards on this host agree.
    per_board: dict[str, set[str]] = {}
    for d, _ in ports:
        if d.get("board_id") and d.get("fw_ver"):
            per_board.setdefault(str(d["board_id"]), set()).add(str(d["fw_ver"]))
    firmware_map = tuple(sorted((b, next(iter(v))) for b, v in per_board.items()
                                if len(v) == 1)) or None
    values = {
        # one layer: check filters its ports by it; a host with both is checked on all ports
        "link_layer": layers[0] if len(layers) == 1 and layers[0] in ("InfiniBand", "Ethernet")
        else None,
        "ports": len(active),
        "rate": min(rates) if rates and None not in rates else None,
        "mtu": next(iter(mtus)) if len(mtus) == 1 and None not in mtus else None,
        "gpus": None if gpus is None else int(gpus.get("count") or 0),
        "firmware": ",".join(firmware) or None,
        "firmware_map": firmware_map,
        "mtu_detail": ", ".join(f"{n} {m if m is not None else 'unknown'}"
                                for n, m in sorted(netdevs.items())) or "no netdev",
    }
    return name, values


def _majority(values: list[Any]) -> Any:
    counts = Counter(values)
    # the most hosts; on a tie a known value over None, then the greater (stricter) value
    return max(counts.items(), key=lambda kv: (kv[1], kv[0] is not None,
                                               kv[0] if kv[0] is not None else 0))[0]


def _shown(key: str, vals: Mapping[str, Any]) -> str:
    if vals[key] is not None:
        return str(vals[key])
    if key == "mtu":
        return f"not one MTU ({vals['mtu_detail']})"
    return "mixed or unknown"


def derive(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """{"classes": {name: {"hosts": [...], "expect": {key: value}, "firmware": str|None,
    "left_out": [text]}}, "hosts": {host: class}, "differs": {host: [text]},
    "unclassified": {host: reason}}."""
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
        left_out = []
        if ref["mtu"] is None:
            odd = sorted(h for h, v in members.items() if v["mtu"] is None)
            if odd and all(members[h]["mtu_detail"] == "no netdev" for h in odd):
                left_out.append("mtu: the RDMA ports have no netdev (no IPoIB): check has no "
                                "MTU to compare")
            else:
                left_out.append(f"mtu: no single MTU on the netdevs check compares on {len(odd)} "
                                f"of {len(members)} hosts (e.g. {odd[0]}: "
                                f"{members[odd[0]]['mtu_detail']})" if odd else
                                "mtu: not readable")
        if ref["gpus"] == 0 and name.endswith("-gpu"):
            # GPUs on PCI but the driver shows none on most hosts: no count to trust.
            ref["gpus"] = None
            left_out.append("gpus: GPUs on PCI but the driver showed none on most hosts")
        for host, vals in members.items():
            index[host] = name
            odd = [f"{key} {_shown(key, vals)} (class {name}: {ref[key]} on "
                   f"{sum(1 for v in members.values() if v[key] == ref[key])} of {len(members)} "
                   "hosts)" for key in COMPARED if ref[key] is not None and vals[key] != ref[key]]
            if odd:
                differs[host] = odd
        # firmware: {board_id: fw_ver} the majority of the class runs (check's firmware key;
        # its odd hosts are named by the "firmware" comparison above).
        fw_map = _majority([v["firmware_map"] for v in members.values()])
        expect = {k: ref[k] for k in KEYS if ref[k] is not None}
        if fw_map:
            expect["firmware"] = dict(fw_map)
        classes[name] = {"hosts": sorted(members),
                         "expect": expect,
                         "firmware": ref["firmware"], "left_out": left_out}
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
                  f"# firmware (the majority's, per board_id: check's firmware key): "
                  f"{cls['firmware'] or 'unknown'}",
                  "# hosts that differ from this (named in hosts.yml): "
                  + (", ".join(odd) if odd else "none"),
                  "# not written (check's defaults hold):",
                  *(f"#   {why}" for why in [*cls.get("left_out", []), *NOT_DERIVED])]
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
