"""Every filter of rdmaprov.cluster is documented (plugins/filter/NAME.yml), ansible-doc shows it,
and its documented arguments are the function's own, in order."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_DOC = Path(sys.executable).with_name("ansible-doc")


@pytest.fixture(scope="module")
def collections_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("collections")
    (base / "ansible_collections" / "rdmaprov").mkdir(parents=True)
    (base / "ansible_collections" / "rdmaprov" / "cluster").symlink_to(ROOT)
    return base


def _unwrap(func: Callable[..., Any]) -> Callable[..., Any]:
    """The function a filter file's error-wrapping closure calls."""
    for cell in func.__closure__ or ():
        if callable(cell.cell_contents):
            return cell.cell_contents
    return func


@pytest.fixture(scope="module")
def filters(collections_path: Path) -> dict[str, Callable[..., Any]]:
    sys.path.insert(0, str(collections_path))
    try:
        out: dict[str, Callable[..., Any]] = {}
        for path in sorted((ROOT / "plugins" / "filter").glob("*.py")):
            mod = importlib.import_module(
                f"ansible_collections.rdmaprov.cluster.plugins.filter.{path.stem}")
            for name, func in mod.FilterModule().filters().items():
                assert name not in out, f"filter {name} defined twice"
                out[name] = _unwrap(func)
        return out
    finally:
        sys.path.remove(str(collections_path))


@pytest.fixture(scope="module")
def docs(filters: dict[str, Callable[..., Any]], collections_path: Path) -> dict[str, Any]:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections_path), "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run(
        [str(ANSIBLE_DOC), "-t", "filter", "--json", *(f"rdmaprov.cluster.{n}" for n in filters)],
        env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return {k.rsplit(".", 1)[-1]: v for k, v in json.loads(proc.stdout).items()}


def test_the_collection_has_filters(filters: dict[str, Callable[..., Any]]) -> None:
    assert {"qos_tos"} <= set(filters)


def test_every_public_filter_is_used_by_a_role(filters: dict[str, Callable[..., Any]]) -> None:
    """A public filter is API a user's playbook may use, and the roles use each one themselves;
    a rule no role needs any more goes back to module_utils (issue 28: no unused filter)."""
    text = "\n".join(p.read_text() for p in (ROOT / "roles").rglob("*")
                     if p.is_file() and p.suffix in (".yml", ".j2"))
    unused = sorted(n for n in filters if n not in text)
    assert unused == [], f"filters no role uses: {unused}"


def test_every_filter_has_a_doc_file(filters: dict[str, Callable[..., Any]]) -> None:
    missing = [n for n in filters if not (ROOT / "plugins" / "filter" / f"{n}.yml").is_file()]
    assert missing == [], f"undocumented filters (write plugins/filter/NAME.yml): {missing}"
    stray = sorted(p.stem for p in (ROOT / "plugins" / "filter").glob("*.yml")
                   if p.stem not in filters)
    assert stray == [], f"docs of filters that do not exist: {stray}"


def test_ansible_doc_shows_every_filter(filters: dict[str, Callable[..., Any]],
                                        docs: dict[str, Any]) -> None:
    assert sorted(docs) == sorted(filters)
    for name, entry in docs.items():
        doc = entry["doc"]
        assert doc["name"] == name
        assert doc["short_description"] and doc["description"], name
        assert doc["options"]["_input"]["description"], name
        assert entry["return"]["_value"]["description"], name
        assert f"rdmaprov.cluster.{name}" in entry["examples"], name


def test_documented_arguments_are_the_functions(filters: dict[str, Callable[..., Any]],
                                                docs: dict[str, Any]) -> None:
    wrong = {}
    for name, func in filters.items():
        sig = list(inspect.signature(func).parameters.values())
        # The first parameter is the piped _input; a *layers one also takes the arguments.
        rest = sig if sig[0].kind is inspect.Parameter.VAR_POSITIONAL else sig[1:]
        params = [p.name for p in rest]
        doc = docs[name]["doc"]
        positional = [p.strip() for p in doc.get("positional", "_input").split(",")]
        options = [o for o in doc["options"] if o != "_input"]
        if positional != ["_input", *params] or sorted(options) != sorted(params):
            wrong[name] = {"function": params, "positional": positional[1:], "options": options}
    assert wrong == {}, json.dumps(wrong, indent=1)
