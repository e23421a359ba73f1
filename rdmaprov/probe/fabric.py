"""Fabric consistency across hosts: one pure function over {host: rdma fact}.

NCCL runs at the pace of the slowest, least-matching link, and mismatched stacks fail in odd
ways (an MTU mismatch stalls, a firmware mix trips adaptive routing), so each host is compared
with the most common value of every column and the odd ones out are named.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from rdmaprov import collection

COLUMNS = ("rdma_core", "ofed", "firmware", "mtu", "rate_gbps", "link_layer", "ports")


def _fabric_ports(rdma: Mapping[str, Any]) -> list[tuple[str, dict]]:
    nccl = collection.rdma_nccl
    return [(d["name"], p) for d in rdma.get("devices", []) for p in d.get("ports", [])
            if not nccl.is_bond(d["name"], p)]


def _joined(values) -> str:
    found = sorted({str(v) for v in values if v is not None})
    return ",".join(found) if found else "-"


def host_row(rdma: Mapping[str, Any]) -> dict[str, Any]:
    """One host's comparable values (bonds left out: they are the front end, not the fabric)."""
    ports = _fabric_ports(rdma)
    active = [p for _, p in ports if p.get("state") == "ACTIVE"]
    down = [f"{d}:{p['port']} {p.get('state')}" for d, p in ports if p.get("state") != "ACTIVE"]
    fabric_devices = {d for d, _ in ports}
    return {
        "rdma_core": rdma.get("rdma_core_version") or "-",
        "ofed": rdma.get("ofed_version") or "-",
        "firmware": _joined(d.get("fw_ver") for d in rdma.get("devices", [])
                            if d["name"] in fabric_devices),
        "mtu": _joined(p.get("active_mtu") for p in active),
        "rate_gbps": _joined(p.get("rate_gbps") for p in active),
        "link_layer": _joined(p.get("link_layer") for p in active),
        "ports": f"{len(active)}/{len(ports)} ACTIVE",
        "_down": down,
        "_devices": bool(rdma.get("devices")),
        "_reason": (rdma.get("kernel") or {}).get("reason", ""),
    }


def consistency(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """{"ok", "rows": {host: {column: value}}, "reference": {column: value},
    "problems": {host: [text]}} for the hosts that answered."""
    rows = {h: host_row(r) for h, r in hosts.items()}
    reference: dict[str, Any] = {}
    for col in COLUMNS:
        if col == "ports":
            continue
        counts = Counter(row[col] for row in rows.values() if row["_devices"])
        # Ties go to the lexically greatest value (the newer version) so the result is stable.
        reference[col] = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0] if counts else None
    problems: dict[str, list[str]] = {}
    for host, row in rows.items():
        issues = []
        if not row["_devices"]:
            issues.append(f"no RDMA devices: {row['_reason']}")
        else:
            for col, ref in reference.items():
                if row[col] != ref:
                    others = sorted(h for h, r in rows.items() if r[col] == ref and h != host)
                    issues.append(f"{col} {row[col]} (others: {ref} on {len(others)} host(s))")
            issues += [f"{col} differs between this host's ports: {row[col]}"
                       for col in ("firmware", "mtu", "rate_gbps") if "," in str(row[col])]
            issues += [f"{d} (not ACTIVE)" for d in row["_down"]]
        if issues:
            problems[host] = issues
    public = {h: {c: r[c] for c in COLUMNS} for h, r in rows.items()}
    return {"ok": not problems and bool(rows), "rows": public, "reference": reference,
            "problems": problems}
