"""The example inventory users copy passes rdmaprov's input validation (no host contacted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaprov import inventory
from rdmaprov.errors import UserError

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory" / "inventory.ini"


def test_example_inventory_is_valid():
    inv = inventory.load(EXAMPLE, limit=None, extra_vars=[])
    assert inv.selected == ["gpu01", "gpu02", "gpu03", "gpu04"]


def test_a_typo_in_the_example_group_vars_is_caught(tmp_path):
    copy = tmp_path / "inventory"
    copy.mkdir()
    (copy / "inventory.ini").write_text(EXAMPLE.read_text())
    gv = copy / "group_vars" / "all"
    gv.mkdir(parents=True)
    (gv / "qos.yml").write_text("---\nroce_qos_pfc_prority: 3\n")
    with pytest.raises(UserError) as err:
        inventory.load(copy / "inventory.ini", limit=None, extra_vars=[])
    assert "roce_qos_pfc_prority" in str(err.value) and "roce_qos_pfc_priority" in str(err.value)
