"""rdmaprov/values.py, the value rule of the inventory check and of `rdmaprov check`: its
conversions are Ansible's check_type_* written out (so the check starts without Ansible); here
they are held against Ansible's own on the same values."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.module_utils.common import validation as v

from rdmaprov.values import check_value, convert

ANSIBLE = {"int": v.check_type_int, "float": v.check_type_float, "bool": v.check_type_bool,
           "list": v.check_type_list, "raw": v.check_type_raw}
VALUES: list[Any] = [
    0, 1, 2, -3, 9000, 1.0, 0.0, 2.5, "9000", " 9000 ", "9e3", "9000.0", "9000.5", "-1",
    "0x10", "abc", "", "nan", "yes", "No", " TRUE ", "on", "off", "y", "f", "t", "1", "0",
    "2", "a,b", "mlx5_0", [], [1, "x"], {}, {"a": 1}, None, b"1", (1, 2),
]


def _outcome(fn: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(value)
    except (TypeError, ValueError):
        return "error", None


@pytest.mark.parametrize("type_name", sorted(ANSIBLE))
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_conversion_matches_ansible(type_name: str, value: Any) -> None:
    ours = _outcome(lambda x: convert(x, type_name), value)
    if type_name == "int" and isinstance(value, bool | float):
        # Stricter on purpose: true is not MTU 1, and 9000.5 is not truncated.
        assert ours[0] == "error"
        return
    theirs = _outcome(ANSIBLE[type_name], value)
    assert repr(ours) == repr(theirs)  # repr: nan == nan
    assert type(ours[1]) is type(theirs[1])


def test_str_and_bools_in_sets() -> None:
    assert convert(True, "bool") is True and convert(1.0, "bool") is True
    with pytest.raises(TypeError):
        convert(2.0, "bool")
    with pytest.raises(TypeError):
        convert([1], "str")
    assert convert(9000, "str") == "9000"
    # Ansible lets "inf" escape as OverflowError; here it is one more bad value.
    with pytest.raises(TypeError):
        convert("inf", "int")


def test_check_value_ranges_and_choices() -> None:
    assert check_value("mtu", "--expect-mtu", "99999", {"type": "int"}) == [
        "--expect-mtu: 99999 is not a valid MTU (68..9216)"]
    assert check_value("link_layer", "x", "IB", {"type": "str", "choices": ["InfiniBand"]}) == [
        "x: 'IB' is not one of InfiniBand"]
    assert check_value("mtu", "m", "{{ x }}", {"type": "int"}) == []
    assert check_value("mtu", "m", "fast", {"type": "int"}) == ["m: 'fast' is not an integer"]
