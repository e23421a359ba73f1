"""Every module's DOCUMENTATION, EXAMPLES and RETURN are YAML that Ansible can read (a colon in
an unquoted line makes a block invalid, which only ansible-test sanity and ansible-doc notice),
and DOCUMENTATION names the module its file is."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "plugins" / "modules").glob("*.py"))


def _blocks(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {n.targets[0].id: n.value.value for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
            and n.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
            and isinstance(n.value, ast.Constant)}


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_doc_blocks_are_yaml(path: Path) -> None:
    blocks = _blocks(path)
    assert set(blocks) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}, path.name
    parsed = {name: yaml.safe_load(text) for name, text in blocks.items()}
    assert parsed["DOCUMENTATION"]["module"] == path.stem
    assert isinstance(parsed["EXAMPLES"], list) and parsed["EXAMPLES"]
    assert isinstance(parsed["RETURN"], dict)
