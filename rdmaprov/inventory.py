"""Load and validate an inventory and its variables before any host is touched.

The inventory is read the way ansible-playbook reads it: the inventory plugins Ansible's
configuration enables (an ansible.cfg is found the way ansible-playbook finds it, see
rdmaprov.ansiblecfg), each host's variables from Ansible's VariableManager, and -e values on
top. Nothing of Ansible is patched: where a source does not parse, the enabled plugins are asked
one by one for their reason, so that the error names the file (and line) instead of Ansible's
warning and an empty inventory. No SSH; the only network use is resolving a host's name when
it has no ansible_host (a name the control host cannot resolve fails the run at its first task).

A variable is ours when a role declares it in ``roles/*/meta/argument_specs.yml``; those are
checked by the one validator (plugins/module_utils/input_check.py: Ansible's
ArgumentSpecValidator and the ranges table), and an undeclared name is reported only when it is
a close match of a declared one (a typo). Every problem is one line: ``<where>: <what>``.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import io
import ipaddress
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rdmaprov import collection
from rdmaprov.errors import UserError

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
    # The folder whose group_vars/ and host_vars/ Ansible reads with this inventory.
    base: Path | None = None
    # Per selected host: the rdmaprov variables it gets (-e/--set included), where each of its
    # variables can come from in Ansible's precedence (lowest first; -e/--set last), and its
    # groups in Ansible's order (all first). What reconfigure's --set and --write judge.
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: dict[str, list[VarSource]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)


# -- argument specs -------------------------------------------------------------------------


@dataclass
class Specs:
    """The public variables of the collection's roles, by name."""

    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The role whose main entry point declares a variable (what reconfigure --set runs).
    role_of: dict[str, str] = field(default_factory=dict)


def load_specs(collection: Path) -> Specs:
    """Read every ``roles/*/meta/argument_specs.yml`` (all entry points) of a collection."""
    specs = _checker().role_specs(str(collection / "roles"))
    role_of: dict[str, str] = {}
    for role, entries in specs.items():
        for name in ((entries.get("main") or {}).get("options") or {}):
            role_of.setdefault(name, role)
    return Specs(options=_checker().declared_options(specs), role_of=role_of)


# -- values ---------------------------------------------------------------------------------


def _checker() -> Any:
    return collection.input_check


def check_variables(variables: Mapping[str, Any], specs: Specs) -> list[str]:
    """Problems with the rdmaprov variables in one mapping (host, group, file or -e)."""
    return [line for _name, line in _checker().check(variables, specs.options)]


# -- extra vars -----------------------------------------------------------------------------


