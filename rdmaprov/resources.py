"""Where the Ansible collection (roles, playbooks, modules) lives at run time.

An installed wheel carries the collection inside the package (``rdmaprov/_collection``, see
pyproject.toml). An editable install of a source checkout has it at the top of the checkout,
which is then the package's parent directory and holds ``galaxy.yml``.
"""

from __future__ import annotations

from pathlib import Path

COLLECTION_NAMESPACE = "rdmaprov"
COLLECTION_NAME = "cluster"
COLLECTION_FQCN = f"{COLLECTION_NAMESPACE}.{COLLECTION_NAME}"


def collection_root() -> Path:
    """The directory holding galaxy.yml, roles/, plugins/ and playbooks/."""
    # The package's own directory (rdmaprov runs from files, never from a zip: Ansible reads the
    # collection's files by path), so not importlib.resources, whose import (zipfile, tempfile)
    # `rdmaprov check` would pay at every job start.
    pkg = Path(__file__).resolve().parent
    bundled = pkg / "_collection"
    if bundled.is_dir():
        return bundled
    checkout = pkg.parent
    if (checkout / "galaxy.yml").is_file():
        return checkout
    raise RuntimeError("rdmaprov's Ansible collection is missing from this installation")


def playbook(name: str) -> Path:
    path = collection_root() / "playbooks" / name
    if not path.is_file():
        raise FileNotFoundError(f"no playbook {name!r} in {path.parent}")
    return path
