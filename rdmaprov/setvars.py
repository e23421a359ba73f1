"""reconfigure's --set values before and after the rollout: refused where another variable
shadows them (rdmaprov.shadows), and recorded in the inventory with --write FILE."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rdmaprov import hostlist, shadows, values
from rdmaprov.errors import UserError
from rdmaprov.inventory import Inventory, VarSource


def refuse_shadowed(settings: dict[str, Any], inv: Inventory) -> list[str]:
    """A --set that another variable shadows on every selected host is refused, one line
    each, before any host is touched; one shadowed only on some hosts or items is a warning
    line (returned, for the command to print)."""
    refused, warned = [], []
    for name, value in settings.items():
        verdict = shadows.judge(name, inv)
        if verdict is None or not verdict.shadowed:
            continue
        line = shadows.describe(verdict, value)
        if verdict.no_effect:
            refused.append(line)
        else:
            warned.append(line + " (it applies to the rest)")
    if refused:
        raise UserError("\n".join(refused))
    return warned


# -- --write FILE: the --set values recorded in the inventory ----------------------------------

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)[ \t]*:(?:[ \t]|$)")
_COMMENT = re.compile(r"^(.*?)([ \t]+#.*)$")


class _Dumper(yaml.SafeDumper):
    """Block style with list items indented under their key (what yamllint expects)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> Any:
        return super().increase_indent(flow, False)


@dataclass(frozen=True)
class WritePlan:
    path: Path
    shown: str  # as messages name it (relative to the inventory's folder)
    before: str | None  # the file's text now; None: no such file yet
    after: str
    names: tuple[str, ...]  # the variables whose value the file changes

    @property
    def changes(self) -> bool:
        return self.after != self.before


def _dump(name: str, value: Any, indentless: bool = False) -> str:
    """``name: value`` in block style; list items indented under their key unless
    ``indentless`` (the style of the lines it replaces)."""
    return yaml.dump({name: value}, Dumper=yaml.SafeDumper if indentless else _Dumper,
                     default_flow_style=False, sort_keys=False, allow_unicode=True, width=100)


def _load(text: str) -> Any:
    from rdmaprov.inventory import _StrictYaml

    return yaml.load(text, Loader=_StrictYaml)  # a SafeLoader; !vault values read as None


def _replace(text: str, name: str, value: Any, old: Any) -> str:
    """``text`` with the top-level ``name:`` (its line and the lines of its value) replaced by
    ``name: value``, or that appended; a one-line value keeps its comment."""
    lines = text.splitlines(keepends=True)
    new = _dump(name, value)
    for i, line in enumerate(lines):
        m = _KEY.match(line)
        if not m or m.group(1) != name:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith(("---", "...")) and (
                lines[j][:1] in (" ", "\t", "-", "#") or not lines[j].strip()):
            j += 1
        while j > i + 1 and (not lines[j - 1].strip() or lines[j - 1].startswith("#")):
            j -= 1
        if any(line.startswith("-") for line in lines[i + 1:j]):
            new = _dump(name, value, indentless=True)
        comment = _COMMENT.match(line.rstrip("\n"))
        if j == i + 1 and comment and new.count("\n") == 1:
            try:
                same = _load(comment.group(1)) == {name: old}
            except yaml.YAMLError:
                same = False
            if same:
                new = new.rstrip("\n") + comment.group(2) + "\n"
        return "".join(lines[:i]) + new + "".join(lines[j:])
    if text and not text.endswith("\n"):
        text += "\n"
    return (text or "---\n") + new


def _target(path: Path, inv: Inventory) -> tuple[str, str]:
    """(kind, name): group_vars/NAME[.yml] or host_vars/NAME[.yml] of the inventory's folder,
    or a one-line refusal."""
    base = (inv.base or inv.path.parent).resolve()
    full = path.expanduser().absolute()
    full = full.parent.resolve() / full.name
    example = _shown_path(base / "group_vars" / "all.yml")
    for kind in ("group_vars", "host_vars"):
        try:
            rel = full.relative_to(base / kind)
        except ValueError:
            continue
        if full.suffix not in (".yml", ".yaml") or len(rel.parts) > 2:
            break
        return kind, rel.parts[0] if len(rel.parts) == 2 else full.stem
    raise UserError(f"--write {path}: not a .yml file in the group_vars/ or host_vars/ of the "
                    f"inventory (e.g. {example})")


def _shown_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _rank(src: VarSource, order: list[str]) -> tuple[int, int, float]:
    """A source's place in Ansible's precedence for one host (inventory group vars, group_vars
    files by group, the inventory's host vars, host_vars files, -e/--set)."""
    if src.extra:
        return (4, 0, 0)
    if src.group is not None:
        return (1 if src.path is not None else 0, order.index(src.group)
                if src.group in order else 0, 0)
    return (3, 0, 0) if src.path is not None else (2, 0, 0)


