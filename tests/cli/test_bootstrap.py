"""`rdmaprov bootstrap`: input errors as one line / exit 1, and full runs of fixture plays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.cli import bootstrap, build_parser

F = Path(__file__).resolve().parents[1] / "fixtures" / "engine"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rdmaprov", "bootstrap", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def assert_input_error(proc: subprocess.CompletedProcess[str], expected: str) -> None:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("rdmaprov: error: ") and expected in lines[0]
    assert proc.stdout == ""


def test_missing_inventory(tmp_path: Path) -> None:
    assert_input_error(cli(str(tmp_path / "nope.ini")), "no such inventory file")


def test_unparsable_inventory(tmp_path: Path) -> None:
    p = tmp_path / "inventory.ini"
    p.write_text("[gpu]\nnode1\nnode2 oops\n")
    assert_input_error(cli(str(p)), "inventory.ini: line 3: Expected key=value")


def test_bad_variable(tmp_path: Path) -> None:
    p = tmp_path / "inventory.ini"
    p.write_text("node1 ansible_host=10.0.0.1\n")
    # A typo of a name we declare; an undeclared name that is no close match is not ours.
    assert_input_error(cli(str(p), "-e", "rdmaprov_serail=1"),
                       "-e: unknown variable rdmaprov_serail (did you mean rdmaprov_serial?)")


def test_bad_forks_from_environment(tmp_path: Path) -> None:
    p = tmp_path / "inventory.ini"
    p.write_text("node1 ansible_host=10.0.0.1\n")
    proc = subprocess.run([sys.executable, "-m", "rdmaprov", "bootstrap", str(p)],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "RDMAPROV_FORKS": "many"})
    assert_input_error(proc, "--forks/RDMAPROV_FORKS: 'many' is not an integer")


def test_help_documents_exit_codes_and_env() -> None:
    proc = cli("--help")
    assert proc.returncode == 0
    for needle in ("exit codes:", "RDMAPROV_FORKS", "RDMAPROV_KEEP_ARTIFACTS", "--skip-tags"):
        assert needle in proc.stdout


def run_fixture(capsys: pytest.CaptureFixture[str], *argv: str,
                book: str = "play.yml") -> tuple[int, str, str]:
    args = build_parser().parse_args(["bootstrap", *argv])
    code = bootstrap.run(args, playbook=F / book)
    out, err = capsys.readouterr()
    return code, out, err


def test_failed_host_exits_2_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_fixture(capsys, str(F / "hosts.ini"), "--json")
    assert code == 2
    doc = json.loads(out)
    assert doc["rc"] == 2
    assert doc["failures"] == [{"host": "bad", "task": "Fail on purpose",
                                "message": "fixture failure on bad", "unreachable": False}]
    assert "bad  " in err  # progress went to stderr


def test_all_good_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_fixture(capsys, str(F / "hosts.ini"), "--skip-tags", "fail",
                               "--check", "-e", "marker=m1")
    assert code == 0
    assert "Say hello  ok=2\nReport check mode and an extra var  ok=2\n" in out  # per task
    # Every host in line: that one line, no table (-v prints it).
    assert "in line: bad,good: nothing to change (2 report lines each; -v shows them)" in out
    assert "Summary" not in out
    code, out, _ = run_fixture(capsys, str(F / "hosts.ini"), "--skip-tags", "fail",
                               "--check", "-e", "marker=m1", "-v")
    assert code == 0
    assert "good  ok           Report check mode and an extra var" in out  # -v: per host


def test_limit_passes_through(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_fixture(capsys, str(F / "hosts.ini"), "--limit", "good", "--json")
    assert code == 0 and list(json.loads(out)["hosts"]) == ["good"]


def test_check_diff_prints_the_drift_and_changes_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dest = tmp_path / "marker.txt"
    code, out, _ = run_fixture(capsys, str(F / "hosts.ini"), "--limit", "good", "--check",
                               "--diff", "-e", f"dest={dest}", book="write.yml")
    assert code == 0 and not dest.exists()
    table = out[out.index("Drift (current -> wanted)"):]
    row = next(line for line in table.splitlines() if line.strip("│ ").startswith("good"))
    assert "Write the marker file" in row and "(absent)" in row
    assert "written by the engine fixture" in row

    # Applied with --diff: the same table says what changed; the re-run shows nothing.
    code, out, _ = run_fixture(capsys, str(F / "hosts.ini"), "--limit", "good", "--diff",
                               "-e", f"dest={dest}", book="write.yml")
    assert code == 0 and dest.read_text() == "written by the engine fixture\n"
    assert "Changed (before -> after)" in out
    code, out, _ = run_fixture(capsys, str(F / "hosts.ini"), "--limit", "good", "--check",
                               "--diff", "--json", "-e", f"dest={dest}", book="write.yml")
    assert code == 0 and json.loads(out)["drift"] == []


def _plan(argv: list[str], changed: dict[str, int], code: int = 0) -> tuple[list[str], str | None]:
    from rdmaprov.engine import HostResult, RunResult

    args = build_parser().parse_args(["bootstrap", "inv.ini", *argv])
    result = RunResult(rc=code, status="successful", artifacts_dir=None,
                       hosts={h: HostResult(name=h, ok=5, changed=c) for h, c in changed.items()})
    return bootstrap.validation_plan(args, code, None, result)


def test_validation_follows_what_site_yml_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in ("RDMAPROV_VALIDATE", "RDMAPROV_NO_VALIDATE"):
        monkeypatch.delenv(env, raising=False)
    # A first run changes every host: all are proven.
    assert _plan([], {"n1": 9, "n2": 9}) == (["n1", "n2"], None)
    # A repair on one host: only that host is proven again.
    assert _plan([], {"n1": 0, "n2": 2}) == (["n2"], None)
    # A no-change re-run: nothing is proven again, unless asked.
    hosts, why = _plan([], {"n1": 0, "n2": 0})
    assert hosts == [] and why is not None and "--validate always" in why
    assert _plan(["--validate", "always"], {"n1": 0, "n2": 0}) == (["n1", "n2"], None)
    assert _plan(["--validate", "never"], {"n1": 3}) == ([], "--validate never")
    assert _plan(["--no-validate", "--validate", "always"], {"n1": 3}) == ([], "--no-validate")
    assert _plan(["--check", "--validate", "always"], {"n1": 3})[0] == []
    assert _plan(["--tags", "net_mtu"], {"n1": 3})[0] == []
    assert _plan([], {"n1": 3}, code=2) == ([], "site.yml did not succeed on every host")
    monkeypatch.setenv("RDMAPROV_VALIDATE", "always")
    assert _plan([], {"n1": 0})[0] == ["n1"]


def test_auto_strategy_is_mitogen_only_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from rdmaprov import settings

    monkeypatch.setattr(settings, "mitogen_installed", lambda: True)
    assert settings.resolve_strategy("auto") == "mitogen"
    assert settings.resolve_strategy("auto", "reconfigure.yml") == "mitogen"
    assert settings.resolve_strategy("auto", "validate.yml") == "linear"
    assert settings.resolve_strategy("auto", "site.yml", hosts=1) == "linear"
    monkeypatch.setattr(settings, "mitogen_installed", lambda: False)
    assert settings.resolve_strategy("auto") == "linear"
    assert settings.resolve_strategy("free") == "free"
    env = settings.environment(settings.rows(strategy="auto", control_dir=Path("/tmp")))
    assert "ANSIBLE_STRATEGY" not in env  # linear: Ansible's own default


def test_validation_phase_hands_the_run_a_typed_request(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    """bootstrap's last phase builds validate's request itself (no made-up command line): the
    settings' defaults and environment, pair rounds only when slow, bootstrap's run options."""
    from rdmaprov.validate import pipeline
    from rdmaprov.validate.report import Report
    from rdmaprov.validate.verdict import Bar

    for env in ("RDMAPROV_VALIDATE_PAIRWISE", "RDMAPROV_VALIDATE_MIN_BUSBW"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("RDMAPROV_VALIDATE_BW_FRACTION", "0.6")
    seen = []
    monkeypatch.setattr(pipeline, "execute", lambda req, human: (
        seen.append(req), Report(None, None, None, Bar(None, "x"), [], []))[1])
    args = build_parser("bootstrap").parse_args(
        ["bootstrap", str(tmp_path / "inv.ini"), "--diff", "-f", "4", "--json",
         "-e", "a=1", "--tags", "net_mtu"])
    bootstrap._validate(args, ["n1", "n2"])
    req = seen[0]
    assert (req.inventory, req.pairwise, req.bw_fraction, req.min_busbw) == (
        tmp_path / "inv.ini", "slow", 0.6, None)
    assert (req.run.limit, req.run.diff, req.run.forks, req.run.json, req.run.extra_vars,
            req.run.tags, req.run.check) == ("n1,n2", False, "4", True, ("a=1",), (), False)
