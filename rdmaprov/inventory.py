"""Load and validate an inventory and its variables before any host is touched.

Parsing uses Ansible's own InventoryManager and DataLoader (same plugins as the run: yaml, ini)
so the semantics match, but an inventory that does not parse is an error here rather than
Ansible's warning and empty inventory. No SSH, no DNS: only files are read.

Variables whose names start with a role's prefix (``net_mtu_``, ``roce_qos_``, ... taken from
``roles/*/meta/argument_specs.yml``) or ``rdmaprov_`` are checked against the roles' argument
specs: unknown names (with a did-you-mean), types, choices, and the ranges in RANGES.
Every problem is one line: ``<where>: <what is wrong>``.
"""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rdmaprov.errors import UserError
from rdmaprov.values import RANGES, check_value  # noqa: F401  (shared with check)
from rdmaprov.values import did_you_mean as _did_you_mean
from rdmaprov.values import templated as _templated

GENERIC_PREFIX = "rdmaprov_"

_HOSTNAME = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
_YAML_EXTS = (".yml", ".yaml", ".json")


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class Inventory:
    """A parsed, validated inventory: what the engine and the progress view need."""

    path: Path
    hosts: list[str]  # every host in the inventory
    selected: list[str]  # the hosts left after --limit
    extravars: dict[str, Any] = field(default_factory=dict)


# -- argument specs -------------------------------------------------------------------------


@dataclass
class Specs:
    """The public variables of the collection's roles, by name."""

    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    prefixes: tuple[str, ...] = (GENERIC_PREFIX,)

    def prefix_of(self, name: str) -> str | None:
        matches = [p for p in self.prefixes if name.startswith(p)]
        return max(matches, key=len) if matches else None


def load_specs(collection: Path) -> Specs:
    """Read every ``roles/*/meta/argument_specs.yml`` (all entry points) of a collection."""
    options: dict[str, dict[str, Any]] = {}
    prefixes = {GENERIC_PREFIX}
    for spec_file in sorted((collection / "roles").glob("*/meta/argument_specs.y*ml")):
        role = spec_file.parent.parent.name
        prefixes.add(f"{role}_")
        data = yaml.safe_load(spec_file.read_text()) or {}
        for entry in (data.get("argument_specs") or {}).values():
            for name, opt in ((entry or {}).get("options") or {}).items():
                options.setdefault(name, opt or {})
    return Specs(options=options, prefixes=tuple(sorted(prefixes)))


# -- values ---------------------------------------------------------------------------------


def check_variables(variables: Mapping[str, Any], specs: Specs) -> list[str]:
    """Problems with the rdmaprov variables in one mapping (host, group, file or -e)."""
    problems: list[str] = []
    for name in sorted(variables):
        key = str(name)
        if specs.prefix_of(key) is None:
            continue
        spec = specs.options.get(key)
        if spec is None:
            problems.append(f"unknown variable {key}" + _did_you_mean(key, specs.options))
            continue
        problems += check_value(key, key, variables[name], spec)
    return problems


# -- extra vars -----------------------------------------------------------------------------