def load_extra_vars(values: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """``-e`` values (key=value, YAML/JSON, @file), each with a label for messages: read by
    rdmaprov.extravars, the one reader of -e and --set."""
    from rdmaprov import extravars

    return extravars.parse(values, "-e")


def _yaml_reason(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}: {problem}" if mark is not None else str(problem)


# -- parsing with Ansible -------------------------------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    """Ansible's warnings while parsing (it prints them on sys.stderr) are kept, not printed:
    what is wrong becomes one line of ours."""
    kept = io.StringIO()
    with contextlib.redirect_stderr(kept):
        yield kept


def _plugin_failures(loader: Any, source: Path) -> list[tuple[str, BaseException]] | None:
    """Parse ``source`` (a file) with each inventory plugin Ansible's configuration enables, in
    its order, as InventoryManager does: None when one of them parses it, else the reason of
    each plugin that tried (none tried: an empty list)."""
    import ansible.constants as C
    from ansible.inventory.data import InventoryData
    from ansible.plugins.loader import inventory_loader

    failures: list[tuple[str, BaseException]] = []
    for name in C.INVENTORY_ENABLED:
        plugin = inventory_loader.get(name)
        if plugin is None:
            continue
        try:
            wants = bool(plugin.verify_file(str(source)))
        except Exception:
            wants = False
        if not wants:
            continue
        try:
            plugin.parse(InventoryData(), loader, str(source), cache=False)
        except Exception as exc:  # every plugin error is a reason to show
            failures.append((name, exc))
        else:
            return None
    return failures


def _source_files(source: Path) -> list[Path]:
    """The files Ansible parses for ``source``: itself, or a directory's entries the way
    InventoryManager walks one (hidden files, group_vars/, host_vars/ and the ignored
    extensions skipped)."""
    from ansible.inventory.manager import IGNORED

    if not source.is_dir():
        return [source]
    found: list[Path] = []
    for entry in sorted(os.listdir(source)):
        if not IGNORED.search(os.fsencode(entry)):
            found += _source_files(source / entry)
    return found


def _unparsed(loader: Any, files: list[Path]) -> list[tuple[Path, list[tuple[str, BaseException]]]]:
    """The inventory files that no enabled plugin parses, each with the plugins' reasons."""
    out = []
    for f in files:
        failures = _plugin_failures(loader, f)
        if failures is not None:
            out.append((f, failures))
    return out


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


def _parse_failure(source: Path, failures: list[tuple[str, BaseException]]) -> str:
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
    wanted = "yaml" if yaml_like else "script" if os.access(source, os.X_OK) else "ini"
    if yaml_like and _is_plugin_config(source):
        wanted = "auto"  # an inventory plugin's configuration: `auto` is what loads the plugin
    ranked = sorted(failures, key=lambda f: wanted not in f[0])
    for _name, failure in ranked:
        cause: BaseException = failure
        while cause.__cause__ is not None:
            cause = cause.__cause__
        text = _first_line(cause).removeprefix("Failed to parse inventory: ")
        return f"{_shown(source)}: {_ini_line(source, text)}{text}"
    return (f"{_shown(source)}: no enabled inventory plugin reads this file (enabled: "
            f"{', '.join(_enabled_plugins())}; see [inventory] enable_plugins in ansible.cfg)")


def _is_plugin_config(source: Path) -> bool:
    try:
        data = yaml.safe_load(source.read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "plugin" in data


def _enabled_plugins() -> list[str]:
    import ansible.constants as C

    return [str(n) for n in C.INVENTORY_ENABLED]


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc)
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
        if line.startswith("["):
            header = re.match(r"^\[([^\]]*)\]\s*(?:[#;].*)?$", line)
            if header is None:
                problems.append(Problem(f"{_shown(path)}: line {n}",
                                        f"section header {line!r} is not closed with ']'"))
                section = line[1:] + ":unclosed"
            else:
                section = header[1].strip()
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
class VarSource:
    """One place a host's variables come from: ``where`` as messages name it, the vars file
    (group_vars/, host_vars/; None for the inventory's own and -e/--set), the group a group
    source is of, and whether it is -e/--set (not kept in the inventory)."""
    where: str
    data: Mapping[str, Any]
    path: Path | None = None
    group: str | None = None
    extra: bool = False


_Source = VarSource


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
    if not _checker().unknown_now(addr) and not _looks_like_address(addr):
        problems.append(Problem(where, f"host {host}: {addr!r} is not a valid host name or "
                                       "IP address"))
    port = merged.get("ansible_port")
    if port is not None and not _checker().unknown_now(port):
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


# Bounds on an inventory's files, checked before any parser reads them. Ansible's parsers (and
# ansible-inventory) copy what YAML aliases share and recurse into nesting, so a file of a few
# hundred bytes can keep them busy for minutes; a host range expands to every name. A cluster's
# inventory stays far inside these.
MAX_FILE_BYTES = 16 << 20
MAX_DEPTH = 64  # mappings and lists inside each other
MAX_VALUES = 1_000_000  # values of a file once its aliases are expanded
MAX_RANGE_HOSTS = 100_000  # names one host range (node[1:100]) stands for
_HOST_RANGE = re.compile(r"\[([0-9]+|[a-z]):([0-9]+|[a-z])(?::([0-9]+))?\]")


def _bounds_problem(path: Path, yaml_like: bool) -> str | None:
    """Why ``path`` is refused before it is parsed (size, nesting, alias expansion, a host
    range of too many names), or None."""
    try:
        size = path.stat().st_size
    except OSError:
        return None  # reported where it is read
    if size > MAX_FILE_BYTES:
        return (f"{_shown(path)}: {size / (1 << 20):.1f} MiB; inventory and variable files over "
                f"{MAX_FILE_BYTES >> 20} MiB are refused")
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # reported where it is read
    for n, line in enumerate(text.splitlines(), 1):
        for m in _HOST_RANGE.finditer(line):
            count = _range_count(m)
            if count > MAX_RANGE_HOSTS:
                return (f"{_shown(path)}: line {n}: host range {m[0]} stands for {count} hosts; "
                        f"more than {MAX_RANGE_HOSTS} are refused")
    return _yaml_bounds(path, text) if yaml_like else None


def _range_count(m: re.Match[str]) -> int:
    first, last, step = m[1], m[2], int(m[3] or 1)
    if first.isdigit() != last.isdigit():
        return 0
    lo, hi = (int(first), int(last)) if first.isdigit() else (ord(first), ord(last))
    return max(0, (hi - lo) // max(step, 1) + 1)


def _yaml_bounds(path: Path, text: str) -> str | None:
    fast = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        deep, aliases = _yaml_shape(text, fast)
    except yaml.YAMLError:
        # libyaml stops at its own depth limit with an error of its own; PyYAML's event parser
        # keeps no Python stack per level and finds the depth (or the real syntax error).
        try:
            deep, aliases = _yaml_shape(text, yaml.SafeLoader)
        except yaml.YAMLError:
            return None  # reported where it is parsed, in the parser's words
    if deep is not None:
        where = f"{_shown(path)}: line {deep + 1}" if deep >= 0 else _shown(path)
        return f"{where}: nested more than {MAX_DEPTH} levels deep; refused"
    if not aliases:
        return None
    try:
        values = sum(_expanded(node, {}) for node in yaml.compose_all(text, Loader=fast))
    except yaml.YAMLError:
        return None
    except _Unbounded:
        values = MAX_VALUES + 1
    if values > MAX_VALUES:
        return (f"{_shown(path)}: its aliases (*name) expand to more than {MAX_VALUES} values; "
                "refused")
    return None


def _yaml_shape(text: str, loader: Any) -> tuple[int | None, int]:
    """(the 0-based line where nesting passes MAX_DEPTH, -1 when unknown, or None; how many
    aliases) from YAML's events, without building anything."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                return (mark.line if mark else -1), aliases
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
    return None, aliases


class _Unbounded(Exception):
    """An alias that refers to the node it is in."""


def _expanded(node: Any, memo: dict[int, int]) -> int:
    """How many values ``node`` stands for once every alias is a copy (a DAG walk, memoized)."""
    key = id(node)
    if key in memo:
        if memo[key] < 0:
            raise _Unbounded
        return memo[key]
    memo[key] = -1
    total = 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded(k, memo) + _expanded(v, memo)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            total += _expanded(item, memo)
    memo[key] = min(total, MAX_VALUES + 1)
    return memo[key]


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


def _is_ini_source(f: Path, source: Path) -> bool:
    """True for an inventory source file that is not YAML (an INI file or a script): not a
    file of group_vars/ or host_vars/."""
    parts = f.relative_to(source.parent if source.is_file() else source).parts
    return f.suffix not in _YAML_EXTS and not {"group_vars", "host_vars"} & set(parts[:-1])


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
         collection: Path | None = None, set_vars: Mapping[str, Any] | None = None) -> Inventory:
    """Parse and validate; raise UserError with every problem, one line each.

    ``set_vars`` are reconfigure's --set values: extra vars, named --set in messages."""
    _ansible_configuration()
    problems, inv = _validate(path, limit, extra_vars or [], collection, set_vars or {})
    if problems:
        raise UserError("\n".join(dict.fromkeys(str(p) for p in problems)))
    assert inv is not None
    return inv


def _ansible_configuration() -> None:
    """Ansible reads its configuration (ansible.cfg, ANSIBLE_*) once, on first use: a value it
    cannot take is the user's to fix, in Ansible's words."""
    try:
        import ansible.constants  # noqa: F401
    except Exception as exc:  # AnsibleOptionsError, or what a broken value raises
        from rdmaprov import ansiblecfg

        try:
            cfg = ansiblecfg.find()
        except Exception:
            cfg = None
        where = f" (ansible.cfg: {cfg})" if cfg else ""
        raise UserError(f"Ansible's configuration{where}: {_first_line(exc)}") from None


class _StrictYaml(yaml.SafeLoader):
    """YAML with a key given twice as an error (the run sets ANSIBLE_DUPLICATE_YAML_DICT_KEY
    to error); Ansible's own tags (!vault, !unsafe) read as opaque values."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"found duplicate mapping key {key!r} (first at line "
                    f"{seen[key] + 1})", key_node.start_mark)
            if isinstance(key, str):
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_StrictYaml.add_multi_constructor("!", lambda loader, suffix, node: None)


def _yaml_duplicates(path: Path) -> Problem | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    if text.startswith("$ANSIBLE_VAULT"):
        return None
    try:
        yaml.load(text, Loader=_StrictYaml)  # a SafeLoader
    except yaml.constructor.ConstructorError as exc:
        if exc.problem and "duplicate" in exc.problem and exc.problem_mark is not None:
            return Problem(f"{_shown(path)}: line {exc.problem_mark.line + 1}", exc.problem)
    except yaml.YAMLError:
        return None  # reported where it is parsed, with Ansible's words
    return None


_SSH_CONNECTIONS = frozenset({"", "ssh", "smart", "paramiko", "paramiko_ssh",
                              "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh"})
# The ssh connection's arguments that change where ssh goes (Ansible's ssh plugin options).
# ssh_args comes only from the host: the run sets its own (rdmaprov.settings, ANSIBLE_SSH_ARGS).
_SSH_ARG_OPTIONS = (("ssh_args", "ansible_ssh_args"),
                    ("ssh_common_args", "ansible_ssh_common_args"),
                    ("ssh_extra_args", "ansible_ssh_extra_args"))


@functools.cache
def _ssh_config_args() -> dict[str, tuple[Any, str]]:
    """ssh_common_args and ssh_extra_args as this controller's Ansible configuration sets them
    (ANSIBLE_SSH_*_ARGS, ansible.cfg): option -> (value, where it is set)."""
    from ansible import constants as C
    from ansible.plugins.loader import connection_loader

    with _quiet():
        connection_loader.get("ssh", class_only=True)  # its options, for C.config
    out = {}
    for option, _var in _SSH_ARG_OPTIONS[1:]:
        value, where = C.config.get_config_value_and_origin(
            option, plugin_type="connection", plugin_name="ssh", variables={})
        where = str(where)
        out[option] = (value, where.removeprefix("env: ") if where.startswith("env: ")
                       else option if where == "default" else f"{where}: {option}")
    return out


def _ssh_argv(merged: Mapping[str, Any]) -> tuple[str, ...] | str | None:
    """The arguments the run's ssh gets for a host that bear on where it connects (its user
    and port, then ssh_args, ssh_common_args, ssh_extra_args: the host's variables, else
    ANSIBLE_SSH_*_ARGS or ansible.cfg), split as Ansible splits them (shlex). None where only
    the run knows them (a template, a vault value); a problem's text where Ansible could not
    split them."""
    unknown_now = _checker().unknown_now
    argv: list[str] = []
    for key, opt in (("ansible_user", "User"), ("ansible_port", "Port")):
        value = merged.get(key)
        if value is not None and unknown_now(value):
            return None
        if value not in (None, ""):
            argv += ["-o", f"{opt}={value}"]
    for option, var in _SSH_ARG_OPTIONS:
        if var in merged:
            value, origin = merged[var], var
        elif option == "ssh_args":
            continue
        else:
            value, origin = _ssh_config_args()[option]
        if value in (None, ""):
            continue
        if unknown_now(value):
            return None
        try:
            argv += shlex.split(str(value))
        except ValueError as exc:
            return f"{origin}: {str(value)!r} is not a list of ssh arguments ({exc})"
    return tuple(argv)


def _resolution_problem(name: str, args: tuple[str, ...] = ()) -> str | None:
    """Why ``name`` cannot be reached by name from here: ssh's own configuration, with the
    run's ssh arguments (HostName in ~/.ssh/config or a -F file), is asked first (ssh -G,
    argv, no shell); a proxy or jump host resolves it elsewhere. Where ssh cannot say what
    those arguments make of it, nothing is claimed: the run's ssh will say it."""
    try:
        proc = subprocess.run(["ssh", "-G", *args, name], capture_output=True, text=True,
                              timeout=10, check=False, stdin=subprocess.DEVNULL)
        out = proc.stdout if proc.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    if not out and args:
        return None
    conf = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    if conf.get("proxyjump", "none") != "none" or conf.get("proxycommand", "none") != "none":
        return None
    target = conf.get("hostname", name) or name
    try:
        socket.getaddrinfo(target, None)
    except socket.gaierror as exc:
        via = f" (ssh's HostName {target})" if target != name else ""
        return (f"{name!r}{via} does not resolve on this control host ({exc.strerror}); give "
                "the host an ansible_host address, or add the name to DNS or /etc/hosts")
    except (UnicodeError, OSError):
        return None
    return None


