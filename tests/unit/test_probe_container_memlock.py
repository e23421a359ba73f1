"""`rdmaprov probe --container` says the locked-memory limit a container of each engine gets
here, read from the engine's effective configuration (containers.conf's default_ulimits,
daemon.json's default-ulimits, else the limit the engine itself runs with), never canned text
(issue 37: it said "container_runtime sets them unlimited" where bootstrap had not, and a
container's ulimit -l was 8192)."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from rdmaprov import collection
from rdmaprov.cli import main
from rdmaprov.probe import container

CANNED = "container_runtime sets them unlimited"


def test_podman_default_ulimits_of_the_last_file_that_sets_them(tmp_path: Path) -> None:
    base = tmp_path / "containers.conf"
    base.write_text('[containers]\ndefault_ulimits = ["nofile=1024:2048", "memlock=8192:16384"]\n')
    ours = tmp_path / "90-rdmaprov.conf"
    ours.write_text('[containers]\npids_limit = 0\n# RDMA pins memory.\n'
                    'default_ulimits = ["memlock=-1:-1"]\n')
    got = container.podman_memlock([str(base), str(ours)])
    assert got == {"soft_kib": "unlimited", "hard_kib": "unlimited", "unlimited": True,
                   "source": f"default_ulimits memlock=-1:-1 in {ours}"}
    got = container.podman_memlock([str(ours), str(base)])
    assert (got["soft_kib"], got["hard_kib"], got["unlimited"]) == (8, 16, False)


def test_podman_without_default_ulimits_passes_on_its_own_limit(tmp_path: Path) -> None:
    # What container_runtime_memlock: host leaves (the lab): pids_limit only.
    ours = tmp_path / "90-rdmaprov.conf"
    ours.write_text("[containers]\npids_limit = 0\n")
    got = container.podman_memlock([str(ours)])
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    assert got["soft_kib"] == container._kib(soft) and got["hard_kib"] == container._kib(hard)
    assert got["source"] == (f"no memlock in containers.conf's default_ulimits (read: {ours}): "
                             "a container gets the limit podman runs with, this shell's")
    line = container.memlock_line("podman", {**got, "soft_kib": 8192, "hard_kib": 8192,
                                             "unlimited": False})
    assert line == ("podman: 8192 KiB (hard 8192 KiB): " + got["source"] + "; RDMA needs "
                    "unlimited: run bootstrap with container_runtime_memlock: unlimited, or give "
                    "the job --ulimit memlock=-1:-1")


def test_a_broken_containers_conf_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("[containers\n")
    assert f"{bad} unreadable" in container.podman_memlock([str(bad)])["source"]


def test_docker_daemon_json_then_dockerd_own_limit(tmp_path: Path) -> None:
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{"default-ulimits": {"memlock": {"Name": "memlock", "Hard": -1, '
                      '"Soft": -1}}}')
    assert container.docker_memlock(str(daemon), str(tmp_path / "proc"))["unlimited"]
    daemon.write_text('{"features": {"cdi": true}}')
    proc = tmp_path / "proc" / "812"
    proc.mkdir(parents=True)
    (proc / "comm").write_text("dockerd\n")
    (proc / "limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max locked memory         8388608              8388608              bytes     \n")
    got = container.docker_memlock(str(daemon), str(tmp_path / "proc"))
    assert got == {"soft_kib": 8192, "hard_kib": 8192, "unlimited": False,
                   "source": f"no default-ulimits memlock in {daemon}: a container gets "
                             "dockerd's own limit (pid 812)"}
    (proc / "comm").write_text("sshd\n")
    assert container.docker_memlock(str(daemon), str(tmp_path / "proc"))["soft_kib"] is None


def test_probe_container_prints_what_it_read(tmp_path: Path, monkeypatch, capsys) -> None:
    ours = tmp_path / "90-rdmaprov.conf"
    ours.write_text("[containers]\npids_limit = 0\n")
    monkeypatch.setattr(collection.container_runtime_probe, "engines",
                        lambda: {"podman": {"version": "4.3.1"}})
    monkeypatch.setattr(container, "podman_conf_files", lambda: [str(ours)])
    assert main(["probe", "--container", "--sysfs-root", str(tmp_path / "sys")]) == 0
    out = capsys.readouterr().out
    assert CANNED not in out
    [line] = [ln for ln in out.splitlines() if ln.startswith("Memlock: ")]
    assert line.startswith("Memlock: podman: ")
    assert f"no memlock in containers.conf's default_ulimits (read: {ours})" in line
    assert "docker" not in line  # not installed here: nothing said of it


@pytest.mark.parametrize("text", ["-1", "unlimited"])
def test_unlimited_spellings(text: str) -> None:
    assert container._ulimit_value(text) == -1