def load_extra_vars(values: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """``-e`` values (key=value, YAML/JSON, @file), each with a label for messages."""
    from ansible.parsing.splitter import parse_kv

    out: list[tuple[str, dict[str, Any]]] = []
    for raw in values:
        text = raw.strip()
        if text.startswith("@"):
            path = Path(text[1:]).expanduser()
            label = f"{path} (-e @)"
            try:
                data = yaml.safe_load(path.read_text())
            except FileNotFoundError:
                raise UserError(f"-e {text}: no such file") from None
            except OSError as exc:
                raise UserError(f"-e {text}: cannot read: {exc.strerror}") from None
            except yaml.YAMLError as exc:
                raise UserError(f"{path}: not valid YAML/JSON: {_yaml_reason(exc)}") from None
        elif text.startswith(("{", "[")):
            label = "-e"
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise UserError(f"-e {text!r}: not valid YAML/JSON: {_yaml_reason(exc)}") from None
        elif text:
            label = "-e"
            try:
                data = parse_kv(text)
            except Exception as exc:  # ansible raises its own error types for bad quoting
                raise UserError(f"-e {text!r}: {exc}") from None
            if not data or "_raw_params" in data:
                raise UserError(f"-e {text!r}: expected key=value, YAML/JSON or @file")
        else:
            raise UserError("-e: empty value")
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise UserError(f"{label}: extra vars must be a mapping, not {type(data).__name__}")
        out.append((label, data))
    return out


def _yaml_reason(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}: {problem}" if mark is not None else str(problem)


# -- parsing with Ansible -------------------------------------------------------------------


class _Recorder:
    """Stands in for ansible's Display while parsing: keeps the parse errors, prints nothing."""

    def __init__(self) -> None:
        self.failures: list[tuple[str, BaseException]] = []

    def error_as_warning(self, msg: str, exception: BaseException, **_: Any) -> None:
        self.failures.append((msg, exception))

    def __getattr__(self, _name: str) -> Callable[..., None]:
        return lambda *a, **k: None


@contextlib.contextmanager
def _ansible_parsing() -> Iterator[_Recorder]:
    """Parse the way the run will (see rdmaprov.settings), silently, with errors kept."""
    import ansible.constants as C
    from ansible.inventory import manager

    saved_env = os.environ.get("ANSIBLE_DUPLICATE_YAML_DICT_KEY")
    saved = (C.INVENTORY_ENABLED, C.INVENTORY_ANY_UNPARSED_IS_FAILED, manager.display)
    recorder = _Recorder()
    os.environ["ANSIBLE_DUPLICATE_YAML_DICT_KEY"] = "error"
    C.INVENTORY_ENABLED = ["yaml", "ini"]
    C.INVENTORY_ANY_UNPARSED_IS_FAILED = True
    manager.display = recorder
    try:
        yield recorder
    finally:
        C.INVENTORY_ENABLED, C.INVENTORY_ANY_UNPARSED_IS_FAILED, manager.display = saved
        if saved_env is None:
            os.environ.pop("ANSIBLE_DUPLICATE_YAML_DICT_KEY", None)
        else:
            os.environ["ANSIBLE_DUPLICATE_YAML_DICT_KEY"] = saved_env


def _shown(path: Path | str) -> str:
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _origin_where(exc: BaseException, fallback: Path) -> str:
    obj = getattr(exc, "obj", None)
    path = getattr(obj, "path", None)
    line = getattr(obj, "line_num", None)
    where = _shown(path or fallback)
    return f"{where}: line {line}" if line else where


def _parse_failure(source: Path, recorder: _Recorder) -> str:
    """One line saying why ``source`` did not parse, from the plugin that should have read it."""
    from ansible.errors import AnsibleError
    from ansible.parsing.dataloader import DataLoader

    yaml_like = source.suffix in _YAML_EXTS
    if yaml_like:
        # The YAML loader knows the line; the inventory plugin's error does not.
        try:
            DataLoader().load_from_file(str(source))
        except AnsibleError as exc:
            return f"{_origin_where(exc, source)}: {_first_line(exc)}"
    wanted = "yaml" if yaml_like else "ini"
    ranked = sorted(recorder.failures, key=lambda f: wanted not in f[0])
    for _msg, failure in ranked:
        cause: BaseException = failure
        while cause.__cause__ is not None:
            cause = cause.__cause__
        text = _first_line(cause).removeprefix("Failed to parse inventory: ")
        return f"{_shown(source)}: {_ini_line(source, text)}{text}"
    return f"{_shown(source)}: not an inventory Ansible can parse (INI or YAML)"


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc)
    text = re.sub(r"<class '[\w.]*?_AnsibleTagged(\w+)'>", lambda m: m.group(1).lower(), text)
    return " ".join(text.strip().splitlines()[0].split()) if text.strip() else type(exc).__name__


def _ini_line(source: Path, message: str) -> str:
    """'line N: ' for an INI error whose message quotes the offending text, else ''."""
    quoted = message.rsplit(": ", 1)[-1].strip()
    if not quoted or source.suffix in _YAML_EXTS or not source.is_file():
        return ""
    for n, line in enumerate(source.read_text(errors="replace").splitlines(), 1):
        if quoted in line:
            return f"line {n}: "
    return ""