def _unresolved(targets: list[tuple[str, tuple[str, ...]]]
                ) -> dict[tuple[str, tuple[str, ...]], str]:
    """(name, ssh arguments) -> problem for the names that do not resolve (looked up in
    parallel)."""
    if not targets:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(targets))) as pool:
        found = dict(zip(targets, pool.map(lambda t: _resolution_problem(*t), targets),
                         strict=True))
    return {t: why for t, why in found.items() if why}


def _validate(path: Path, limit: str | None, extra_vars: list[str],
              collection: Path | None,
              set_vars: Mapping[str, Any]) -> tuple[list[Problem], Inventory | None]:
    from ansible.errors import AnsibleError
    from ansible.inventory.helpers import sort_groups
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    from rdmaprov.resources import collection_root

    if not path.exists():
        raise UserError(f"{path}: no such inventory file")
    if not os.access(path, os.R_OK):
        raise UserError(f"{path}: cannot read the inventory (permission denied)")
    source = path.resolve()
    files = _inventory_files(source)
    for f in files:
        # Variable files (group_vars/, host_vars/) are YAML whatever their extension.
        bounded = _bounds_problem(f, f.suffix in _YAML_EXTS or not _is_ini_source(f, source))
        if bounded:
            raise UserError(bounded)
        encoding = _not_utf8(f)
        if encoding:
            raise UserError(encoding)
    extras = load_extra_vars(extra_vars)
    if set_vars:
        extras.append(("--set", dict(set_vars)))
    loader = DataLoader()
    problems: list[Problem] = []
    sources = _source_files(source)
    ini_files = [f for f in sources if f.suffix not in (*_YAML_EXTS, ".toml")
                 and not os.access(f, os.X_OK)]
    for ini in ini_files:
        problems += _ini_duplicates(ini)
    for f in files:
        if f.suffix in (".yml", ".yaml"):
            dup = _yaml_duplicates(f)
            if dup:
                problems.append(dup)

    with _quiet():
        unparsed = _unparsed(loader, sources)
        if unparsed:
            failed, failures = unparsed[0]
            own = [p for p in problems if p.where.startswith(f"{_shown(failed)}: ")]
            raise UserError("\n".join(str(p) for p in own) if own
                            else _parse_failure(failed, failures))
        try:
            manager = InventoryManager(loader=loader, sources=[str(source)])
        except AnsibleError as exc:
            raise UserError(f"{_shown(path)}: {_first_line(exc)}") from None
        variables = VariableManager(loader=loader, inventory=manager)

        all_hosts = sorted(h.name for h in manager.get_hosts())
        if not all_hosts:
            raise UserError(f"{_shown(path)}: no hosts in the inventory")
        hosts = manager.get_hosts(ignore_restrictions=True)
        for host in hosts:
            bad_name = _host_name_problem(host.name)
            if host.name in manager.groups:
                # Ansible's "Found both group and host with same name" warning.
                bad_name = (f"host {host.name!r} has the name of a group: --limit {host.name} "
                            "and host_vars/group_vars would mean either; rename one of them")
            if bad_name:
                problems.append(Problem(_shown(host.vars.get("inventory_file") or path),
                                        bad_name))
        if limit:
            try:
                manager.subset(limit)
                selected = [h.name for h in manager.get_hosts()]
            except AnsibleError as exc:
                raise UserError(f"--limit {limit}: {_first_line(exc)}") from None
            if not selected:
                raise UserError(f"--limit {limit}: matches no host in {_shown(path)}")
            manager.subset(None)
        else:
            selected = all_hosts

        specs = load_specs(collection or collection_root())
        checker = _checker()
        base = source if source.is_dir() else source.parent

        # Where each variable can come from, in Ansible's precedence (lowest first), to name
        # the source of a value in a message. The values judged are VariableManager's.
        group_inv: dict[str, _Source] = {}
        group_files: dict[str, list[_Source]] = {}
        for name, group in sorted(manager.groups.items()):
            group_inv[name] = _Source(f"{_shown(path)}: group {name}", dict(group.vars),
                                      group=name)
            group_files[name] = [_Source(_shown(f), _load_vars_file(loader, f), path=f, group=name)
                                 for f in _vars_files(loader, base, "group_vars", name)]
        extra_sources = [_Source(label, data, extra=True) for label, data in extras]
        merged_extra: dict[str, Any] = {}
        for _label, data in extras:
            merged_extra.update(data)

        host_vars: dict[str, dict[str, Any]] = {}
        host_chains: dict[str, list[VarSource]] = {}
        host_groups: dict[str, list[str]] = {}
        seen_addr: dict[tuple[str, str], str] = {}
        # (address, the ssh arguments it is reached with) -> (where, host)
        to_resolve: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}
        typo_sources: list[_Source] = [*group_inv.values(),
                                       *(s for v in group_files.values() for s in v),
                                       *extra_sources]
        for host in hosts:
            inv_file = host.vars.get("inventory_file") or path
            host_where = f"{_shown(inv_file)}: host {host.name}"
            host_own = {k: v for k, v in host.vars.items()
                        if k not in ("inventory_file", "inventory_dir")}
            host_sources = [_Source(host_where, host_own)]
            host_sources += [_Source(_shown(f), _load_vars_file(loader, f), path=f)
                             for f in _vars_files(loader, base, "host_vars", host.name)]
            typo_sources += host_sources
            groups = sort_groups(host.get_groups())
            chain = [*(group_inv[g.name] for g in groups if g.name in group_inv),
                     *(s for g in groups for s in group_files.get(g.name, [])),
                     *host_sources, *extra_sources]

            merged = dict(variables.get_vars(host=host, include_hostvars=False))
            merged.update(merged_extra)
            ours = {k: merged[k] for k in merged if k in specs.options}
            if host.name in selected:
                host_vars[host.name] = ours
                host_chains[host.name] = chain
                host_groups[host.name] = [g.name for g in groups]
            for name, line in checker.check(ours, specs.options):
                problems.append(Problem(_where(name, chain, host_where), line))

            where = host_where.rsplit(": host ", 1)[0]
            problems += _check_address(host.name, merged, where)
            connection = merged.get("ansible_connection")
            if isinstance(connection, str) and connection and not checker.unknown_now(connection):
                bad_connection = _connection_problem(connection)
                if bad_connection:
                    problems.append(Problem(where, f"host {host.name}: {bad_connection}"))
            addr = merged.get("ansible_host", host.name)
            if isinstance(addr, str) and addr.strip() and not checker.unknown_now(addr):
                key = (addr.strip(), str(merged.get("ansible_port", 22)))
                if "ansible_host" in merged:
                    if key in seen_addr:
                        problems.append(Problem(where, f"hosts {seen_addr[key]} and {host.name} "
                                                       f"have the same address {key[0]} "
                                                       f"port {key[1]}"))
                    seen_addr.setdefault(key, host.name)
                argv = (_ssh_argv(merged) if host.name in selected
                        and str(connection or "") in _SSH_CONNECTIONS else None)
                if isinstance(argv, str):
                    problems.append(Problem(where, f"host {host.name}: {argv}"))
                elif argv is not None and _looks_like_address(addr) and not _is_ip(addr):
                    to_resolve.setdefault((addr.strip(), argv), (where, host.name))
        for src in typo_sources:
            for _name, line in checker.check({k: None for k in src.data
                                             if k not in specs.options}, specs.options):
                problems.append(Problem(src.where, line))
        for target, why in sorted(_unresolved(sorted(to_resolve)).items()):
            where, host = to_resolve[target]
            problems.append(Problem(where, f"host {host}: {why}"))

    return problems, Inventory(path=path, hosts=all_hosts, selected=sorted(selected),
                               extravars=merged_extra, base=base, variables=host_vars,
                               sources=host_chains, groups=host_groups)


def _where(name: str, chain: list[_Source], fallback: str) -> str:
    """The source whose value of ``name`` the host gets: the last in precedence order that
    sets it (Ansible replaces, it does not merge, by default)."""
    for src in reversed(chain):
        if name in src.data:
            return src.where
    return fallback


def _is_ip(addr: str) -> bool:
    try:
        ipaddress.ip_address(addr.strip().strip("[]"))
    except ValueError:
        return False
    return True
