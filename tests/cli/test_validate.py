"""rdmaprov validate: the pure parts (pair blame, report output, flags); whole results
directories through the CLI are in test_validate_judge.py, the lab run in
tests/integration/test_validate_lab.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rdmaprov.cli import main
from rdmaprov.validate.judge import blame_pairs, load_run
from rdmaprov.validate.report import HostResult, Report, print_table, write_junit
from rdmaprov.validate.verdict import Bar, Check


def test_blame_names_the_host_in_every_slow_pair() -> None:
    # Measured in the lab: node3 throttled to 50 Mbit/s with tc tbf.
    pairs = {("node1", "node2"): 0.823, ("node1", "node3"): 0.006, ("node2", "node3"): 0.006}
    bar, _, blamed, unexplained = blame_pairs(pairs, None, 0.4)
    assert bar == pytest.approx(0.3292)
    assert list(blamed) == ["node3"]
    assert "node1+node3 0.006 GB/s" in blamed["node3"]
    assert unexplained == []


def test_lab_noise_is_not_blamed() -> None:
    pairs = {("node1", "node2"): 0.758, ("node1", "node3"): 0.467, ("node2", "node3"): 0.503}
    _, _, blamed, unexplained = blame_pairs(pairs, None, 0.4)
    assert blamed == {} and unexplained == []


def test_explicit_threshold_and_failed_pair() -> None:
    pairs = {("a", "b"): 10.0, ("a", "c"): None, ("b", "c"): 2.0, ("a", "d"): 11.0,
             ("b", "d"): 12.0, ("c", "d"): 1.0}
    _, _, blamed, _ = blame_pairs(pairs, 8.0)
    assert list(blamed) == ["c"]


def test_two_hosts_cannot_be_told_apart() -> None:
    _, _, blamed, unexplained = blame_pairs({("a", "b"): 0.001}, 1.0)
    assert blamed == {}
    assert "cannot tell" in unexplained[0]


def test_slow_pairs_without_a_single_culprit_are_reported() -> None:
    pairs = {("a", "b"): 1.0, ("a", "c"): 1.0, ("b", "c"): 0.01, ("a", "d"): 1.0,
             ("b", "d"): 1.0, ("c", "d"): 1.0}
    _, _, blamed, unexplained = blame_pairs(pairs, None)
    assert blamed == {} and unexplained == ["b+c 0.01 GB/s"]


def _report(passed: bool) -> Report:
    node3 = HostResult("node3", transport="tcp", pair_busbw_GBps=0.006)
    if not passed:
        node3.fail("slow in every pair it is in")
    return Report(backend="gloo", world_size=3, busbw_GBps=0.5,
                  bar=Bar(None, "the run went over TCP"),
                  checks=[Check("worker", "pass", "ok")],
                  hosts=[HostResult("node1", transport="tcp"), node3])


def test_junit_has_a_case_per_host(tmp_path: Path) -> None:
    out = tmp_path / "v.xml"
    write_junit(_report(False), out)
    root = ET.parse(out).getroot()
    assert root.get("failures") == "1"
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["node3"]


def test_table_names_the_failing_host(capsys: pytest.CaptureFixture[str]) -> None:
    import sys
    print_table(_report(False), sys.stdout)
    out = capsys.readouterr().out
    assert "node3  FAIL" in out and "verdict: FAIL" in out


def test_load_run_maps_worker_hostnames_to_inventory_names(tmp_path: Path) -> None:
    run = tmp_path / "fabric"
    for h in ("n1", "n2"):
        (run / h).mkdir(parents=True)
        (run / h / "worker.log").write_text("")
    (run / "run.json").write_text(json.dumps({"label": "fabric", "hosts": ["n1", "n2"],
                                              "master": "n1", "nproc_per_node": 2}))
    ranks = [{"rank": r, "hostname": f"c{r // 2}"} for r in range(4)]
    (run / "n1" / "result.json").write_text(json.dumps({"ok": True, "ranks": ranks}))
    data = load_run(run)
    assert data is not None
    assert data.name_of == {"c0": "n1", "c1": "n2"}
    assert [data.files[h].report for h in ("n1", "n2")] == [None, None]
    assert data.worker_name("n2") == "c1"


def test_missing_inventory_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.ini")]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_bad_fraction_is_exit_1(tmp_path: Path) -> None:
    inv = tmp_path / "inv.ini"
    inv.write_text("[lab]\nnode1\n")
    assert main(["validate", str(inv), "--bw-fraction", "1.5"]) == 1
    assert main(["validate", str(inv), "--pair-fraction", "0"]) == 1


def test_pairs_without_any_result_fail_the_rounds():
    pairs = {("a", "b"): None, ("a", "c"): None, ("b", "c"): None}
    _, _, blamed, unexplained = blame_pairs(pairs, None, 0.4)
    assert blamed == {}
    assert unexplained == ["a+b no result", "a+c no result", "b+c no result"]