def _ini_duplicates(path: Path) -> list[Problem]:
    """Host lines that Ansible merges silently: listed twice in a group, or a variable given
    two different values on two lines."""
    problems: list[Problem] = []
    section = "ungrouped"
    seen: dict[tuple[str, str], int] = {}
    host_vars: dict[str, dict[str, tuple[str, int]]] = {}
    for n, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith((";", "#")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if ":" in section and not section.endswith(":hosts"):
            continue  # [group:vars] and [group:children]
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            continue  # Ansible's parser reports bad quoting itself
        if not tokens:
            continue
        host = tokens[0]
        where = f"{_shown(path)}: line {n}"
        if (section, host) in seen:
            problems.append(Problem(where, f"host {host} is listed twice in [{section}] "
                                           f"(first at line {seen[section, host]})"))
        seen.setdefault((section, host), n)
        for tok in tokens[1:]:
            key, sep, value = tok.partition("=")
            if not sep:
                continue
            prev = host_vars.setdefault(host, {}).get(key)
            if prev is not None and prev[0] != value:
                problems.append(Problem(where, f"host {host}: {key} is {value!r} here but "
                                               f"{prev[0]!r} at line {prev[1]}"))
            host_vars[host].setdefault(key, (value, n))
    return problems


# -- the whole check ------------------------------------------------------------------------


@dataclass
class _Source:
    where: str
    data: Mapping[str, Any]


def _vars_files(loader: Any, base: Path, kind: str, name: str) -> list[Path]:
    folder = base / kind
    if not folder.is_dir():
        return []
    return [Path(p) for p in loader.find_vars_files(str(folder), name)]


def _load_vars_file(loader: Any, path: Path) -> Mapping[str, Any]:
    from ansible.errors import AnsibleError

    try:
        data = loader.load_from_file(str(path), cache="none")
    except AnsibleError as exc:
        raise UserError(f"{_origin_where(exc, path)}: {_first_line(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise UserError(f"{_shown(path)}: must be a mapping of variables, "
                        f"not {type(data).__name__}")
    return data


def _check_address(host: str, merged: Mapping[str, Any], where: str) -> list[Problem]:
    from ansible.module_utils.common.validation import check_type_int

    if str(merged.get("ansible_connection", "")) == "local":
        return []
    problems: list[Problem] = []
    if "ansible_host" in merged:
        addr = merged["ansible_host"]
        if addr is None or (isinstance(addr, str) and not addr.strip()):
            return [Problem(where, f"host {host}: ansible_host is empty")]
        if not isinstance(addr, str):
            return [Problem(where, f"host {host}: ansible_host {addr!r} is not a host name "
                                   "or address")]
    else:
        addr = host
    if not _templated(addr) and not _looks_like_address(addr):
        problems.append(Problem(where, f"host {host}: {addr!r} is not a valid host name or "
                                       "IP address"))
    port = merged.get("ansible_port")
    if port is not None and not _templated(port):
        try:
            value = check_type_int(port)
        except TypeError:
            problems.append(Problem(where, f"host {host}: ansible_port {port!r} is not an "
                                           "integer"))
        else:
            if not 1 <= value <= 65535:
                problems.append(Problem(where, f"host {host}: ansible_port {value} is out of "
                                               "range (1..65535)"))
    return problems


def _looks_like_address(addr: str) -> bool:
    text = addr.strip("[]")
    if ":" in text or re.fullmatch(r"[0-9.]+", text):
        try:
            ipaddress.ip_address(text)
        except ValueError:
            return False
        return True
    return bool(_HOSTNAME.match(text)) and len(text) <= 253


# Characters that --limit reads as pattern syntax (separators ',' ':', '!' '&' prefixes, '~'
# regex, '*' '?' '[' ']' globs and slices, '@' a retry file) or that no host_vars/ file name holds.
_NAME_BREAKERS = frozenset(",:!&~*?[]@/\\")


def _host_name_problem(name: str) -> str | None:
    """Why Ansible cannot use ``name`` as written (spaces, pattern characters), or None."""
    if _looks_like_address(name):
        return None
    bad = sorted({c for c in name if c in _NAME_BREAKERS or c.isspace() or not c.isprintable()})
    if not bad:
        return None
    shown = ", ".join("a space" if c == " " else repr(c) for c in bad)
    return (f"host name {name!r} has {shown}: that breaks --limit patterns and host_vars/ file "
            "names; name it with letters, digits, '.', '-' or '_' and put the address in "
            "ansible_host")


def _not_utf8(path: Path) -> str | None:
    """'<file>: line N, byte M (0xNN) is not UTF-8 ...' for the first undecodable byte."""
    try:
        data = path.read_bytes()
    except OSError:
        return None  # unreadable files are reported where they are parsed
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return (f"{_shown(path)}: line {line}, byte {column} (0x{data[exc.start]:02x}) is not "
                "UTF-8; Ansible reads inventories as UTF-8: convert the file (iconv -t UTF-8)")
    return None


def _inventory_files(source: Path) -> list[Path]:
    """The inventory's own files and the group_vars/host_vars beside it (hidden ones skipped)."""
    base = source if source.is_dir() else source.parent
    roots = [source] if source.is_dir() else [source, base / "group_vars", base / "host_vars"]
    found: list[Path] = []
    for root in roots:
        if root.is_file():
            found.append(root)
        elif root.is_dir():
            found += sorted(p for p in root.rglob("*") if p.is_file()
                            and not any(part.startswith(".") for part in p.relative_to(root).parts))
    return found


def _connection_problem(name: str) -> str | None:
    """Why ``ansible_connection: name`` would fail at the first task, or None: not a connection
    plugin of ansible-core (or an alias, or a redirect to an installed collection)."""
    import ansible
    import ansible.constants as C
    from ansible.plugins.loader import connection_loader

    core = Path(ansible.__file__).parent
    builtin = {p.stem for p in (core / "plugins/connection").glob("*.py")
               if not p.stem.startswith("_")} | set(connection_loader.aliases) | {"smart"}
    short = name.removeprefix("ansible.builtin.")
    if short in builtin:
        return None
    target = name
    if "." not in short:
        runtime = yaml.safe_load((core / "config/ansible_builtin_runtime.yml").read_text())
        route = ((runtime or {}).get("plugin_routing", {}).get("connection", {}) or {}).get(short)
        if not route or not route.get("redirect"):
            close = difflib.get_close_matches(short, sorted(builtin), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return (f"ansible_connection {name!r} is not a connection plugin{hint}; ansible-core "
                    f"has {', '.join(sorted(builtin))}")
        target = route["redirect"]
    parts = target.split(".")
    if len(parts) != 3:
        return (f"ansible_connection {name!r} is not a plugin name "
                "(NAME or namespace.collection.NAME)")
    ns, coll, plugin = parts
    for base in [*C.COLLECTIONS_PATHS, *sys.path]:
        root = Path(base)
        root = root if root.name == "ansible_collections" else root / "ansible_collections"
        if (root / ns / coll / "plugins/connection" / f"{plugin}.py").is_file():
            return None
    via = f" (it stands for {target})" if target != name else ""
    return (f"ansible_connection {name!r}{via}: the collection {ns}.{coll} is not installed "
            f"here (ansible-galaxy collection install {ns}.{coll})")


def load(path: Path, *, limit: str | None = None, extra_vars: list[str] | None = None,
         collection: Path | None = None) -> Inventory:
    """Parse and validate; raise UserError with the first problem (and how many more)."""
    problems, inv = _validate(path, limit, extra_vars or [], collection)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UserError(f"{problems[0]}{more}")
    assert inv is not None
    return inv


def _validate(path: Path, limit: str | None, extra_vars: list[str],
              collection: Path | None) -> tuple[list[Problem], Inventory | None]:
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    from rdmaprov.resources import collection_root

    if not path.exists():
        raise UserError(f"{path}: no such inventory file")
    if not os.access(path, os.R_OK):
        raise UserError(f"{path}: cannot read the inventory (permission denied)")
    source = path.resolve()
    for f in _inventory_files(source):
        encoding = _not_utf8(f)
        if encoding:
            raise UserError(encoding)
    extras = load_extra_vars(extra_vars)
    loader = DataLoader()
    with _ansible_parsing() as recorder:
        try:
            manager = InventoryManager(loader=loader, sources=[str(source)])
        except AnsibleError as exc:
            failed = Path(str(exc).rsplit(" ", 1)[-1]) if "parse inventory source" in str(exc) \
                else source
            raise UserError(_parse_failure(failed, recorder)) from None

        problems: list[Problem] = []
        ini_files = [source] if source.is_file() else sorted(
            p for p in source.rglob("*") if p.is_file() and p.suffix not in _YAML_EXTS
            and "group_vars" not in p.parts and "host_vars" not in p.parts)
        for ini in ini_files:
            if source.is_dir() and ini.suffix in (".cfg", ".md", ".txt"):
                continue
            problems += _ini_duplicates(ini)

        all_hosts = sorted(h.name for h in manager.get_hosts())
        if not all_hosts:
            raise UserError(f"{_shown(path)}: no hosts in the inventory")
        for host in manager.get_hosts(ignore_restrictions=True):
            bad_name = _host_name_problem(host.name)
            if host.name in manager.groups:
                # Ansible's "Found both group and host with same name" warning.
                bad_name = (f"host {host.name!r} has the name of a group: --limit {host.name} "
                            "and host_vars/group_vars would mean either; rename one of them")
            if bad_name:
                problems.append(Problem(_shown(host.vars.get("inventory_file") or path), bad_name))
        if limit:
            try:
                manager.subset(limit)
                selected = [h.name for h in manager.get_hosts()]
            except AnsibleError as exc:
                raise UserError(f"--limit {limit}: {_first_line(exc)}") from None
            if not selected:
                raise UserError(f"--limit {limit}: matches no host in {_shown(path)}")
        else:
            selected = all_hosts

        specs = load_specs(collection or collection_root())
        base = source if source.is_dir() else source.parent

        # Every place a variable can come from, named for the messages.
        group_sources: dict[str, list[_Source]] = {}
        for name, group in sorted(manager.groups.items()):
            where = f"{_shown(path)}: group {name}"
            srcs = [_Source(where, dict(group.vars))]
            for f in _vars_files(loader, base, "group_vars", name):
                srcs.append(_Source(_shown(f), _load_vars_file(loader, f)))
            group_sources[name] = srcs
        host_sources: dict[str, list[_Source]] = {}
        for host in manager.get_hosts(ignore_restrictions=True):
            inv_file = host.vars.get("inventory_file") or path
            hv = {k: v for k, v in host.vars.items()
                  if k not in ("inventory_file", "inventory_dir")}
            srcs = [_Source(f"{_shown(inv_file)}: host {host.name}", hv)]
            for f in _vars_files(loader, base, "host_vars", host.name):
                srcs.append(_Source(f"{_shown(f)}", _load_vars_file(loader, f)))
            host_sources[host.name] = srcs
        extra_sources = [_Source(label, data) for label, data in extras]

        for src in [*(s for v in group_sources.values() for s in v),
                    *(s for v in host_sources.values() for s in v), *extra_sources]:
            problems += [Problem(src.where, p) for p in check_variables(src.data, specs)]

        # Addresses: what Ansible will connect to, merged the way Ansible merges it.
        seen_addr: dict[tuple[str, str], str] = {}
        for host in manager.get_hosts(ignore_restrictions=True):
            merged: dict[str, Any] = {}
            groups = sorted(host.get_groups(), key=lambda g: (g.depth, g.priority, g.name))
            for g in groups:
                merged.update(group_sources[g.name][0].data)
            for g in groups:
                for s in group_sources[g.name][1:]:
                    merged.update(s.data)
            for s in host_sources[host.name]:
                merged.update(s.data)
            for s in extra_sources:
                merged.update(s.data)
            where = host_sources[host.name][0].where.rsplit(": host ", 1)[0]
            problems += _check_address(host.name, merged, where)
            connection = merged.get("ansible_connection")
            if isinstance(connection, str) and connection and not _templated(connection):
                bad_connection = _connection_problem(connection)
                if bad_connection:
                    problems.append(Problem(where, f"host {host.name}: {bad_connection}"))
            addr = merged.get("ansible_host")
            if isinstance(addr, str) and addr.strip() and not _templated(addr):
                key = (addr.strip(), str(merged.get("ansible_port", 22)))
                if key in seen_addr:
                    problems.append(Problem(where, f"hosts {seen_addr[key]} and {host.name} "
                                                   f"have the same address {key[0]} "
                                                   f"port {key[1]}"))
                seen_addr.setdefault(key, host.name)

    merged_extra: dict[str, Any] = {}
    for _label, data in extras:
        merged_extra.update(data)
    return problems, Inventory(path=path, hosts=all_hosts, selected=sorted(selected),
                               extravars=merged_extra)
