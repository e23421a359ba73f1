"""`validate --judge` on a synthetic fleet of 300 hosts (issue 29, item 3): the verdicts, not the
time (bench/judge_scale.py measures 1,000 and 10,000 hosts; bench/RESULTS.md has the figures).

The directory is bench/judge_scale.py's, built from the same real parts as
tests/cli/test_validate_judge.py (nvpeer56's NCCL IB log with each host's name, nccl#226's
Socket fallback log, the counters script over the real-format NDR sysfs tree, a port trained
down to HDR, a hung host, the ring's pair rounds with one slow host). What each host must get
follows from what build() put in its files, never from a recorded output.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
from pathlib import Path

import pytest

from rdmaprov.cli import main
from rdmaprov.validate.report_html import PLOT_PAIRS

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("judge_scale", ROOT / "bench" / "judge_scale.py")
assert _spec and _spec.loader
judge_scale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(judge_scale)

N = 300


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict, str]:
    base = tmp_path_factory.mktemp("fleet")
    results = base / "results"
    facts = judge_scale.build(results, N)
    out = base / "out"
    out.mkdir()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["validate", "--judge", str(results), "--json", "--junit",
                   str(out / "j.xml"), "--html", str(out / "r.html")])
    doc = json.loads(buf.getvalue())
    assert doc["exit_code"] == rc
    return results, facts, doc, (out / "r.html").read_text(encoding="utf-8")


def test_every_host_gets_the_verdict_its_files_call_for(fleet) -> None:
    _, facts, doc, _ = fleet
    hosts = [f"gpu{i:05d}" for i in range(N)]
    socket, down, hung = set(hosts[7::100]), set(hosts[13::200]), set(hosts[29::500])
    slow = facts["slow"]
    assert (len(socket), len(down), len(hung)) == (facts["socket_fallback"],
                                                   facts["trained_down"], facts["hung"])
    by = {h["host"]: h for h in doc["hosts"]}
    assert list(by) == hosts  # every host, once, in rank order
    for h in socket:
        assert not by[h]["passed"] and "fell back to Socket" in by[h]["reasons"][0], by[h]
    for h in hung:
        assert not by[h]["passed"] and by[h]["error"], by[h]
        assert by[h]["reasons"][0].startswith("worker hung: killed at the run's timeout")
    assert not by[slow]["passed"] and by[slow]["reasons"][0].startswith("slow with every partner")
    assert list(doc["pairwise"]["blamed"]) == [slow] and not doc["pairwise"]["unexplained"]
    for h in down:  # its port trained down to HDR is what its line rate counts
        assert by[h]["ports"] == "mlx5_0:1 200 Gb/s" and by[h]["line_rate_GBps"] == 25.0
    failing = {h for h, row in by.items() if not row["passed"]}
    assert failing == socket | hung | {slow}
    for h in set(hosts) - failing - down:
        row = by[h]
        assert row["ports"] == "mlx5_0:1 400 Gb/s" and row["line_rate_GBps"] == 50.0, row
        assert row["transport"].startswith("NCCL used network IB"), row
    assert not doc["passed"] and doc["exit_code"] == 2


def test_the_fleet_page_leads_with_the_summary_and_the_failures(fleet) -> None:
    _, facts, doc, page = fleet
    failing = [h["host"] for h in doc["hosts"] if not h["passed"]]
    summary = re.search(r'<p class="summary"><strong>(.*?)</strong></p>', page)
    assert summary and summary.group(1).startswith(f"{len(failing)} of {N} hosts failed")
    hosts_at = page.index("<h2>Hosts</h2>")
    assert summary.start() < hosts_at
    closed = page.index(f"<details><summary>passing hosts ({N - len(failing)})</summary>")
    for h in failing:  # each failing host is in the open table, before the collapsed rest
        assert hosts_at < page.index(f"<td>{h}</td>") < closed
    assert page.count("<tr>") < 2 * N + len(doc["pairwise"]["pairs"]) + 100
    slow_pair = page.index(f"{facts['slow']}</td>", page.index("<h2>Pairwise rounds"))
    assert slow_pair < page.index("<details><summary>good pairs (")
    # the plot draws at most PLOT_PAIRS pair curves, the slow pairs among them
    series = set(re.findall(r'data-series="([^"]+)"', page))
    assert len(series) <= PLOT_PAIRS + 1 and "fabric" in series
    assert any(facts["slow"] in s for s in series)



def test_the_fleet_table_names_the_failures_and_counts_the_rest(fleet, capsys) -> None:
    results, facts, doc, _ = fleet
    rc = main(["validate", "--judge", str(results)])
    text = capsys.readouterr().out
    assert rc == doc["exit_code"] == 2
    failing = [h["host"] for h in doc["hosts"] if not h["passed"]]
    rows = [ln.split()[0] for ln in text.splitlines() if ln.startswith("gpu")]
    assert rows == failing  # one row per failing host, in rank order, no passing host
    assert f"{N - len(failing)} more hosts passed, no warnings" in text
    pairs = doc["pairwise"]["pairs"]
    slow = [p for p in pairs if p["slow"] or p["error"]]
    assert f"{len(pairs) - len(slow)} more pairs ok" in text
    assert sum(facts["slow"] in ln and ln.rstrip().endswith("slow")
               for ln in text.splitlines()) == len(slow)
    assert len(text.splitlines()) < 40 and text.rstrip().endswith("verdict: FAIL")
