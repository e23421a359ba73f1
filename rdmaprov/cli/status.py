"""`rdmaprov status INVENTORY`: a read-only table of the fleet (drivers, modules, MTU, QoS,
firewall, container runtime, GPUs, last validation), one row per host."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rdmaprov import collection, progress
from rdmaprov import inventory as inventory_mod
from rdmaprov.cli import options
from rdmaprov.console import table, table_console
from rdmaprov.engine import RunnerSession
from rdmaprov.hostreason import host_reason
from rdmaprov.resources import playbook as find_playbook
from rdmaprov.textsafe import safe_line
from rdmaprov.validate import record

PROBE_TASK = "Read node state"
# The node_state module's answer (plugins/module_utils/node_state.py) that a row shows.
STATE_KEYS = ("drivers", "mtu", "qos", "firewall", "runtime", "gpus", "rdma_devices",
              "validation", "modules")
COLUMNS = ("drivers", "modules", "mtu", "qos", "firewall", "runtime", "gpus", "validation")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status", help="read-only fleet table: drivers, modules, MTU, QoS, firewall, runtime",
        description="Read every node's state over SSH (nothing is changed) and print one row "
        "per host.", epilog=options.EXIT_CODES_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_inventory(p)
    p.add_argument("-l", "--limit", metavar="PATTERN", help="only these hosts/groups")
    options.add_connection_options(p)
    p.add_argument("-f", "--forks", metavar="N", default=os.environ.get("RDMAPROV_FORKS"),
                   help="parallel hosts (env RDMAPROV_FORKS)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--keep-artifacts", metavar="DIR", type=Path,
                   default=os.environ.get("RDMAPROV_KEEP_ARTIFACTS") or None,
                   help="keep ansible-runner's private data dir (env RDMAPROV_KEEP_ARTIFACTS)")
    p.set_defaults(func=run, check=False, diff=False, tags=None, skip_tags=None,
                   extra_vars=[], verbose=0,
                   strategy=os.environ.get("RDMAPROV_STRATEGY", "linear"),
                   ansible_profile=os.environ.get("RDMAPROV_ANSIBLE_PROFILE", "tuned"))


def modules_cell(kernel: Mapping[str, Any] | None) -> str:
    """The kernel_modules module's answer (loaded / built in / absent) in one cell."""
    if not kernel:
        return "-"
    text = collection.kernel_caps.summary(kernel.get("modules") or [])
    if not kernel.get("can_load"):
        text += f" (cannot load: {kernel.get('reason')})"
    return text


def qos_cell(qos: Mapping[str, Any]) -> str:
    """What the boot unit did per NIC: an active oneshot unit alone says only that it ran."""
    if not qos.get("unit"):
        return "script only" if qos.get("script") else "not configured"
    nics = qos.get("nics")
    if nics is None:
        return f"unit {qos['unit']} (no journal: per-NIC result unknown)"
    if not nics:
        return f"unit {qos['unit']}, no NIC result logged this boot"
    parts = []
    for name, what in nics.items():
        if what == "DCB settings applied":
            parts.append(f"{name} applied")
        elif what.startswith("not capable"):
            parts.append(f"{name} {what}")
        else:
            parts.append(f"{name}: {what}")
    return f"unit {qos['unit']}: " + "; ".join(parts)


def cells(state: Mapping[str, Any], judged: Mapping[str, Any] | None = None) -> dict[str, str]:
    """One host's node_state answer (the kernel modules under "modules") and this
    controller's record of the judge's verdict for it (rdmaprov/validate/record.py) → cells."""
    mtu = ", ".join(f"{k} {v}" for k, v in (state.get("mtu") or {}).items()) or "-"
    _word, val_text = record.cell(state.get("validation"), dict(judged) if judged else None)
    return {"drivers": state.get("drivers") or "none",
            "modules": modules_cell(state.get("modules")), "mtu": mtu,
            "qos": qos_cell(state.get("qos") or {}),
            "firewall": state.get("firewall") or "no nft",
            "runtime": state.get("runtime") or "none", "gpus": str(state.get("gpus", 0)),
            "validation": val_text}


def run(args: argparse.Namespace) -> int:
    options.check_choices(args)
    options.forks(args)
    inv = inventory_mod.load(args.inventory, limit=args.limit)
    spec = options.run_spec(args, find_playbook("status.yml"), inv)
    states: dict[str, dict[str, Any]] = {}

    def on_event(ev: Mapping[str, Any]) -> None:
        data = ev.get("event_data") or {}
        if ev.get("event") == "runner_on_ok" and data.get("task") == PROBE_TASK:
            res = data.get("res") or {}
            states[str(data["host"])] = {k: res.get(k) for k in STATE_KEYS}

    result = RunnerSession(spec, on_event=on_event).run()
    rows: dict[str, dict[str, str]] = {}
    judged = record.load(args.inventory)
    for host in inv.selected:
        if host in states:
            rows[host] = cells(states[host], judged.get(host))
            word, _text = record.cell(states[host].get("validation"), judged.get(host))
            if states[host].get("validation") or word != "never":
                states[host]["validation"] = {**(states[host].get("validation") or {}),
                                              "verdict": word, "judged": judged.get(host)}
        else:
            h = result.hosts.get(host)
            rows[host] = {c: "" for c in COLUMNS} | {
                "drivers": host_reason(h, result.error or "no answer")}
    code = 0 if len(states) == len(inv.selected) else (2 if result.hosts else 1)
    if args.json:
        doc = progress.result_document(result, code)
        doc["nodes"] = states
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return code
    console = table_console(sys.stdout)
    console.print(table(("host", *COLUMNS), ([host, *(row[c] for c in COLUMNS)]
                                             for host, row in rows.items())))
    if code == 1 and result.error:
        print(f"rdmaprov: error: {safe_line(result.error)}", file=sys.stderr)
    return code
