"""Reports that say when and what (issue 39, item 7): the HTML page's start, duration,
inventory and rdmaprov version; JUnit's ``timestamp`` and the durations the run measured,
valid by Jenkins' own schema; a skipped stability check shown as skipped, never as an alarm.

The times come from the hosts' steps.log (the launch shell's and the worker's own lines, as a
real run writes them: tests/fixtures/validate/h100-1rank-no-hca is one, unedited) or, for a
run this rdmaprov made, from the controller's clock."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import fake_session  # beside this file (rootdir import)
import pytest
import xmlschema

from rdmaprov import __version__
from rdmaprov.cli import main
from rdmaprov.engine import Failure, HostResult, RunResult
from rdmaprov.validate import run_times
from tests.cli.test_validate_judge import HDR, IB_LOG, jittery, make_run, with_pairs, worker_doc

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "validate"
REAL = FIXTURES / "h100-1rank-no-hca"  # a real run's directory (its .source.md says where)
SCHEMA = xmlschema.XMLSchema(str(FIXTURES / "junit-10.xsd"))  # Jenkins' (its .source.md)
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
T0 = 1796487654.0  # a launch start, as the hosts' clocks write it (2026-12-05T16:20:54Z)


def steps(path: Path, start: float, lines: list[tuple[float, str]], end: float | None) -> None:
    """A host's steps.log as the launch shell and the worker write it."""
    out = [f"{start:.9f} launch start"] + [f"{t:.3f} rank0 {what}" for t, what in lines]
    if end is not None:
        out.append(f"{end:.9f} launch exit 0")
    (path / "steps.log").write_text("\n".join(out) + "\n")


def cases(root: ET.Element, suite: str) -> dict[str, ET.Element]:
    s = root.find(f"testsuite[@name='{suite}']")
    assert s is not None, suite
    return {c.get("name", ""): c for c in s.iter("testcase")}


