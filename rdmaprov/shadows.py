"""Which role variables another variable shadows: the roles' own precedence between a default
and the specific values that win over it, as one table (SHADOWS), read by reconfigure before any
host is touched.

A ``--set`` outranks every inventory value of its own variable (Ansible's extra vars), but not
a variable the role itself prefers: ``net_mtu_default`` is only the MTU of a listed interface
that gives none, so where net_mtu_interfaces gives eth1 an ``mtu``, ``--set net_mtu_default=4000``
does nothing to eth1. The table says, for each such pair, which variable wins where; the rules
are the roles' (plugins/module_utils: netcfg_mtu.merge_interfaces, driver_plan.combine_modules,
rdma_nccl.conf), held against them by tests/unit/test_shadows.py.

Judged from the values each host gets from the inventory (group_vars, host_vars, the inventory's
own, -e and --set) as rdmaprov.inventory loads them; a value only the run knows (Jinja, vault)
is not judged. What depends on a host's facts (nccl_env_ib_tc applies to RoCE ports only) is not
claimed: nothing here needs the host.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rdmaprov import hostlist


@dataclass(frozen=True)
class Layers:
    """Lists of entries keyed by their name, merged in this order: a later layer's entry for a
    name wins over an earlier one's, wholly (``by_field`` false) or field by field."""
    names: tuple[str, ...]
    by_field: bool = False
    # (field, value): a merged entry with that value is left out (rdma_modules' state: absent).
    dropped_when: tuple[str, str] | None = None
    # Role: plugins/module_utils/<module>.<function>, named in messages and held in tests.
    rule: str = ""


@dataclass(frozen=True)
class FieldDefault:
    """``variable`` is the ``field`` of every entry of ``layers`` that gives none."""
    variable: str
    layers: Layers
    field: str


@dataclass(frozen=True)
class DictKey:
    """``variable`` is written as ``key``, unless the mapping variable ``over`` names the key."""
    variable: str
    over: str
    key: str


NET_MTU_INTERFACES = Layers(("net_mtu_interfaces", "net_mtu_interfaces_group",
                             "net_mtu_interfaces_host"), rule="netcfg_mtu.merge_interfaces")
RDMA_MODULES = Layers(("rdma_modules_base", "rdma_modules_extra", "rdma_modules_group_extra",
                       "rdma_modules_host_extra"), by_field=True,
                      dropped_when=("state", "absent"),
                      rule="driver_plan.combine_modules")

SHADOWS: tuple[Layers | FieldDefault | DictKey, ...] = (
    NET_MTU_INTERFACES,
    FieldDefault("net_mtu_default", NET_MTU_INTERFACES, "mtu"),
    RDMA_MODULES,
    DictKey("nccl_env_socket_ifname", "nccl_env_extra", "NCCL_SOCKET_IFNAME"),
    DictKey("nccl_env_ib_tc", "nccl_env_extra", "NCCL_IB_TC"),
)


@dataclass(frozen=True)
class Shadowed:
    """On ``host``, ``item`` (an interface, a module, or "" for the variable as a whole) of
    the variable is decided by ``winner`` instead, set in ``where``; ``winner`` None: the
    variable reaches nothing there (``why``)."""
    host: str
    item: str
    winner: str | None
    where: str
    why: str = ""


@dataclass(frozen=True)
class Verdict:
    variable: str
    shadowed: list[Shadowed]
    effective: int  # (host, item) pairs the value does reach, or that are not judged

    @property
    def no_effect(self) -> bool:
        return bool(self.shadowed) and self.effective == 0


def _known(value: Any) -> bool:
    from rdmaprov import values

    if values.templated(value):
        return False
    if isinstance(value, list):
        return all(_known(v) for v in value)
    if isinstance(value, dict):
        return all(_known(v) for v in value.values())
    return True


def _entries(layers: Layers, name: str, value: Any) -> list[dict[str, Any]] | None:
    """A layer's entries as the role reads them ({name, ...}); None: not judged here."""
    if not isinstance(value, list) or not _known(value):
        return None
    out = []
    for item in value:
        if layers.by_field:
            from rdmaprov import collection

            try:
                entry = collection.driver_plan._entry(item)
            except ValueError:
                return None
            entry["key"] = entry["name"].replace("-", "_")
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            entry = {**item, "key": item["name"]}
        else:
            return None
        out.append(entry)
    return out


def _layered(layers: Layers, values: Mapping[str, Any]
             ) -> list[tuple[str, list[dict[str, Any]]]] | None:
    out = []
    for name in layers.names:
        entries = _entries(layers, name, values.get(name, []))
        if entries is None:
            return None
        out.append((name, entries))
    return out


