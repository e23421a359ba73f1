"""Day-2 logic: which roles a setting touches, batches and the failure budget of a rollout,
and the drift table (host x setting, current → wanted) from the events of a --check run.

Pure functions over names and runner events; rdmaprov.cli.reconfigure wires them to the engine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rdmaprov import extravars
from rdmaprov.errors import UserError
from rdmaprov.inventory import GENERIC_PREFIX, Specs, check_variables

# -- what a change touches ---------------------------------------------------------------------


def parse_set(items: list[str]) -> dict[str, Any]:
    """``--set`` values, in every form ``-e`` takes (name=value, several a=1 b=2, YAML/JSON,
    @file; rdmaprov.extravars reads both), merged: a later one wins."""
    return extravars.merged(items, "--set")


def roles_for(names: list[str], specs: Specs) -> list[str]:
    """The roles whose variables these are (the role whose argument spec declares each), in a
    stable order; a name no role declares is an error."""
    roles: list[str] = []
    for name in names:
        role = specs.role_of.get(name)
        if role is None:
            if name.startswith(GENERIC_PREFIX) and name in specs.options:
                raise UserError(f"--set {name}: not a role setting (a play setting: give it "
                                "with -e)")
            typo = [p for p in check_variables({name: None}, specs) if "did you mean" in p]
            hint = typo[0][typo[0].index(" (did you mean"):] if typo else ""
            raise UserError(f"--set: unknown variable {name}{hint}; no rdmaprov role declares it")
        if role not in roles:
            roles.append(role)
    return sorted(roles)


# -- batches -----------------------------------------------------------------------------------


def _count(text: str, total: int, what: str, *, minimum: int) -> int:
    raw = str(text).strip()
    try:
        if raw.endswith("%"):
            pct = float(raw[:-1])
            if not 0 <= pct <= 100:
                raise ValueError
            value = math.floor(total * pct / 100)
        else:
            value = int(raw)
            if value < 0:
                raise ValueError
    except ValueError:
        raise UserError(f"{what} {raw!r}: expected a count (e.g. 4) or a percentage "
                        "(e.g. 25%)") from None
    return max(minimum, value)


def batch_size(text: str | None, total: int) -> int:
    """``--batch N`` or ``N%`` of the selected hosts; at least 1 (no option: all at once)."""
    if text is None:
        return max(1, total)
    size = _count(text, total, "--batch", minimum=1)
    return min(size, max(1, total))


def max_failures(text: str | None, total: int) -> int:
    """How many failed hosts the rollout tolerates before it stops (default 0)."""
    return 0 if text is None else _count(text, total, "--max-fail", minimum=0)


def batches(hosts: list[str], size: int) -> list[list[str]]:
    return [hosts[i:i + size] for i in range(0, len(hosts), size)]


# -- drift from --check events -----------------------------------------------------------------


@dataclass(frozen=True)
class DriftRow:
    host: str
    setting: str  # role : task [item]
    current: str
    wanted: str


# A changed task that says neither from what nor to what (no loop label of the roles' form, no
# --diff): its row's current and wanted.
UNSAID = ("differs", "would change")


def _short(text: Any, width: int = 40) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[:width - 3] + "..."


def _from_label(label: str) -> tuple[str, str, str] | None:
    """Loop labels written as 'name: current -> wanted' (the roles' convention)."""
    if "->" not in label:
        return None
    left, wanted = label.rsplit("->", 1)
    name, sep, current = left.rpartition(":")
    if not sep:
        name, current = "", left
    return name.strip(), current.strip(), wanted.strip()


_APT_ACTIONS = (("NEW packages will be installed", "install"),
                ("packages will be upgraded", "upgrade"),
                ("packages will be DOWNGRADED", "downgrade"),
                ("packages will be REMOVED", "remove"))


def _from_apt(prepared: str) -> tuple[str, str] | None:
    """apt's --diff text ('The following NEW packages will be installed:' and its indented
    package lines): what it would do, counted."""
    found: dict[str, list[str]] = {}
    section = None
    for line in prepared.splitlines():
        if line.startswith(" ") and section:
            found[section] += line.split()
            continue
        section = next((verb for text, verb in _APT_ACTIONS if text in line), None)
        if section:
            found.setdefault(section, [])
    if not found:
        return None
    wanted = "; ".join(f"{verb} {len(pkgs)}: {' '.join(pkgs)}" for verb, pkgs in found.items())
    return "apt: not as wanted", _short(wanted, 60)


def _from_diff(diff: Any) -> tuple[str, str] | None:
    diffs = diff if isinstance(diff, list) else [diff]
    for d in diffs:
        if not isinstance(d, Mapping):
            continue
        if isinstance(d.get("prepared"), str):
            return _from_apt(d["prepared"])
        before, after = d.get("before"), d.get("after")
        if isinstance(before, Mapping) and isinstance(after, Mapping):  # file state etc.
            keys = [k for k in after if before.get(k) != after.get(k) and k != "path"]
            if keys:
                return (", ".join(f"{k}={before.get(k)}" for k in keys),
                        ", ".join(f"{k}={after.get(k)}" for k in keys))
        if isinstance(before, str) and isinstance(after, str):
            if "\n" not in before.strip() and "\n" not in after.strip():
                return _short(before or "(absent)"), _short(after or "(empty)")
            b, a = before.splitlines(), after.splitlines()
            added = [x for x in a if x not in b]
            removed = [x for x in b if x not in a]
            # A template's before_header is the file on the node (absent: none); after_header
            # is a temporary copy of the template on the control host, which says nothing.
            where = d.get("before_header") or "file"
            current = f"{where} ({len(b)} lines)" if b else f"{where} absent"
            if len(added) + len(removed) <= 3:
                wanted = " ".join([*(f"-{x.strip()}" for x in removed),
                                   *(f"+{x.strip()}" for x in added)])
                return current, _short(wanted or "reordered", 60)
            return current, f"+{len(added)} -{len(removed)} lines"
    return None


@dataclass
class DriftCollector:
    """An engine event consumer: keeps one row per changed task (or loop item) per host."""

    rows: list[DriftRow] = field(default_factory=list)

    def __call__(self, event: Mapping[str, Any]) -> None:
        from rdmaprov.engine import task_label

        kind = event.get("event")
        if kind not in ("runner_on_ok", "runner_item_on_ok"):
            return
        data = event.get("event_data") or {}
        res = data.get("res") or {}
        if not res.get("changed"):
            return
        if kind == "runner_on_ok" and "results" in res:
            return  # a loop: its items came as runner_item_on_ok
        host = str(data.get("host", ""))
        setting = task_label(data)
        label = res.get("_ansible_item_label")
        if kind == "runner_item_on_ok" and label is None:
            label = res.get("item")
        parsed = _from_label(str(label)) if label is not None else None
        if parsed is not None:
            name, current, wanted = parsed
            if name:
                setting = f"{setting} [{name}]"
            self.rows.append(DriftRow(host, setting, current, wanted))
            return
        if label is not None:
            setting = f"{setting} [{_short(label, 60)}]"
        pair = _from_diff(res.get("diff"))
        current, wanted = pair if pair else UNSAID
        self.rows.append(DriftRow(host, setting, current, wanted))

    def as_dicts(self) -> list[dict[str, str]]:
        return [r.__dict__.copy() for r in self.rows]
