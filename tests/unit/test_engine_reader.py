"""One reader of the container engines on a host (container_runtime_probe.engine): the
container_runtime probe's engines() and `rdmaprov status`'s runtime column both ask it."""

from __future__ import annotations

import pytest

from rdmaprov.collection import container_runtime_probe as crp
from rdmaprov.collection import node_state


def _asker(answers: dict):
    asked = []

    def ask(argv: list):
        asked.append(argv[0])
        return answers.get(tuple(argv))
    return ask, asked


def test_an_engine_is_its_path_its_version_and_whether_it_answered() -> None:
    ask, asked = _asker({("podman", "--version"): "podman version 5.4.2"})
    which = {"podman": "/usr/bin/podman", "docker": "/usr/bin/docker"}.get
    assert crp.engine("enroot", ["enroot", "version"], ask, which) is None
    assert asked == []  # not installed: not asked
    assert crp.engine("podman", ["podman", "--version"], ask, which) == {
        "path": "/usr/bin/podman", "version": "podman version 5.4.2", "usable": True}
    assert crp.engine("docker", ["docker", "--version"], ask, which) == {
        "path": "/usr/bin/docker", "version": None, "usable": False}


def test_the_probe_asks_dockers_daemon_and_the_others_own_version(monkeypatch) -> None:
    # docker without its daemon: its server version fails, so it is there but not usable.
    answers = {tuple(crp.VERSION_ARGV["podman"]): "5.4.2",
               tuple(crp.VERSION_ARGV["enroot"]): "3.5.0"}
    ask, asked = _asker(answers)
    monkeypatch.setattr(crp, "run", ask)
    monkeypatch.setattr(crp.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert crp.engines() == {
        "docker": {"path": "/usr/bin/docker", "version": None, "usable": False},
        "podman": {"path": "/usr/bin/podman", "version": "5.4.2", "usable": True},
        "enroot": {"path": "/usr/bin/enroot", "version": "3.5.0", "usable": True}}
    assert asked == ["docker", "podman", "enroot"]
    assert crp.VERSION_ARGV["docker"] == ["docker", "version", "--format", "{{.Server.Version}}"]
    monkeypatch.setattr(crp.shutil, "which", lambda name: None)
    assert crp.engines() == {}


@pytest.mark.parametrize(("answers", "shown", "asked"), [
    ({("docker", "--version"): (0, "Docker version 26.1.5+dfsg1, build a72d7cd\n")},
     "docker 26.1.5", ["docker"]),  # docker first: podman is not asked
    ({("podman", "--version"): (0, "podman version 5.4.2\n")}, "podman 5.4.2",
     ["docker", "podman"]),
    ({("docker", "--version"): (1, ""), ("podman", "--version"): (0, "podman version 4.9\n")},
     "podman 4.9", ["docker", "podman"]),
    ({("docker", "--version"): (0, "no version here\n")}, "docker ?", ["docker"]),
    ({}, None, ["docker", "podman"]),  # neither installed (node_state.run answers MISSING)
])
def test_status_shows_the_first_engine_whose_client_answers(answers, shown, asked) -> None:
    calls = []

    def run(argv: list):
        calls.append(argv[0])
        return answers.get(tuple(argv), node_state.MISSING)

    assert node_state.runtime(run) == shown
    assert calls == asked