def _origin(sources: list[Any], name: str) -> str:
    for src in reversed(sources):
        if name in src.data:
            return str(src.where)
    return "the role's default"


def _fields(entry: Mapping[str, Any]) -> set[str]:
    return {k for k in entry if k not in ("name", "key")}


def _judge_host(rule: Layers | FieldDefault | DictKey, variable: str, host: str,
                values: Mapping[str, Any], sources: list[Any]) -> tuple[list[Shadowed], int]:
    shadowed: list[Shadowed] = []
    if isinstance(rule, DictKey):
        over = values.get(rule.over)
        if isinstance(over, Mapping) and rule.key in over:
            return [Shadowed(host, "", f"{rule.over}.{rule.key}",
                             _origin(sources, rule.over))], 0
        return [], 1
    layers = rule.layers if isinstance(rule, FieldDefault) else rule
    merged = _layered(layers, values)
    if merged is None:
        return [], 1
    effective = 0
    if isinstance(rule, FieldDefault):
        last: dict[str, tuple[str, dict[str, Any]]] = {}
        for layer, entries in merged:
            for entry in entries:
                last[entry["key"]] = (layer, entry)
        if not last:
            listed = ", ".join(layers.names[:-1]) + f" or {layers.names[-1]}"
            return [Shadowed(host, "", None, "", f"no entry is listed in {listed}")], 0
        for key, (layer, entry) in last.items():
            if entry.get(rule.field) is None:
                effective += 1
            else:
                shadowed.append(Shadowed(host, key, layer, _origin(sources, layer)))
        return shadowed, effective
    index = layers.names.index(variable)
    for entry in dict(merged)[variable]:
        later = [(layer, e) for layer, entries in merged[index + 1:] for e in entries
                 if e["key"] == entry["key"]]
        if not later:
            effective += 1
            continue
        if layers.by_field:
            given = set().union(*(_fields(e) for _layer, e in later))
            final = {**entry}
            for _layer, e in later:
                final.update(e)
            drop = layers.dropped_when
            dropped = drop is not None and final.get(drop[0]) == drop[1]
            if not dropped and not _fields(entry) <= given:
                effective += 1
                continue
        layer = later[-1][0]
        shadowed.append(Shadowed(host, entry["name"], layer, _origin(sources, layer)))
    return shadowed, effective


def rule_of(variable: str) -> Layers | FieldDefault | DictKey | None:
    for rule in SHADOWS:
        if isinstance(rule, Layers):
            if variable in rule.names[:-1]:
                return rule
        elif rule.variable == variable:
            return rule
    return None


def judge(variable: str, inventory: Any) -> Verdict | None:
    """Where ``variable``'s value (as each selected host gets it: a --set outranks the
    inventory) is shadowed; None when no rule of SHADOWS concerns it."""
    rule = rule_of(variable)
    if rule is None:
        return None
    shadowed: list[Shadowed] = []
    effective = 0
    for host in inventory.selected:
        found, reached = _judge_host(rule, variable, host, inventory.variables.get(host, {}),
                                     inventory.sources.get(host, []))
        shadowed += found
        effective += reached
    return Verdict(variable, shadowed, effective)


def shown(value: Any) -> str:
    """A value as it would be typed after ``--set name=``."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(", ", ": "), default=str)


def describe(verdict: Verdict, value: Any) -> str:
    """One line: where the value has no effect, who wins there, and where that is set."""
    rule = rule_of(verdict.variable)
    word = f"its {rule.field}" if isinstance(rule, FieldDefault) else "it"
    by: dict[tuple[str, str | None, str, str], list[str]] = {}
    for s in verdict.shadowed:
        by.setdefault((s.item, s.winner, s.where, s.why), []).append(s.host)
    parts = []
    winners: list[str] = []
    for (item, winner, where, why), hosts in by.items():
        on = f"{item} of {hostlist.fold(hosts)}" if item else hostlist.fold(hosts)
        top = (winner or "").split(".")[0]
        if winner is None and isinstance(rule, FieldDefault):
            top = rule.layers.names[0]
        if top and top not in winners:
            winners.append(top)
        parts.append(f"on {on}: {why}" if winner is None
                     else f"on {on}: {winner} sets {word} ({where})")
    line = f"--set {verdict.variable}={shown(value)} has no effect " + "; ".join(parts)
    return line + (f"; set {' or '.join(winners)} instead" if winners else "")
