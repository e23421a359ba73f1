"""`rdmaprov status INVENTORY`: a read-only table of the fleet (drivers, modules, MTU, QoS,
firewall, container runtime, RDMA CDI spec, /etc/nccl.conf, GPUs, last validation), one row per
host, each value that differs from what the roles want marked: the roles' own verdicts (the site
plan's, every role read), placed in their columns here. Exit 2 on drift."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rdmaprov import collection, progress
from rdmaprov import inventory as inventory_mod
from rdmaprov.cli import options
from rdmaprov.console import table_console
from rdmaprov.engine import RunnerSession, failure_message
from rdmaprov.hostreason import host_reason
from rdmaprov.resources import playbook as find_playbook
from rdmaprov.textsafe import rich_text, safe_line
from rdmaprov.validate import record

PROBE_TASK = "Read node state"
# The site plan's task in status.yml: every role's probe and verdict (plugins/action/site_plan.py).
ROLES_TASK = "Read every role against the inventory's values"
# The node_state module's answer (plugins/module_utils/node_state.py) that a row shows.
STATE_KEYS = ("drivers", "mtu", "qos", "firewall", "runtime", "gpus", "rdma_devices",
              "validation", "modules", "nccl_conf")
COLUMNS = ("drivers", "modules", "mtu", "qos", "firewall", "runtime", "cdi", "nccl.conf", "gpus",
           "validation")
# The role whose verdict marks a column (roles/<role>); a column no role manages is never marked.
ROLE_OF = {"drivers": "rdma_ofed", "modules": "rdma_modules", "mtu": "net_mtu",
           "qos": "roce_qos", "firewall": "firewall", "runtime": "container_runtime",
           "cdi": "container_runtime", "nccl.conf": "nccl_env"}
MARK = "!"
EXIT_CODES = """\
exit codes:
  0  every host answered and every value is as the roles want
  1  usage or input error: bad flag, inventory, variable or missing file; no host contacted
  2  a value differs from what the roles want (marked '!', one line each under the table), or a
     host did not answer (unreachable or failed: its row says why)
"""
LEGEND = (f"'{MARK}' differs from what the roles want (bootstrap --check --diff: the changes)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status", help="read-only fleet table: drivers, modules, MTU, QoS, firewall, runtime",
        description="Read every node's state over SSH (nothing is changed) and print one row "
        "per host, each value that differs from what the roles want marked '!'.",
        epilog=EXIT_CODES,
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
    """The kernel_modules module's answer (loaded / built in / absent) in one short cell: a count
    where every module is alike, else the names of those neither loaded nor built in."""
    if not kernel:
        return "-"
    mods = kernel.get("modules") or []
    states = [m.get("state") for m in mods]
    if mods and len(set(states)) == 1:
        word = collection.kernel_caps.summary(mods).split(":", 1)[0]
        text = f"{len(mods)} {word}"
    else:
        text = collection.kernel_caps.summary(mods)
    if not kernel.get("can_load"):
        text += ", cannot load"
    return text


def qos_cell(qos: Mapping[str, Any]) -> str:
    """What the boot unit did per NIC: an active oneshot unit alone says only that it ran."""
    if not qos.get("unit"):
        return "script only" if qos.get("script") else "not configured"
    nics = qos.get("nics")
    if nics is None:
        return f"unit {qos['unit']}, no journal"
    if not nics:
        return f"unit {qos['unit']}, no NIC logged"
    parts = []
    for name, what in nics.items():
        if what == "DCB settings applied":
            parts.append(f"{name} applied")
        elif what.startswith("not capable"):
            parts.append(f"{name} not capable")
        else:
            parts.append(f"{name}: {what}")
    return ", ".join(parts)


def drivers_cell(drivers: str | None) -> str:
    if not drivers:
        return "none"
    return drivers.replace("MLNX_OFED_LINUX-", "OFED ", 1).replace("DOCA_OFED_LINUX-", "DOCA ", 1)


def firewall_cell(firewall: str | None) -> str:
    """node_state's one line, shorter: 'rdmaprov table, 8 rules, policy drop' -> 'nft 8 rules,
    drop'."""
    if not firewall:
        return "no nft"
    return (firewall.replace("rdmaprov table, ", "nft ", 1).replace(", policy ", ", ", 1)
            .replace("firewalld policy rdmaprov, ", "firewalld ", 1))


def _marked(text: str, marked: bool) -> str:
    return f"{MARK}{text}" if marked else text


