"""validate's flags mean something or are refused, and only a completed validation is recorded
(issue 37, item 4).

`validate INV --check` (and `--tags foo`) printed every host PASS, then `verdict: FAIL` naming
a temporary directory already removed, exited 2, and `status` then showed that FAIL as every
host's last validation. The flags a validation gives no meaning are refused in one line before
any host (this test's listener stands for the hosts: it counts every connection), and a run
that launched no worker leaves the fleet record as it was."""

from __future__ import annotations

from pathlib import Path

import fake_session  # beside this file (rootdir import)
import pytest

from rdmaprov.cli import main
from rdmaprov.engine import Failure, HostResult, RunResult
from rdmaprov.validate import record
from tests.cli.test_inputs import Listener, listener, rdmaprov, refused  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
HOSTS_INI = ROOT / "tests/fixtures/engine/hosts.ini"  # good, bad


def inventory(tmp_path: Path, port: int) -> None:
    (tmp_path / "hosts.ini").write_text(
        f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={port}\n"
        f"node2 ansible_host=127.0.0.2 ansible_port={port}\n")


@pytest.mark.parametrize(("flags", "line"), [
    (["--check"], "--check: validate has no dry run"),
    (["-C"], "--check: validate has no dry run"),
    (["--diff"], "--diff: validate changes no file or setting"),
    (["--tags", "nccl_validate_preflight"], "--tags: validate runs its role whole"),
    (["--skip-tags", "nccl_validate_run"], "--skip-tags: validate runs its role whole"),
    (["--retry-failed"], "--retry-failed: validate keeps no list of failed hosts"),
])
def test_a_flag_a_validation_gives_no_meaning_is_refused_before_any_host(
        tmp_path: Path, listener: Listener, flags: list[str], line: str) -> None:  # noqa: F811
    inventory(tmp_path, listener.port)
    state = tmp_path / "state"
    lines = refused(rdmaprov("validate", "hosts.ini", *flags, cwd=tmp_path,
                             env={"XDG_STATE_HOME": str(state)}))
    assert len(lines) == 1 and lines[0].startswith(line), lines
    assert listener.contacts == 0
    assert not state.exists()  # nothing recorded


def test_every_refused_flag_is_named_one_line_each(tmp_path: Path,
                                                   listener: Listener) -> None:  # noqa: F811
    inventory(tmp_path, listener.port)
    lines = refused(rdmaprov("validate", "hosts.ini", "--check", "--diff", "--tags", "x",
                             cwd=tmp_path))
    assert [ln.split(":", 1)[0] for ln in lines] == ["--check", "--diff", "--tags"]
    assert listener.contacts == 0


@pytest.mark.parametrize(("args", "line"), [
    (["--plan", "8", "-e", "nccl_validate_timeout=60"],
     "--extra-vars: --plan runs no playbook on the inventory's hosts; it would be dropped"),
    (["--plan", "8", "--check"], "--check: validate has no dry run"),
    (["--judge", "results", "--limit", "node1"],
     "--limit: --judge DIR runs no playbook on the inventory's hosts; it would be dropped"),
    (["--judge", "results", "--list-hosts"],
     "--list-hosts: --judge DIR runs no playbook on the inventory's hosts; it would be dropped"),
    (["--judge", "results", "--tags", "x"], "--tags: validate runs its role whole"),
    # The settings too: what runs, where nothing runs.
    (["--plan", "8", "--image", "x"], "--image: --plan sizes the pair rounds from a host count "
                                      "only; it runs and judges nothing"),
    (["--plan", "8", "--min-busbw", "20"], "--min-busbw: --plan sizes the pair rounds"),
    (["--plan", "8", "--json"], "--json: --plan prints the rounds as text"),
    (["--judge", "results", "--runtime", "host"],
     "--runtime: --judge DIR judges what a run already wrote; it runs nothing"),
    (["--judge", "results", "--results", "kept"],
     "--results: --judge DIR judges what a run already wrote: DIR is the results directory"),
    (["--judge", "results", "--compare-socket"], "--compare-socket: --judge DIR judges what a "
                                                 "run already wrote"),
])
def test_what_runs_no_playbook_refuses_the_playbooks_flags(tmp_path: Path, args: list[str],
                                                           line: str) -> None:
    (tmp_path / "results").mkdir()
    lines = refused(rdmaprov("validate", *args, cwd=tmp_path))
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_a_setting_from_the_environment_is_a_default_not_a_flag_given(tmp_path: Path) -> None:
    """RDMAPROV_VALIDATE_IMAGE set for the runs does not stop a --plan or --judge."""
    p = rdmaprov("validate", "--plan", "4", cwd=tmp_path,
                 env={"RDMAPROV_VALIDATE_IMAGE": "site/torch:1", "RDMAPROV_VALIDATE_RUNTIME":
                      "host"})
    assert p.returncode == 0 and p.stdout.startswith("4 hosts: "), p.stdout + p.stderr


class Session(fake_session.FakeSession):
    """validate.yml's run as Ansible reports it; the worker's files are not there."""


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("rdmaprov.validate.pipeline.RunnerSession", Session)
    return tmp_path / "state"


def test_a_run_that_launched_no_worker_is_not_recorded(state_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Every host ok, but no fabric run (what a partial run of the role leaves): no verdict
    for status to show; an earlier real verdict stays."""
    monkeypatch.setattr(Session, "result", RunResult(
        rc=0, status="successful", artifacts_dir=None,
        hosts={h: HostResult(h, ok=3) for h in ("good", "bad")}))
    before = {"good": {"verdict": "pass", "reason": "", "label": "fabric", "time": 1}}
    state_home.mkdir(parents=True)
    record._file(HOSTS_INI).parent.mkdir(parents=True, exist_ok=True)
    record._file(HOSTS_INI).write_text(__import__("json").dumps(before))
    assert main(["validate", str(HOSTS_INI)]) == 2
    assert "verdict: FAIL" in capsys.readouterr().out
    assert record.load(HOSTS_INI) == before


def test_hosts_that_failed_before_the_run_are_recorded(state_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A host that could not run is a real outcome of a real validation: it is recorded."""
    why = Failure(task="Probe the host", message="no container engine", unreachable=False)
    monkeypatch.setattr(Session, "result", RunResult(
        rc=2, status="failed", artifacts_dir=None,
        hosts={"good": HostResult("good", ok=3),
               "bad": HostResult("bad", ok=1, failed=1, failure=why)}))
    assert main(["validate", str(HOSTS_INI)]) == 2
    capsys.readouterr()
    got = record.load(HOSTS_INI)
    assert got["bad"]["verdict"] == "error" and "no container engine" in got["bad"]["reason"]
