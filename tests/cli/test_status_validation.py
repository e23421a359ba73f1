"""status's validation column: the judge's verdict, never a worker's exit 0 called a pass.

On a real H100 host (no HCA) the worker exited 0 after NCCL fell back to Socket; the judge
failed the run, and status said "pass (fabric, ...)" from the host's rc file. The verdict now
comes from the controller's record of the judge (rdmaprov/validate/record.py)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import fake_session  # beside this file (rootdir import)
import pytest

from rdmaprov.cli import main
from rdmaprov.engine import HostResult, RunResult
from rdmaprov.validate import record
from rdmaprov.validate import verdict as V
from rdmaprov.validate.report import HostResult as Row
from rdmaprov.validate.report import Report

ROOT = Path(__file__).resolve().parents[2]
HOSTS_INI = ROOT / "tests/fixtures/engine/hosts.ini"  # good, bad
PROBE_TASK = "Read node state"


class FakeSession(fake_session.FakeSession):
    result = RunResult(rc=0, status="successful", artifacts_dir=None,
                       hosts={h: HostResult(h, ok=2) for h in ("good", "bad")})


def state(rc: str | None, mtime: int) -> dict[str, Any]:
    return {"drivers": "inbox", "mtu": {}, "qos": {}, "firewall": None, "runtime": None,
            "gpus": 1, "validation": None if rc is None else
            {"label": "fabric", "rc": rc, "mtime": mtime}}


def status(monkeypatch, capsys, states: dict[str, dict[str, Any]]) -> tuple[dict[str, str], dict]:
    from rdmaprov.cli.status import PROBE_TASK as TASK

    assert TASK == PROBE_TASK
    from rdmaprov.cli.status import ROLES_TASK

    # The node_state module's answer and the site plan's (every role in line), as the runner
    # events carry them.
    monkeypatch.setattr(FakeSession, "events", [
        ev for h, s in states.items() for ev in (
            {"event": "runner_on_ok", "event_data": {"host": h, "task": TASK, "res": s}},
            {"event": "runner_on_ok", "event_data": {"host": h, "task": ROLES_TASK,
                                                     "res": {"differ": {}, "shown": {}}}})])
    monkeypatch.setattr("rdmaprov.cli.status.RunnerSession", FakeSession)
    assert main(["status", str(HOSTS_INI)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert main(["status", str(HOSTS_INI), "--json"]) == 0
    return rows, json.loads(capsys.readouterr().out)["nodes"]


def socket_fallback_report() -> Report:
    """What the judge made of the H100 host's run: the host failed on its transport."""
    row = Row("good")
    row.fail("NCCL fell back to Socket (NET/IB : No device found)")
    return Report("nccl", 1, None, V.Bar(None, "no RDMA port"),
                  [V.Check("worker", V.PASS, "9 sizes, sums correct, 1 ranks")], [row, Row("bad")])


@pytest.fixture(autouse=True)
def state_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def test_a_worker_exit_0_the_judge_failed_is_a_fail(monkeypatch, capsys) -> None:
    before = int(time.time()) - 5
    record.save(socket_fallback_report(), HOSTS_INI)
    rows, nodes = status(monkeypatch, capsys, {"good": state("0", before),
                                               "bad": state("0", before)})
    assert " fail (fabric, " in rows["good"] and "NCCL fell back to Socket" in rows["good"]
    assert " pass (fabric, " not in rows["good"]
    assert nodes["good"]["validation"]["verdict"] == "fail"
    assert nodes["good"]["validation"]["judged"]["reason"].startswith("NCCL fell back")
    # "bad" passed its own checks and the fabric checks: a pass
    assert " pass (fabric, " in rows["bad"] and nodes["bad"]["validation"]["verdict"] == "pass"


def test_a_fabric_wide_failure_fails_every_host_of_the_run(monkeypatch, capsys) -> None:
    rep = Report("nccl", 2, 3.0, V.Bar(20.0, "line rate"),
                 [V.Check("bandwidth", V.FAIL, "busbw 3.0 GB/s < 0.8 x 25.0 GB/s")],
                 [Row("good"), Row("bad")])
    record.save(rep, HOSTS_INI)
    rows, _ = status(monkeypatch, capsys, {"good": state("0", int(time.time()) - 5),
                                           "bad": state(None, 0)})
    for host in ("good", "bad"):
        assert " fail (fabric, " in rows[host]
        assert "the run failed: bandwidth: busbw 3.0 GB/s" in rows[host]


def test_without_the_judges_record_exit_0_is_not_called_a_pass(monkeypatch, capsys) -> None:
    rows, nodes = status(monkeypatch, capsys, {"good": state("0", int(time.time())),
                                               "bad": state("1", int(time.time()))})
    assert "worker exit 0 (fabric, " in rows["good"] and "not judged on this" in rows["good"]
    assert "worker failed (exit 1)" in rows["bad"]
    assert nodes["good"]["validation"]["verdict"] == "unjudged"
    assert nodes["bad"]["validation"]["verdict"] == "fail"
    assert all(" pass" not in r for r in rows.values())


def test_a_host_run_newer_than_the_record_is_not_judged_by_it(monkeypatch, capsys) -> None:
    rep = Report("nccl", 2, 22.0, V.Bar(20.0, "line rate"), [], [Row("good"), Row("bad")])
    record.save(rep, HOSTS_INI)
    later = int(time.time()) + record.CLOCK_SLACK_S + 600  # validated since, elsewhere
    rows, _ = status(monkeypatch, capsys, {"good": state("0", later), "bad": state(None, 0)})
    assert "not judged on this controller" in rows["good"]
    assert " pass (fabric, " in rows["bad"]  # never run on the host since: the record stands


def test_a_record_that_cannot_be_read_is_no_verdict(state_home, monkeypatch, capsys) -> None:
    record.save(Report("nccl", 2, 22.0, V.Bar(20.0, "x"), [], [Row("good")]), HOSTS_INI)
    for f in (state_home / "rdmaprov" / "validations").iterdir():
        f.write_text("{not json")
    rows, _ = status(monkeypatch, capsys, {"good": state(None, 0), "bad": state(None, 0)})
    assert rows["good"].rstrip().endswith("never")


def test_a_host_that_gave_no_result_is_an_error_not_a_fail(monkeypatch, capsys) -> None:
    """A preflight refusal (a setting, a busy port) is the report's error class, not a fabric
    verdict: status says error, as the JUnit report does."""
    row = Row("good")
    row.fail("the rendezvous port 29500 is already in use on this host by python3", error=True)
    record.save(Report("nccl", None, None, V.Bar(None, "x"), [], [row, Row("bad")],
                       error="not launched"), HOSTS_INI)
    rows, nodes = status(monkeypatch, capsys, {"good": state(None, 0), "bad": state(None, 0)})
    assert " error (fabric, " in rows["good"] and "29500 is already in use" in rows["good"]
    assert nodes["good"]["validation"]["verdict"] == "error"
    assert " fail (fabric, " in rows["bad"] and "the run failed: not launched" in rows["bad"]