def plan_write(path: Path, settings: dict[str, Any], inv: Inventory) -> WritePlan:
    """What --write FILE will write, checked before any host is touched: a group_vars/host_vars
    YAML file of the inventory that every selected host reads, where nothing outranks it, and
    that stays the same mapping but for the --set values."""
    if not settings:
        raise UserError(f"--write {path}: nothing to write (no --set)")
    kind, name = _target(path, inv)
    full = path.expanduser().absolute()
    full = full.parent.resolve() / full.name
    shown = _shown_path(full)
    hosts = inv.selected
    if kind == "group_vars":
        outside = [h for h in hosts if name not in inv.groups.get(h, [])]
        what = f"not in group {name}"
    else:
        outside = [h for h in hosts if h != name]
        what = f"not host {name}"
    if outside:
        verb = "is" if len(outside) == 1 else "are"
        raise UserError(f"--write {shown}: {hostlist.fold(outside)} {verb} {what}, so the "
                        "next bootstrap would put the old value back there; "
                        "choose a file every selected host reads (group_vars/all.yml) or --limit")
    before: str | None = None
    old: dict[str, Any] = {}
    if full.exists():
        try:
            before = full.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--write {shown}: cannot read it ({exc})") from None
        if before.lstrip().startswith("$ANSIBLE_VAULT"):
            raise UserError(f"--write {shown}: encrypted with ansible-vault; set the values "
                            "there with ansible-vault edit")
        try:
            data = _load(before)
        except yaml.YAMLError as exc:
            from rdmaprov.inventory import _yaml_reason

            raise UserError(f"--write {shown}: not valid YAML ({_yaml_reason(exc)})") from None
        if data is not None and not isinstance(data, dict):
            raise UserError(f"--write {shown}: not a mapping of variables "
                            f"({type(data).__name__})")
        old = data or {}
    after = before or ""
    for var, value in settings.items():
        if var in old and old[var] == value:
            continue
        after = _replace(after, var, value, old.get(var))
    try:
        got = _load(after)
    except yaml.YAMLError:
        got = None
    wanted = {**old, **settings}
    if not isinstance(got, dict) or got != wanted or list(got)[:len(old)] != list(old):
        raise UserError(f"--write {shown}: its layout cannot be updated line by line here; "
                        f"set {', '.join(settings)} there by hand")
    _outranked(full, kind, name, settings, inv, shown)
    return WritePlan(full, shown, before, after,
                     tuple(v for v in settings if old.get(v, _ABSENT) != settings[v]))


_ABSENT = object()


def _outranked(full: Path, kind: str, name: str, settings: dict[str, Any], inv: Inventory,
               shown: str) -> None:
    """Refuse a file whose value some selected host would not get: a source above it in
    Ansible's precedence (a group that outranks its group, host_vars, the inventory's host
    vars) sets the variable to another value."""
    problems: dict[tuple[str, str, str], list[str]] = {}
    for host in inv.selected:
        chain = inv.sources.get(host, [])
        order = inv.groups.get(host, [])
        mine = next((s for s in chain if s.path is not None and s.path.resolve() == full), None)
        if mine is not None:
            above = chain[chain.index(mine) + 1:]
        else:
            rank = (1, order.index(name), 1.0) if kind == "group_vars" else (3, 0, 1.0)
            above = [s for s in chain if _rank(s, order) > rank]
        for var, value in settings.items():
            setters = [s for s in above if not s.extra and var in s.data]
            if not setters:
                continue
            there = setters[-1].data[var]
            if values.templated(there):  # never compared, never decrypted: it outranks
                key = (var, "(a Jinja or vault value)", setters[-1].where)
            elif there != value:
                key = (var, shadows.shown(there), setters[-1].where)
            else:
                continue
            problems.setdefault(key, []).append(host)
    if problems:
        (var, value, where), hosts = next(iter(problems.items()))
        raise UserError(f"--write {shown}: {hostlist.fold(hosts)} would still get {var}={value} "
                        f"from {where}, which outranks it; write there instead")


def apply_write(plan: WritePlan) -> str:
    """Write the file (atomically, its mode kept); the line that says what was done."""
    names = ", ".join(plan.names)
    if not plan.changes:
        return f"--write {plan.shown}: already holds these values; unchanged"
    current = plan.path.read_text() if plan.path.exists() else None
    if current != plan.before:
        raise UserError(f"--write {plan.shown}: changed during the run; not written (set "
                        f"{names} there by hand)")
    plan.path.parent.mkdir(parents=True, exist_ok=True)
    mode = plan.path.stat().st_mode & 0o7777 if plan.path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=plan.path.parent, prefix=f".{plan.path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(plan.after)
        os.chmod(tmp, mode)
        os.replace(tmp, plan.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return f"--write {plan.shown}: recorded {names}"
