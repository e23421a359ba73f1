"""A run that fails before any host event reports Ansible's own error line (issue 18), not
"ended with status failed (rc 1) and no host to blame". Real ansible-playbook runs through
ansible-runner, on this machine only (local connection)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaprov.engine import RunnerSession, RunSpec, ansible_error

F = Path(__file__).resolve().parents[1] / "fixtures" / "engine"


def run(playbook: Path) -> str | None:
    spec = RunSpec(playbook=playbook, inventory=F / "hosts.ini", host_count=2)
    result = RunnerSession(spec).run()
    assert result.rc != 0 and not result.hosts
    return result.error


def test_a_collection_that_is_not_installed(tmp_path: Path) -> None:
    play = tmp_path / "play.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  roles:\n"
                    "    - no_such_namespace.no_such_collection.no_role\n")
    assert run(play).startswith(
        "the role 'no_such_namespace.no_such_collection.no_role' was not found in ")


def test_a_configuration_ansible_playbook_cannot_load(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The run reads the ansible.cfg found where rdmaprov started ($ANSIBLE_CONFIG here)."""
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\nforks = abc\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(cfg))
    assert run(F / "play.yml") == (f"Config 'DEFAULT_FORKS' from '{cfg}' has an invalid value: "
                                   "Invalid value provided for 'integer': 'abc'")


@pytest.mark.parametrize(("line", "said"), [
    ("[ERROR]: the role 'x' was not found", "the role 'x' was not found"),
    ("ERROR! couldn't resolve module/action 'x.y.z'", "couldn't resolve module/action 'x.y.z'"),
    ("ERROR: Config 'DEFAULT_FORKS' has an invalid value", "Config 'DEFAULT_FORKS' has an "
                                                           "invalid value"),
    ("[WARNING]: no inventory", None), ("PLAY [all] ***", None),
])
def test_error_lines_of_each_ansible_generation(line: str, said: str | None) -> None:
    assert ansible_error(line) == said


def control_dir(inventory: Path, keep: Path) -> str:
    import json

    spec = RunSpec(playbook=F / "play.yml", inventory=inventory, host_count=2,
                   skip_tags=["fail"], keep_artifacts=keep)
    assert RunnerSession(spec).run().ok
    return json.loads((keep / "env" / "envvars").read_text())["ANSIBLE_SSH_CONTROL_PATH_DIR"]


def test_runs_share_ssh_masters_only_for_one_inventory(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs against one inventory reuse the same masters; a run against another inventory
    (other machines, maybe at the same addresses) never rides on them."""
    monkeypatch.setenv("RDMAPROV_SSH_CONTROL_DIR", str(tmp_path / "cp"))
    other = tmp_path / "other.ini"
    other.write_text((F / "hosts.ini").read_text())
    first = control_dir(F / "hosts.ini", tmp_path / "k1")
    assert control_dir(F / "hosts.ini", tmp_path / "k2") == first
    elsewhere = control_dir(other, tmp_path / "k3")
    assert elsewhere != first
    assert Path(first).parent == Path(elsewhere).parent == tmp_path / "cp"
