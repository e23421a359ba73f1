"""The one rule for a setting's value: its argument-spec type, its choices, its range.

Used by ``rdmaprov check``'s expectations (rdmaprov/check/expect.py); the inventory check uses
Ansible's own ArgumentSpecValidator (plugins/module_utils/input_check.py). Both take their
ranges from the one table, plugins/module_utils/ranges.py. It imports no Ansible: ``rdmaprov
check`` runs in a Slurm prolog before every job and must start in a few tens of milliseconds.
The conversions of the types those two use (int, float, bool, list, str, raw) are Ansible's
``check_type_*`` written out here, as ansible-core 2.19 does them (tests/unit/test_values.py
holds them against Ansible's own on the same values); the rarer types (dict, path, bytes,
bits, json) still use Ansible's checker, imported only when such a value is checked.
"""

from __future__ import annotations

import decimal
import difflib
import json
from collections.abc import Mapping
from typing import Any


def _ranges() -> Any:
    """The one table of ranges (plugins/module_utils/ranges.py, pure Python, no Ansible)."""
    from rdmaprov import collection

    return collection.ranges


TYPE_WORDS = {
    "int": "an integer", "float": "a number", "bool": "a boolean (true/false)",
    "list": "a list", "dict": "a mapping", "str": "a string", "path": "a path",
    "bytes": "a byte size", "bits": "a bit size", "json": "JSON", "jsonarg": "JSON",
}

# ansible.module_utils.parsing.convert_bool's BOOLEANS_TRUE / BOOLEANS_FALSE.
BOOLEANS_TRUE = frozenset(("y", "yes", "on", "1", "true", "t", 1, 1.0, True))
BOOLEANS_FALSE = frozenset(("n", "no", "off", "0", "false", "f", 0, 0.0, False))


def templated(value: Any) -> bool:
    """Jinja is resolved on the hosts at run time; Ansible's own argument checks see it there."""
    if type(value).__name__ in ("EncryptedString", "AnsibleVaultEncryptedUnicode"):
        return True
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _int(value: Any) -> int:
    if isinstance(value, int):
        return value
    try:
        dec = decimal.Decimal(value)
        if dec != int(dec):
            raise ValueError("significant decimal part")
        return int(dec)
    # OverflowError ("inf"): Ansible's own checker lets it escape; here it is a bad value.
    except (decimal.DecimalException, TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"{value!r} cannot be converted to an int") from exc


def _float(value: Any) -> float:
    if isinstance(value, float):
        return value
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{type(value)} cannot be converted to a float") from exc


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str | int | float):
        key = value.lower().strip() if isinstance(value, str) else value
        if key in BOOLEANS_TRUE:
            return True
        if key in BOOLEANS_FALSE:
            return False
        raise TypeError(f"the value {value!r} is not a valid boolean")
    raise TypeError(f"{type(value)} cannot be converted to a bool")


def _list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return value.split(",")
    if isinstance(value, int | float):
        return [str(value)]
    raise TypeError(f"{type(value)} cannot be converted to a list")


def _str(value: Any) -> str:
    if isinstance(value, dict | list):
        raise TypeError("not a string")
    return str(value)


_PURE = {"int": _int, "float": _float, "bool": _bool, "list": _list, "str": _str,
         "raw": lambda value: value}


def convert(value: Any, type_name: str) -> Any:
    """``value`` as an argument-spec type; raises TypeError/ValueError. Stricter than Ansible
    in two places only: a bool or a float is not an int (true would pass as 1, 9000.5 would
    be truncated)."""
    if type_name == "int" and isinstance(value, bool):
        raise TypeError("bool is not an int")
    if type_name == "int" and isinstance(value, float):
        raise TypeError("float is not an int")
    pure = _PURE.get(type_name)
    if pure is not None:
        return pure(value)
    from ansible.module_utils.common import validation as v  # rarer types: Ansible's own

    checkers = {"dict": v.check_type_dict, "path": v.check_type_path,
                "bytes": v.check_type_bytes, "bits": v.check_type_bits,
                "json": v.check_type_jsonarg, "jsonarg": v.check_type_jsonarg}
    checker = checkers.get(type_name)
    return value if checker is None else checker(value)


def show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def did_you_mean(name: str, known: Any) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def check_value(name: str, label: str, value: Any, spec: Mapping[str, Any]) -> list[str]:
    """Problems with one value against its option spec; ``label`` is how to name it."""
    if value is None or templated(value):
        return []
    type_name = str(spec.get("type", "str"))
    try:
        value = convert(value, type_name)
    except (TypeError, ValueError):
        return [f"{label}: {show(value)} is not {TYPE_WORDS.get(type_name, type_name)}"]
    problems: list[str] = []
    choices = spec.get("choices")
    items = value if type_name == "list" else [value]
    if choices:
        for item in items:
            if not templated(item) and item not in choices:
                problems.append(f"{label}: {show(item)} is not one of "
                                f"{', '.join(str(c) for c in choices)}")
    elements = spec.get("elements")
    if type_name == "list" and elements:
        for i, item in enumerate(value):
            problems += check_value(name, f"{label}[{i}]", item,
                                    {**spec, "type": elements, "elements": None,
                                     "choices": None})
        return problems
    if type_name == "dict" and spec.get("options"):
        problems += _check_suboptions(label, value, spec["options"])
    kind = _ranges().kind_of(name)
    if kind and type_name in ("int", "list", "raw") and not problems:
        for item in items:
            why = _ranges().problem(kind, item)
            if why and not isinstance(item, bool):
                problems.append(f"{label}: {why}")
    return problems


def _check_suboptions(label: str, value: Mapping[str, Any],
                      options: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    for key, sub in value.items():
        if key not in options:
            problems.append(f"{label}: unknown key {key!r}" + did_you_mean(str(key), options))
            continue
        problems += check_value(str(key), f"{label}.{key}", sub, options[key] or {})
    for key, opt in options.items():
        if (opt or {}).get("required") and key not in value:
            problems.append(f"{label}: required key {key!r} is missing")
    return problems
