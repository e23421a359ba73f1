"""The node_tool role's rules (plugins/module_utils/node_tool.py): which of the controller's
files make the node-side rdmaprov, and what a node lacks of them, from what the module read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rdmaprov
from rdmaprov.collection import node_tool
from rdmaprov.resources import collection_root

SETTINGS = {"install": True, "venv": "/opt/rdmaprov/venv", "launcher": "/usr/local/bin/rdmaprov"}
MANIFEST = {"rdmaprov/__init__.py": "a" * 64, "rdmaprov/cli/check.py": "b" * 64}


def in_line(**over):
    probe = {"python": [3, 11], "missing_modules": [], "family": "debian",
             "venv_version": [3, 11], "installed": dict(MANIFEST), "extra": [],
             "launcher": node_tool.launcher(SETTINGS["venv"]), "launcher_mode": 0o755}
    probe.update(over)
    return probe


def test_the_source_is_the_package_and_the_collections_module_utils() -> None:
    files = node_tool.source_files(rdmaprov.__path__[0], str(collection_root()))
    assert "rdmaprov/cli/check.py" in files and "rdmaprov/__main__.py" in files
    assert "rdmaprov/_collection/galaxy.yml" in files
    assert "rdmaprov/_collection/plugins/module_utils/kernel_caps.py" in files
    assert not [p for p in files if "__pycache__" in p or p.endswith(".pyc")]
    # The roles, playbooks and other plugins run on the controller only.
    assert not [p for p in files if p.startswith("rdmaprov/_collection/")
                and not p.startswith(("rdmaprov/_collection/plugins/module_utils/",
                                      "rdmaprov/_collection/galaxy.yml"))]
    assert all(Path(src).is_file() for src in files.values())


def test_a_wheel_layout_takes_the_bundled_collection_once(tmp_path: Path) -> None:
    pkg = tmp_path / "rdmaprov"
    (pkg / "_collection/plugins/module_utils").mkdir(parents=True)
    (pkg / "_collection/roles/x").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_collection/galaxy.yml").write_text("")
    (pkg / "_collection/roles/x/main.yml").write_text("")
    (pkg / "_collection/plugins/module_utils/ranges.py").write_text("")
    files = node_tool.source_files(str(pkg), str(pkg / "_collection"))
    assert sorted(files) == ["rdmaprov/__init__.py", "rdmaprov/_collection/galaxy.yml",
                             "rdmaprov/_collection/plugins/module_utils/ranges.py"]


def test_the_package_beside_the_collection(tmp_path: Path) -> None:
    """A wheel's rdmaprov/_collection, a checkout's top with rdmaprov/ in it; a collection
    installed alone has no package."""
    assert node_tool.package_beside(str(collection_root())) == rdmaprov.__path__[0]
    wheel = tmp_path / "site/rdmaprov"
    (wheel / "_collection").mkdir(parents=True)
    (wheel / "__init__.py").write_text("")
    (wheel / "_collection/galaxy.yml").write_text("")
    assert node_tool.package_beside(str(wheel / "_collection")) == str(wheel)
    alone = tmp_path / "ansible_collections/rdmaprov/cluster"
    alone.mkdir(parents=True)
    (alone / "galaxy.yml").write_text("")
    assert node_tool.package_beside(str(alone)) is None


def test_a_node_in_line_has_nothing_to_do() -> None:
    plan = node_tool.plan(SETTINGS, in_line(), MANIFEST)
    assert plan["drift"] is False and plan["not_applicable"] == ""
    assert plan["write"] == plan["remove"] == plan["packages"] == []


def test_a_fresh_node_gets_packages_venv_files_and_launcher() -> None:
    probe = in_line(missing_modules=["yaml", "rich"], venv_version=None, installed={},
                    launcher=None, launcher_mode=None)
    plan = node_tool.plan(SETTINGS, probe, MANIFEST)
    assert plan["packages"] == ["python3-yaml", "python3-rich"] and plan["family"] == "debian"
    assert plan["create_venv"] and plan["write"] == sorted(MANIFEST) and plan["launcher"]
    assert node_tool.plan(SETTINGS, dict(probe, family="rhel"), MANIFEST)["packages"] == [
        "python3-pyyaml", "python3-rich"]


@pytest.mark.parametrize("over, field, want", [
    ({"installed": {"rdmaprov/__init__.py": "a" * 64, "rdmaprov/cli/check.py": "c" * 64}},
     "write", ["rdmaprov/cli/check.py"]),
    ({"installed": {"rdmaprov/__init__.py": "a" * 64}}, "write", ["rdmaprov/cli/check.py"]),
    ({"extra": ["rdmaprov/old.py"]}, "remove", ["rdmaprov/old.py"]),
    ({"launcher_mode": 0o644}, "launcher", True),
    ({"launcher": "#!/bin/sh\nexec /elsewhere/python -m rdmaprov\n"}, "launcher", True),
    # The node's python3 moved on (an upgrade): a new venv, every file again.
    ({"python": [3, 13]}, "create_venv", True),
])
def test_each_difference_is_drift(over, field, want) -> None:
    plan = node_tool.plan(SETTINGS, in_line(**over), MANIFEST)
    assert plan["drift"] is True and plan[field] == want
    if field == "create_venv":
        assert plan["write"] == sorted(MANIFEST) and plan["remove"] == []


@pytest.mark.parametrize("settings, probe, manifest, why", [
    (dict(SETTINGS, install=False), in_line(), MANIFEST, "node_tool_install is false"),
    (SETTINGS, in_line(), {}, "this controller has no rdmaprov Python package"),
    (SETTINGS, in_line(python=None), MANIFEST, "this node has no python3"),
    (SETTINGS, in_line(python=[3, 9]), MANIFEST,
     "this node's python3 is 3.9; rdmaprov needs 3.11 or later"),
    (SETTINGS, in_line(missing_modules=["yaml"], family=""), MANIFEST,
     "this node's python3 cannot import yaml"),
])
def test_where_it_cannot_apply_it_says_why(settings, probe, manifest, why) -> None:
    plan = node_tool.plan(settings, probe, manifest)
    assert plan["not_applicable"].startswith(why) and plan["drift"] is False
    assert plan["report"] == [f"rdmaprov on this node: not applicable: {plan['not_applicable']}"]


@pytest.mark.parametrize("text, family", [
    ('ID=debian\nVERSION_ID="12"\n', "debian"),
    ('ID=ubuntu\nID_LIKE=debian\n', "debian"),
    ('ID="rocky"\nID_LIKE="rhel centos fedora"\n', "rhel"),
    ('ID=alpine\n', ""),
])
def test_the_os_family_from_os_release(text, family) -> None:
    assert node_tool.family(text) == family


def test_the_launcher_runs_the_venv_python_isolated(tmp_path: Path) -> None:
    """The launcher's text, run by sh for this test's own venv: -I keeps a rdmaprov/ in the
    current directory off sys.path."""
    venv = Path(sys.prefix)
    assert (venv / "bin/python").exists()
    (tmp_path / "rdmaprov").mkdir()
    (tmp_path / "rdmaprov/__main__.py").write_text("print('the wrong rdmaprov')\n")
    script = tmp_path / "rdmaprov-launcher"
    script.write_text(node_tool.launcher(str(venv)))
    proc = subprocess.run(["sh", str(script), "--version"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert proc.stdout.strip() == f"rdmaprov {rdmaprov.__version__}", proc.stderr