def verdict(state: Mapping[str, Any], roles: Mapping[str, Any] | None,
            failure: str | None = None) -> dict[str, list[str]]:
    """What differs from what the roles want on one host, per column: one line each. The roles'
    own verdicts (the site plan's, every role read: plugins/plugin_utils/site_plan.py) decide;
    this only places them. ``roles`` is that task's result (None: it gave none, ``failure`` says
    why); a role not managed on the host (the firewall without cluster subnets) is not read and
    marks nothing."""
    if roles is None:
        return {"roles": [f"not read: {failure or 'no answer'}"]}
    differ = dict(roles.get("differ") or {})
    shown = roles.get("shown") or {}
    out: dict[str, list[str]] = {}

    def add(column: str, line: str) -> None:
        out.setdefault(column, []).append(line)

    why = differ.pop("net_mtu", None)
    if why:
        mtu = shown.get("net_mtu") or {}
        for i in mtu.get("runtime") or []:
            add("mtu", f"{i.get('name')} {i.get('current') or 'absent'}, the roles want "
                       f"{i.get('mtu')}")
        for line in (mtu.get("persist_drift") or []) + (mtu.get("errors") or []):
            add("mtu", str(line))
        if mtu.get("ping_package"):
            add("mtu", f"no ping for the path proof ({mtu['ping_package']} to install)")
        if "mtu" not in out:
            add("mtu", f"net_mtu: {why}")
    why = differ.pop("nccl_env", None)
    if why:
        conf = state.get("nccl_conf") or {}
        path = conf.get("path") or (roles.get("nccl_conf") or {}).get("path") or "nccl.conf"
        if conf and not conf.get("exists"):
            add("nccl.conf", f"{path} absent, nccl_env writes it")
        elif (roles.get("nccl_conf") or {}).get("differs"):
            add("nccl.conf", f"{path}: content is not what nccl_env writes")
        else:
            add("nccl.conf", f"nccl_env: {why}")
    why = differ.pop("container_runtime", None)
    if why:
        rt = shown.get("container_runtime") or {}
        cdi = rt.get("cdi") or {}
        cdi_lines = [str(x) for x in cdi.get("drift") or []]
        for line in cdi_lines:
            add("cdi", line)
        for line in [str(x) for x in (rt.get("differs") or []) + (rt.get("errors") or [])]:
            if line not in cdi_lines:
                add("runtime", line)
        if not out.get("cdi") and not out.get("runtime"):
            add("runtime", f"container_runtime: {why}")
    for column in ("drivers", "modules", "qos", "firewall"):
        role = ROLE_OF[column]
        why = differ.pop(role, None)
        if why:
            lines = [str(x) for x in (shown.get(role) or {}).get("lines") or []]
            for line in lines or [f"{role}: {why}"]:
                add(column, line)
    for role, why in differ.items():  # a role with no column of its own: a line under its name
        add(role, str(why))
    return out


def cdi_cell(roles: Mapping[str, Any] | None) -> str:
    """The RDMA CDI spec: present with its devices, or absent (none wanted: "none")."""
    cdi = ((roles or {}).get("shown") or {}).get("container_runtime", {}).get("cdi")
    if not cdi:
        return "-"
    if cdi.get("present"):
        return ", ".join(cdi.get("devices") or []) or "present"
    return "absent" if cdi.get("wanted") else "none"


def nccl_cell(state: Mapping[str, Any], roles: Mapping[str, Any] | None) -> str:
    conf = state.get("nccl_conf") or {}
    if not conf:
        return "-"
    if not conf.get("exists"):
        return "absent"
    answer = (roles or {}).get("nccl_conf")
    if answer is None:
        return "present"
    return "differs" if answer.get("differs") else "as written"


def cells(state: Mapping[str, Any], judged: Mapping[str, Any] | None = None,
          roles: Mapping[str, Any] | None = None,
          drift: Mapping[str, list[str]] | None = None) -> dict[str, str]:
    """One host's node_state answer (the kernel modules under "modules"), this controller's
    record of the judge's verdict for it (rdmaprov/validate/record.py), the site plan's reading
    of every role (``roles``) and what differs (verdict()) -> cells, a drifting value marked."""
    drift = drift or {}
    moved = {i.get("name") for i in (((roles or {}).get("shown") or {}).get("net_mtu") or {})
             .get("runtime") or []}
    mtu = ", ".join(_marked(f"{k} {v}", k in moved)
                    for k, v in (state.get("mtu") or {}).items()) or "-"
    if "mtu" in drift and not moved:
        mtu = _marked(mtu, True)
    _word, val_text = record.cell(state.get("validation"), dict(judged) if judged else None)
    row = {"drivers": drivers_cell(state.get("drivers")),
           "modules": modules_cell(state.get("modules")), "mtu": mtu,
           "qos": qos_cell(state.get("qos") or {}),
           "firewall": firewall_cell(state.get("firewall")),
           "runtime": state.get("runtime") or "none", "cdi": cdi_cell(roles),
           "nccl.conf": nccl_cell(state, roles), "gpus": str(state.get("gpus", 0)),
           "validation": val_text}
    for column in ("drivers", "modules", "qos", "firewall", "runtime", "cdi", "nccl.conf"):
        row[column] = _marked(row[column], column in drift)
    return row


