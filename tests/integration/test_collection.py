"""rdmaprov.cluster as a user gets it: built with ansible-galaxy, installed into a collections
path, and used by FQCN from a playbook of the user's own with plain ansible-playbook."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# What a collection tarball may hold at its top; anything else is the Python package leaking in.
ALLOWED_TOP = {
    "MANIFEST.json",
    "FILES.json",
    "README.md",
    "meta",
    "roles",
    "plugins",
    "playbooks",
    "docs",
    "LICENSE",
    "CHANGELOG.md",
    "changelogs",
    "tests",  # tests/sanity/ only: the ignore file ansible-test sanity reads on Galaxy/Hub
}

USER_PLAYBOOK = """\
# A user's own playbook: nothing of rdmaprov's but the collection, called by FQCN.
- name: My cluster's RDMA layer
  hosts: all
  gather_facts: false
  become: true
  tasks:
    - name: Check what the node has
      ansible.builtin.import_role:
        name: rdmaprov.cluster.preflight
    - name: Persist our RDMA modules
      ansible.builtin.include_role:
        name: rdmaprov.cluster.rdma_modules
      vars:
        rdma_modules_extra: [ib_ipoib]
    - name: Use the collection's module directly
      rdmaprov.cluster.kernel_modules:
        names: [ib_core]
        load: false
      register: core
    - name: Show it
      ansible.builtin.assert:
        that: core.modules[0].name == 'ib_core'
"""


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        **extra,
    }


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build")
    proc = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    [built] = out.glob("rdmaprov-cluster-*.tar.gz")
    return built


def test_tarball_holds_only_collection_content(tarball: Path) -> None:
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    top = {n.split("/", 1)[0] for n in names}
    assert top <= ALLOWED_TOP, f"not collection content: {sorted(top - ALLOWED_TOP)}"
    tests = [n for n in names if n.startswith("tests/") and not n.startswith("tests/sanity")]
    assert not tests, f"tests of the Python package in the collection: {tests}"
    for needed in (
        "roles/preflight/meta/argument_specs.yml",
        "roles/rdma_ofed/tasks/main.yml",
        "roles/rdma_modules/tasks/site.yml",
        "plugins/modules/kernel_modules.py",
        "plugins/modules/rdma_facts.py",
        "plugins/lookup/input_problems.py",
        "playbooks/site.yml",
        "meta/runtime.yml",
        "LICENSE",
        "CHANGELOG.md",
        "changelogs/changelog.yaml",
        "tests/sanity/ignore-2.19.txt",
    ):
        assert needed in names, needed
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


@pytest.mark.lab
def test_user_playbook_uses_installed_collection(lab, tarball: Path, tmp_path: Path) -> None:
    collections = tmp_path / "collections"
    proc = subprocess.run(
        [
            str(BIN / "ansible-galaxy"),
            "collection",
            "install",
            "-p",
            str(collections),
            str(tarball),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        # Only the temporary path counts: a copy installed elsewhere on this machine (the
        # user's ~/.ansible) must not make ansible-galaxy skip the install.
        env=_env(ANSIBLE_COLLECTIONS_PATH=str(collections)),
    )
    assert proc.returncode == 0, proc.stderr
    installed = collections / "ansible_collections" / "rdmaprov" / "cluster"
    assert (installed / "MANIFEST.json").is_file() and not installed.is_symlink()

    # The only rdmaprov.cluster Ansible can see is the installed copy, not this checkout.
    listed = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "list", "rdmaprov.cluster"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=_env(ANSIBLE_COLLECTIONS_PATH=str(collections)),
    )
    assert str(collections / "ansible_collections") in listed.stdout
    assert str(ROOT) not in listed.stdout

    book = tmp_path / "mine.yml"
    book.write_text(USER_PLAYBOOK)
    node = lab.nodes[0]
    env = _env(ANSIBLE_COLLECTIONS_PATH=str(collections))
    argv = [str(BIN / "ansible-playbook"), "-i", str(lab.inventory), "--limit", node, str(book)]
    recaps = []
    for _ in range(2):
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        m = re.search(
            rf"^{node}\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", out, re.M
        )
        assert m, out
        recaps.append(int(m.group(1)))
    assert recaps[1] == 0, f"second run changed {recaps[1]} task(s)"
