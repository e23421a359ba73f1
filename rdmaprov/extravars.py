"""The one reader of variables given on the command line: ``-e/--extra-vars`` and reconfigure's
``--set`` take the same forms, read here.

- ``@FILE``: a YAML or JSON file holding a mapping (as ansible-playbook reads ``-e @FILE``);
- ``{...}`` (or ``[...]``, refused: not a mapping): a YAML/JSON mapping, typed as YAML types it;
- ``name=value [name2=value2 ...]``: pairs split at a space outside quotes and brackets where
  the next word starts ``name=`` (so ``net_mtu_interfaces=[{name: eth1, mtu: 4000}]`` is one
  pair and ``a=1 b=2`` two). A value is read by its variable's declared type (the roles'
  meta/argument_specs.yml): a list, dict or raw value as YAML (``[eth1, eth2]``, ``{k: v}``; a
  list also as ``eth1,eth2``), an int, float or bool as the argument spec converts text
  (``4000``, ``010`` is 10, ``yes``), a string as written (``yes`` stays ``"yes"``, quotes
  removed). A name no role declares keeps its text, as ansible-playbook's ``key=value`` does.
  Jinja (``{{ ... }}``) stays text, for the run to resolve.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rdmaprov.errors import UserError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_CLOSE = {"[": "]", "{": "}"}
_YAML_TYPES = ("list", "dict", "raw")
_CONVERTED = ("int", "float", "bool")


@functools.cache
def declared_types() -> Mapping[str, str]:
    """{variable: argument-spec type} of every variable the collection's roles declare."""
    from rdmaprov.inventory import load_specs
    from rdmaprov.resources import collection_root

    return {name: str(opt.get("type", "str"))
            for name, opt in load_specs(collection_root()).options.items()}


def split_pairs(text: str, flag: str) -> list[tuple[str, str]]:
    """``a=1 b='x y' c=[1, 2]`` -> [(a, 1), (b, 'x y'), (c, [1, 2])]: the value texts as
    written (quotes kept, for the value's reader)."""
    starts: list[int] = [0]
    stack: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in _CLOSE:
            stack.append(_CLOSE[c])
        elif stack and c == stack[-1]:
            stack.pop()
        elif c.isspace() and not stack:
            j = i
            while j < len(text) and text[j].isspace():
                j += 1
            if j < len(text) and _NAME.match(text, j):
                starts.append(j)
            i = j
            continue
        i += 1
    pairs: list[tuple[str, str]] = []
    for n, start in enumerate(starts):
        part = text[start:starts[n + 1] if n + 1 < len(starts) else len(text)].strip()
        name, sep, value = part.partition("=")
        if not sep or not _NAME.match(part):
            raise UserError(f"{flag} {part!r}: expected key=value (several: a=1 b=2), "
                            "YAML/JSON or @file")
        pairs.append((name, value))
    return pairs


def _unquoted(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            return text
        if isinstance(value, str):
            return value
    return text


def value_of(name: str, text: str, flag: str) -> Any:
    """One ``name=value``'s value, read by the variable's declared type (see the module)."""
    from rdmaprov import values

    kind = declared_types().get(name)
    raw = text.strip()
    if kind is None or "{{" in raw or "{%" in raw:
        return _unquoted(raw)
    if kind in _YAML_TYPES:
        if not raw:
            return ""
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise UserError(f"{flag} {name}={text}: the value is not valid YAML "
                            f"({str(exc).splitlines()[0]})") from None
        if kind == "list" and isinstance(value, str):
            return values.convert(value, "list")
        return value
    text = _unquoted(raw)
    if kind in _CONVERTED:
        try:
            return values.convert(text, kind)
        except (TypeError, ValueError):
            return text  # the variable check names it, in its words
    return text


def _file(text: str, flag: str) -> tuple[str, Any]:
    from rdmaprov.inventory import _bounds_problem, _yaml_reason

    path = Path(text[1:]).expanduser()
    bounded = _bounds_problem(path, True) if path.is_file() else None
    if bounded:
        raise UserError(bounded)
    try:
        return f"{path} ({flag} @)", yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{flag} {text}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{flag} {text}: a directory, not a file") from None
    except OSError as exc:
        raise UserError(f"{flag} {text}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{flag} {text}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML/JSON: {_yaml_reason(exc)}") from None


def parse(items: list[str] | tuple[str, ...], flag: str = "-e") -> list[tuple[str, dict[str, Any]]]:
    """Each item (``-e`` or ``--set`` value) as (label for messages, mapping), in order (a later
    one wins, as in Ansible)."""
    from rdmaprov.inventory import _yaml_reason

    out: list[tuple[str, dict[str, Any]]] = []
    for raw in items:
        text = raw.strip()
        label = flag
        if text.startswith("@"):
            label, data = _file(text, flag)
        elif text.startswith(("{", "[")):
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise UserError(f"{flag} {text!r}: not valid YAML/JSON: "
                                f"{_yaml_reason(exc)}") from None
        elif text:
            data = {name: value_of(name, value, flag) for name, value in split_pairs(text, flag)}
        else:
            raise UserError(f"{flag}: empty value")
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise UserError(f"{label}: {'extra vars' if flag == '-e' else flag + ' values'} "
                            f"must be a mapping, not {type(data).__name__}")
        out.append((label, data))
    return out


def merged(items: list[str] | tuple[str, ...], flag: str) -> dict[str, Any]:
    """The items' mappings merged, a later one winning."""
    out: dict[str, Any] = {}
    for _label, data in parse(items, flag):
        out.update(data)
    return out