class StatusTable:
    """The fleet table, sized for the width it is drawn at: one row per host, each column as
    wide as its text where it fits; where it does not (a terminal of 100 columns), the widest
    columns give way first, never below their longest word (no word is cut in two), so a row
    takes a few lines. A pipe gets one line per host (console.table_console). A marked cell is
    red."""

    def __init__(self, rows: Mapping[str, Mapping[str, str]]) -> None:
        self.rows = rows

    def widths(self, width: int) -> list[int]:
        names = ("host", *COLUMNS)
        cols = [[h for h in self.rows]] + [[str(r[c]) for r in self.rows.values()]
                                             for c in COLUMNS]
        full = [max([len(n), *(len(safe_line(v)) for v in vals)]) for n, vals in
                zip(names, cols, strict=True)]
        least = [max([len(n), *(len(w) for v in vals for w in safe_line(v).split())])
                 for n, vals in zip(names, cols, strict=True)]
        least[0] = full[0]  # the host name whole
        # An interface with its MTU is one unit: never "ens1f0np0" on a line and "9000," below.
        mtu = names.index("mtu")
        least[mtu] = max([least[mtu], *(len(item) + 1 for v in cols[mtu]
                                        for item in safe_line(v).split(", "))])
        out = list(full)
        room = width - (len(names) - 1)  # one space between columns
        while sum(out) > room:
            give = [i for i in range(len(out)) if out[i] > least[i]]
            if not give:
                break
            widest = max(give, key=lambda i: out[i])
            out[widest] -= 1
        return out

    def __rich_console__(self, console: Console, options: Any) -> Any:
        t = Table(box=None, pad_edge=False, padding=(0, 1), collapse_padding=True)
        for name, w in zip(("host", *COLUMNS), self.widths(options.max_width), strict=True):
            t.add_column(name, width=w, justify="right" if name == "gpus" else "left",
                         overflow="fold")
        for host, row in self.rows.items():
            t.add_row(rich_text(host), *(rich_text(row[c], "bold red" if row[c][:1] == MARK
                                                   or f" {MARK}" in row[c] else "")
                                         for c in COLUMNS))
        yield t


def status_table(rows: Mapping[str, Mapping[str, str]]) -> StatusTable:
    return StatusTable(rows)


def notes(drift: Mapping[str, Mapping[str, list[str]]]) -> list[str]:
    """One line per value that differs, under the table: host, column, what and what is wanted."""
    return [f"{MARK} {host} {column}: {line}" for host, columns in drift.items()
            for column, lines in columns.items() for line in lines]


def run(args: argparse.Namespace) -> int:
    options.check_choices(args)
    options.forks(args)
    inv = inventory_mod.load(args.inventory, limit=args.limit)
    spec = options.run_spec(args, find_playbook("status.yml"), inv)
    states: dict[str, dict[str, Any]] = {}
    roles: dict[str, dict[str, Any]] = {}
    role_failures: dict[str, str] = {}

    def on_event(ev: Mapping[str, Any]) -> None:
        data = ev.get("event_data") or {}
        host, task = str(data.get("host", "")), data.get("task")
        res = data.get("res") or {}
        if ev.get("event") == "runner_on_ok" and task == PROBE_TASK:
            states[host] = {k: res.get(k) for k in STATE_KEYS}
        elif ev.get("event") == "runner_on_ok" and task == ROLES_TASK:
            roles[host] = {k: res.get(k) for k in ("differ", "shown", "nccl_conf", "roles")}
        elif ev.get("event") in ("runner_on_failed", "runner_on_unreachable") and host:
            role_failures[host] = f"{task}: " + failure_message(res)

    result = RunnerSession(spec, on_event=on_event).run()
    rows: dict[str, dict[str, str]] = {}
    drift: dict[str, dict[str, list[str]]] = {}
    judged = record.load(args.inventory)
    for host in inv.selected:
        if host in states:
            drift[host] = verdict(states[host], roles.get(host), role_failures.get(host))
            rows[host] = cells(states[host], judged.get(host), roles.get(host), drift[host])
            word, _text = record.cell(states[host].get("validation"), judged.get(host))
            if states[host].get("validation") or word != "never":
                states[host]["validation"] = {**(states[host].get("validation") or {}),
                                              "verdict": word, "judged": judged.get(host)}
            states[host]["drift"] = drift[host]
            states[host]["roles"] = roles.get(host)
        else:
            h = result.hosts.get(host)
            rows[host] = {c: "" for c in COLUMNS} | {
                "drivers": host_reason(h, result.error or "no answer")}
    drift = {h: d for h, d in drift.items() if d}
    if not result.hosts and len(states) < len(inv.selected):
        code = 1  # ansible-playbook itself gave up (its error below)
    else:
        code = 0 if len(states) == len(inv.selected) and not drift else 2
    if args.json:
        doc = progress.result_document(result, code)
        doc["nodes"] = states
        doc["drift"] = drift
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return code
    console = table_console(sys.stdout)
    console.print(status_table(rows))
    for line in notes(drift):
        console.print(rich_text(line, "red"))
    answered = [h for h in inv.selected if h in states]
    if drift:
        console.print(rich_text(f"drift: {len(drift)} of {len(answered)} hosts; {LEGEND}"))
    elif answered:
        console.print(rich_text(f"in line: {len(answered)} of {len(answered)} hosts, as the "
                                "roles want"))
    if code == 1 and result.error:
        print(f"rdmaprov: error: {safe_line(result.error)}", file=sys.stderr)
    return code
