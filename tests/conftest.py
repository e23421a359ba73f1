"""Shared fixtures. The `lab` fixture brings up real lab nodes once per test session."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdmaprov.lab import Lab

LAB_NAME = os.environ.get("RDMAPROV_TEST_LAB", "test")
LAB_NODES = int(os.environ.get("RDMAPROV_TEST_LAB_NODES", "3"))


class LabHandle:
    def __init__(self, lab: Lab) -> None:
        self._lab = lab
        self.name = lab.name
        self.inventory: Path = lab.inventory
        self.addresses: dict[str, str] = lab.addresses
        self.nodes: list[str] = list(self.addresses)
        self.dir: Path = lab.dir

    def exec(self, node: str, argv: list[str], check: bool = True,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
        return self._lab.exec(node, argv, check=check, input=input)

    def ssh_argv(self, node: str) -> list[str]:
        return ["ssh", "-i", str(self._lab.key),
                "-o", f"UserKnownHostsFile={self._lab.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                f"root@{self.addresses[node]}"]

    def etc_digest(self, node: str) -> str:
        """A digest of every file under the node's /etc (content, mode, owner, link target)."""
        script = ("find /etc -xdev \\( -type f -o -type l \\) -printf '%p %m %u %l\\n' | sort; "
                  "find /etc -xdev -type f -print0 | sort -z | xargs -0 sha256sum")
        out = self.exec(node, ["sh", "-c", script]).stdout
        return hashlib.sha256(out.encode()).hexdigest()

    def ssh_logins(self, node: str) -> int:
        """SSH logins the node's sshd has accepted (its journal): "no host contacted" checks."""
        out = self.exec(node, ["journalctl", "-u", "ssh", "--no-pager", "-o", "cat"]).stdout
        return out.count("Accepted publickey")

    @property
    def lab(self) -> Lab:
        return self._lab


def _lab_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the lab needs root"
    for tool in ("debootstrap", "apt-ftparchive", "unshare", "nsenter", "ssh"):
        if not shutil.which(tool):
            return f"the lab needs {tool} (./run.sh setup installs it)"
    return None


@pytest.fixture(scope="session")
def lab() -> Iterator[LabHandle]:
    why = _lab_unavailable()
    if why:
        # CI sets RDMAPROV_REQUIRE_LAB=1: there a missing lab is a failure, not a skip.
        if os.environ.get("RDMAPROV_REQUIRE_LAB") == "1":
            pytest.fail(why)
        pytest.skip(why)
    lab = Lab(LAB_NAME)
    lab.up(nodes=LAB_NODES, log=lambda msg: None)
    try:
        yield LabHandle(lab)
    finally:
        if os.environ.get("RDMAPROV_KEEP_LAB") != "1":
            lab.down(log=lambda msg: None)


H200_CAPTURE = Path(__file__).resolve().parent / "fixtures" / "sysfs" / "h200-captured.tar.gz"


def extract_safely(archive: Path, dest: Path) -> None:
    """extractall with the "data" filter where this Python has it (3.11.4+, 3.12); before that
    (Debian 12's 3.11.2) the same refusals by hand: no absolute or escaping path, no link out of
    ``dest``, no device, only plain files, directories and links."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()
        for m in tar.getmembers():
            target = (dest / m.name).resolve()
            link = (target.parent / m.linkname).resolve() if m.issym() else \
                (dest / m.linkname).resolve() if m.islnk() else target
            if (m.name.startswith("/") or not (m.isfile() or m.isdir() or m.issym() or m.islnk())
                    or not target.is_relative_to(root) or not link.is_relative_to(root)):
                raise ValueError(f"{archive.name}: refusing member {m.name!r}")
        tar.extractall(dest)  # every member checked above


@pytest.fixture
def h200_root(tmp_path: Path) -> Path:
    """The root captured from the real H200 (tests/fixtures/sysfs/SOURCES.md), extracted."""
    extract_safely(H200_CAPTURE, tmp_path)
    return tmp_path