def test_a_real_runs_junit_has_its_start_and_measured_time_and_is_valid_for_jenkins(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "j.xml"
    assert main(["validate", "--judge", str(REAL), "--junit", str(out)]) == 2
    capsys.readouterr()
    SCHEMA.validate(str(out))
    root = ET.parse(out).getroot()
    for suite in root.iter("testsuite"):
        # the launch's first line in that directory's steps.log: 1796487654.742993457
        assert suite.get("timestamp") == "2026-12-05T16:20:54Z"
    # its launch: start 1796487654.742993457, exit 1796487661.569902640
    assert cases(root, "rdmaprov.validate.hosts")["h200"].get("time") == "6.827"
    assert root.get("time") == "6.827"
    for case in root.iter("testcase"):
        assert float(case.get("time", "0")) > 0


def test_each_host_has_its_own_launch_time_and_the_pairs_their_rounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = {"n1": (HDR, IB_LOG), "n2": (HDR, IB_LOG), "n3": (HDR, IB_LOG)}
    # rounds as the worker records them: n1+n2 and n3+n1 in round 1, n2+n3 in round 2
    doc = with_pairs(worker_doc(list(hosts), 9.0), {("n1", "n2"): 23.5, ("n3", "n1"): 9.0,
                                                    ("n2", "n3"): 9.1})
    run = make_run(tmp_path, "fabric", hosts, doc)
    # n1 is the rendezvous host: its rank 0 ran two pair rounds, 4 s and 2.5 s.
    steps(run / "n1", T0, [(T0 + 3, "all_reduce of 1048576 bytes"),
                           (T0 + 10, "pair round 1 step 1: 1 pairs"),
                           (T0 + 14, "pair round 2 step 1: 1 pairs"),
                           (T0 + 15, "pair round 2 step 2: 1 pairs"),
                           (T0 + 16.5, "barrier"), (T0 + 17, "exit 0")], T0 + 17.25)
    steps(run / "n2", T0 + 0.5, [(T0 + 3, "start")], T0 + 18.0)
    steps(run / "n3", T0 + 1.0, [(T0 + 3, "start"), (T0 + 9.0, "barrier")], None)  # lost
    out = tmp_path / "j.xml"
    main(["validate", "--judge", str(tmp_path), "--pairwise", "always", "--junit", str(out)])
    capsys.readouterr()
    SCHEMA.validate(str(out))
    root = ET.parse(out).getroot()
    got = {h: c.get("time") for h, c in cases(root, "rdmaprov.validate.hosts").items()}
    # n3's launch never exited: it ran at least to its last line
    assert got == {"n1": "17.250", "n2": "17.500", "n3": "8.000"}
    assert root.get("time") == "18.000"  # the first launch start to the last exit
    assert {s.get("timestamp") for s in root.iter("testsuite")} == {"2026-12-05T16:20:54Z"}
    assert run_times.round_spans((run / "n1" / "steps.log").read_text()) == {
        "1": 4.0, "2": 2.5}
    pairs = {p: c.get("time") for p, c in cases(root, "rdmaprov.validate.pairs").items()}
    assert pairs == {"n1+n2": "4.000", "n3+n1": "4.000", "n2+n3": "2.500"}
    # a fabric check judges the fabric launch: the first launch start to the last exit
    assert {c.get("time") for c in cases(root, "rdmaprov.validate.fabric").values()} == {
        "18.000"}


def test_a_launch_span_is_read_as_the_hosts_write_it() -> None:
    real = (REAL / "fabric" / "h200" / "steps.log").read_text()
    start, end = run_times.launch_span(real) or (0.0, 0.0)
    assert round(end - start, 3) == 6.827
    assert run_times.launch_span("") is None
    assert run_times.launch_span("garbage\n1.0\n") is None
    assert run_times.iso_utc(T0) == "2026-12-05T16:20:54Z"


def test_a_pass_whose_stability_check_was_skipped_shows_no_alarm(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = {"n1": (HDR, IB_LOG), "n2": (HDR, IB_LOG)}
    doc = worker_doc(list(hosts), 0.9 * 25.0)
    jittery(doc["results"], 5.0, iters=5)  # gloo's default: too few iterations to judge a p99
    run = make_run(tmp_path, "fabric", hosts, doc)
    steps(run / "n1", T0, [], T0 + 42.0)
    steps(run / "n2", T0, [], T0 + 41.0)
    page_path = tmp_path / "r.html"
    assert main(["validate", "--judge", str(tmp_path), "--html", str(page_path)]) == 0
    out = capsys.readouterr().out
    assert "verdict: PASS" in out and "UNSTABLE" not in out
    assert "iterations (stability check skipped: fewer than 10 iterations" in out
    page = page_path.read_text()
    assert 'class="verdict PASS"' in page
    assert "stability check skipped: fewer than 10 iterations per size" in page
    assert "UNSTABLE" not in page
    iterations = page[page.index("<h2>Iterations"):]
    assert "#c0392b" not in iterations and 'class="limit"' not in iterations  # no alarm mark
    assert iterations.count('fill="#888"') == sum(len(r["iters_us"]) for r in doc["results"])
    assert '<td class="skip">skip</td>' in page  # the check's row reads skipped, neutral
    # when and what
    assert "2026-12-05T16:20:54Z (the hosts&#x27; clocks (steps.log))" in page
    assert "<td>42.0 s</td>" in page
    assert f"<td>{__version__}</td>" in page
    assert "not recorded" in page  # a directory judged here: no inventory known


class Session(fake_session.FakeSession):
    """The run as the role leaves it: the fabric run of the hosts that could be reached (their
    files, steps.log too) in the results directory the pipeline named."""

    def __init__(self, spec, on_event=None):  # type: ignore[no-untyped-def]
        super().__init__(spec, on_event)
        self.results = Path(spec.extravars["nccl_validate_results_dir"])

    def run(self) -> RunResult:
        hosts = {"good": (HDR, IB_LOG)}
        run = make_run(self.results, "fabric", hosts, None)  # its worker gave no result
        steps(run / "good", T0, [], T0 + 20.0)
        return super().run()


MITOGEN = ("EOF on stream; last 100 lines received:\nssh: connect to host 10.0.0.5 port 22: "
           "Connection refused\r\n")


def test_a_live_run_says_when_what_and_why_a_host_was_unreachable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("rdmaprov.validate.pipeline.RunnerSession", Session)
    inv = tmp_path / "hosts.ini"
    shutil.copy(ROOT / "tests/fixtures/engine/hosts.ini", inv)  # good, bad
    monkeypatch.setattr(Session, "result", RunResult(
        rc=4, status="failed", artifacts_dir=None,
        hosts={"good": HostResult("good", ok=3, seconds=4.25),
               "bad": HostResult("bad", unreachable=1, seconds=10.5, failure=Failure(
                   "Gathering Facts", MITOGEN, unreachable=True))}))
    results, junit, html = tmp_path / "res", tmp_path / "j.xml", tmp_path / "r.html"
    assert main(["validate", str(inv), "--results", str(results), "--junit", str(junit),
                 "--html", str(html)]) == 2
    out = capsys.readouterr().out
    bad = next(ln for ln in out.splitlines() if ln.startswith("bad "))
    assert bad.endswith("unreachable: ssh to 10.0.0.5:22: Connection refused")
    SCHEMA.validate(str(junit))
    root = ET.parse(junit).getroot()
    got = cases(root, "rdmaprov.validate.hosts")
    err = got["bad"].find("error")
    assert err is not None
    assert err.get("message") == "unreachable: ssh to 10.0.0.5:22: Connection refused"
    assert got["bad"].get("time") == "10.500"  # Ansible's time on its tasks: it never launched
    assert got["good"].get("time") == "20.000"  # its launch, by its steps.log
    stamp = root.find("testsuite").get("timestamp")  # type: ignore[union-attr]
    assert stamp and ISO.match(stamp) and stamp != "2026-12-05T16:20:54Z"  # the controller's
    page = html.read_text()
    assert f"<td>{inv}</td>" in page and f"<td>{__version__}</td>" in page
    assert f"{stamp} (the controller&#x27;s clock)" in page
    # The kept directory keeps the run's record: judged later, the report says the same.
    record = json.loads((results / run_times.RECORD).read_text())
    assert record["inventory"] == str(inv) and record["started"] == stamp
    main(["validate", "--judge", str(results), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["inventory"] == str(inv) and doc["run"]["started"] == stamp
    assert doc["run"]["clock"] == "controller"
    assert doc["run"]["duration_s"] == record["duration_s"]
