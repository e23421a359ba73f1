"""Role READMEs carry the variable table of their argument specs, and ansible-doc reads them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov import roledocs

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(roledocs.role_specs(ROOT))
ANSIBLE_DOC = Path(sys.executable).with_name("ansible-doc")


@pytest.mark.parametrize("role", ROLES)
def test_readme_table_matches_argument_specs(role: str) -> None:
    readme = ROOT / "roles" / role / "README.md"
    assert readme.is_file(), f"{readme} missing; write it, then python -m rdmaprov.roledocs --write"
    text = readme.read_text()
    assert roledocs.render(text, roledocs.role_specs(ROOT)[role]) == text, (
        f"{readme}: table out of date; run python -m rdmaprov.roledocs --write")


def test_drift_is_detected_and_fixed_by_write(tmp_path: Path) -> None:
    role = tmp_path / "roles" / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n"
        "      demo_a: {type: list, elements: str, default: [x, y], description: C(x) | y}\n"
        "      demo_b: {type: str, choices: [p, q], default: p, description: b}\n")
    readme = role / "README.md"
    readme.write_text(f"# demo\n\n{roledocs.BEGIN}\n| stale |\n{roledocs.END}\n\nmore\n")
    drift = f"{readme}: variable table differs from meta/argument_specs.yml"
    assert roledocs.check(tmp_path) == [drift]
    assert roledocs.check(tmp_path, write=True) == []
    assert roledocs.check(tmp_path) == []
    text = readme.read_text()
    assert "| `demo_a` | list of str | `[x, y]` | `x` \\| y |" in text
    assert "| `demo_b` | str (p, q) | `p` | b |" in text
    assert text.startswith("# demo\n") and text.endswith("\n\nmore\n")


def test_missing_markers_are_reported(tmp_path: Path) -> None:
    role = tmp_path / "roles" / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "meta" / "argument_specs.yml").write_text("argument_specs:\n  main:\n    options: {}\n")
    (role / "README.md").write_text("# demo\n")
    [problem] = roledocs.check(tmp_path)
    assert "no variable-table markers" in problem


@pytest.fixture(scope="module")
def collections_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A collections path in which this checkout is rdmaprov.cluster, as the engine sets it up."""
    base = tmp_path_factory.mktemp("collections")
    (base / "ansible_collections" / "rdmaprov").mkdir(parents=True)
    (base / "ansible_collections" / "rdmaprov" / "cluster").symlink_to(ROOT)
    return base


@pytest.mark.parametrize("role", ["preflight", "rdma_ofed", "rdma_modules"])
def test_ansible_doc_prints_the_role(role: str, collections_path: Path) -> None:
    doc = str(ANSIBLE_DOC) if ANSIBLE_DOC.exists() else shutil.which("ansible-doc")
    assert doc, "ansible-doc not found next to this Python"
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections_path), "ANSIBLE_NOCOLOR": "1"}
    out = subprocess.run([doc, "-t", "role", f"rdmaprov.cluster.{role}"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    options = roledocs.role_specs(ROOT)[role]["main"]["options"]
    missing = [name for name in options if name not in out.stdout]
    assert f"rdmaprov.cluster.{role}" in out.stdout and missing == []
