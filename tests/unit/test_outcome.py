"""What bootstrap and reconfigure print after a run, on the events of real lab runs.

tests/fixtures/engine/events-lab-*.json: the events of two `rdmaprov bootstrap --no-validate
--keep-artifacts` runs on a 3-node lab (`lab up --nodes 3`), a first one and the no-change re-run
after it: each kept job_events file's host results and stats, with the result keys the output
reads (msg, changed, the reports, the loop labels)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from rdmaprov.drift import DriftCollector, DriftRow
from rdmaprov.engine import Failure, HostResult, RunResult
from rdmaprov.outcome import (
    blocks,
    change_lines,
    heading,
    in_line_line,
    print_changes,
    print_host_reports,
    wants_table,
)
from rdmaprov.progress import ProgressState

FIXTURES = Path(__file__).parent.parent / "fixtures" / "engine"


def replay(name: str) -> tuple[RunResult, dict, list[DriftRow]]:
    """The result, the reports and the change rows the CLI folds from a recorded run's events."""
    state, collector = ProgressState(), DriftCollector()
    hosts: dict[str, HostResult] = {}
    for ev in json.loads((FIXTURES / name).read_text()):
        state.apply(ev)
        collector(ev)
        if ev["event"] == "playbook_on_stats":
            stats = ev["event_data"]
            for host in stats["ok"]:
                hosts[host] = HostResult(host, ok=stats["ok"][host],
                                         changed=stats["changed"].get(host, 0))
    return RunResult(0, "successful", hosts, None), state.reports, collector.rows


def printed(name: str, *, verbose: int = 0, quiet: bool = False, check: bool = False,
            diff: bool = False) -> list[str]:
    result, reports, rows = replay(name)
    out = io.StringIO()
    print_host_reports(result, reports, out, verbose=verbose, quiet=quiet)
    print_changes(result, reports, rows, out, check=check, diff=diff, verbose=verbose)
    return out.getvalue().splitlines()


def test_a_no_change_rerun_prints_one_line() -> None:
    assert printed("events-lab-no-change.json") == [
        "in line: node[1-3]: nothing changed (20 report lines each; -v shows them)"]
    assert printed("events-lab-no-change.json", quiet=True) == printed("events-lab-no-change.json")
    assert printed("events-lab-no-change.json", check=True) == [
        "in line: node[1-3]: nothing to change (20 report lines each; -v shows them)"]


def test_verbose_prints_each_hosts_full_report() -> None:
    _, reports, _ = replay("events-lab-no-change.json")
    lines = printed("events-lab-no-change.json", verbose=1)
    assert [line for line in lines if not line.startswith(" ")] == [
        "node1:", "node2:", "node3:", "in line: node[1-3]: nothing changed"]
    for host in ("node1", "node2", "node3"):
        report = lines[lines.index(f"{host}:") + 1:][:sum(1 + len(ls) for _, ls in reports[host])]
        assert report == [x for task, ls in reports[host]
                          for x in (f"  {task}", *(f"    {line}" for line in ls))]
    assert sum("not applicable: no /proc/modules" in line for line in lines) == 3 * 6


def test_a_first_run_prints_each_report_line_once_under_the_hosts_that_said_it() -> None:
    _, reports, _ = replay("events-lab-first-run.json")
    lines = printed("events-lab-first-run.json")
    heads = [line for line in lines if not line.startswith(" ")]
    # What every node said, once; then what each said alone (its addresses, its peers).
    assert heads[:4] == ["node[1-3]:", "node1:", "node2:", "node3:"]
    assert heads[4] == "changed:" and "in line" not in lines[-1]
    said = lines[:lines.index("changed:")]
    for host in ("node1", "node2", "node3"):
        mine = said[said.index(f"{host}:"):]
        mine = mine[:next((i for i, x in enumerate(mine[1:], 1) if not x.startswith(" ")),
                          len(mine))]
        assert f"    connection: eth0 10.199.248.1{host[-1]} (from SSH_CONNECTION)" in mine, mine
        assert not any("GPUs" in x for x in mine), mine  # said by every node: under node[1-3]
    assert sum("ib_core: not applicable" in line for line in said) == 1
    # Nothing lost, nothing added: each host's lines are its blocks' lines.
    for host, items in reports.items():
        own = [(task, line) for task, ls in items for line in ls]
        got = [(task, line) for owned, entries in blocks(reports, list(reports))
               if host in owned for task, ls in entries for line in ls]
        assert sorted(got) == sorted(own)
    assert len(said) < sum(1 + sum(1 + len(ls) for _, ls in r) for r in reports.values()) / 2


def test_changes_are_listed_per_host_from_the_runs_own_results() -> None:
    lines = printed("events-lab-first-run.json")
    changed = lines[lines.index("changed:") + 1:]
    assert "  node[1-3]: net_mtu : Set the runtime MTU [eth1]: 1500 -> 9000" in changed
    assert "  node[1-3]: nccl_env : Write /etc/nccl.conf" in changed  # no before/after said
    assert "  node[1-3]: firewall : Persist the confirmed ruleset, install and enable the unit " \
        "that loads it at boot: enabled=disabled -> enabled=enabled" in changed
    assert all(line.startswith("  node[1-3]: ") for line in changed), changed
    assert not any("would change" in line or "differs" in line for line in changed)
    # --diff prints its table instead (progress.print_drift); -q keeps the changes.
    assert not any(line.startswith("changed") for line in printed("events-lab-first-run.json",
                                                                   diff=True))
    assert printed("events-lab-first-run.json", quiet=True) == lines[lines.index("changed:"):]


def test_one_host_changed_and_one_failed() -> None:
    result, reports, rows = replay("events-lab-no-change.json")
    result.hosts["node2"].changed = 1
    result.hosts["node3"].failed = 1
    result.hosts["node3"].failure = Failure("net_mtu : Set the runtime MTU", "RTNETLINK")
    rows = [DriftRow("node2", "net_mtu : Set the runtime MTU [eth1]", "1500", "9000")]
    out = io.StringIO()
    print_host_reports(result, reports, out)
    print_changes(result, reports, rows, out, check=False, diff=False)
    lines = out.getvalue().splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    assert heads == ["node[2-3]:", "node2:", "node3:", "changed:",
                     "in line: node1: nothing changed (20 report lines each; -v shows them)"]
    assert lines[lines.index("changed:") + 1] == \
        "  node2: net_mtu : Set the runtime MTU [eth1]: 1500 -> 9000"


def test_the_summary_table_prints_unless_every_host_is_in_line() -> None:
    first, _, _ = replay("events-lab-first-run.json")
    again, _, _ = replay("events-lab-no-change.json")
    assert wants_table(first, verbose=0, quiet=False)
    assert not wants_table(again, verbose=0, quiet=False)
    assert wants_table(again, verbose=1, quiet=False)
    assert not wants_table(first, verbose=0, quiet=True)
    again.hosts["node2"].unreachable = 1
    assert wants_table(again, verbose=0, quiet=False)


def test_in_line_counts_differing_reports() -> None:
    hosts = {h: HostResult(h, ok=5) for h in ("a1", "a2")}
    reports = {"a1": [("t", ["x", "y"])], "a2": [("t", ["x"])]}
    assert in_line_line(RunResult(0, "successful", hosts, None), reports, check=False,
                        verbose=0) == "in line: a[1-2]: nothing changed (1 to 2 report lines " \
                                      "a host; -v shows them)"
    assert in_line_line(RunResult(0, "successful", hosts, None), {}, check=False, verbose=0) \
        == "in line: a[1-2]: nothing changed"
    hosts["a1"].unreachable = 1
    hosts["a2"].changed = 2
    assert in_line_line(RunResult(2, "failed", hosts, None), reports, check=False,
                        verbose=0) is None


def test_a_line_said_twice_stays_twice_and_hostile_text_stays_literal() -> None:
    reports = {"n1": [("t", ["same", "same", "[red]x\x1b[2J"])], "n2": [("t", ["same"])]}
    assert blocks(reports, ["n1", "n2"]) == [
        (["n1", "n2"], [("t", ["same"])]), (["n1"], [("t", ["same", "[red]x\x1b[2J"])])]
    out = io.StringIO()
    result = RunResult(0, "successful", {h: HostResult(h, changed=1) for h in reports}, None)
    print_host_reports(result, reports, out)
    assert "[red]x" in out.getvalue() and "\x1b" not in out.getvalue()


def test_a_fleets_heading_is_folded_and_bounded() -> None:
    hosts = [f"gpu{n:04d}" for n in range(1, 1001)]
    assert heading(hosts) == "gpu[0001-1000]"
    odd = hosts[::2]
    assert heading(odd).endswith(",... (500 hosts)") and len(heading(odd)) < 230
    assert change_lines([DriftRow(h, "t", "1", "2") for h in hosts]) == [
        "gpu[0001-1000]: t: 1 -> 2"]


@pytest.mark.parametrize("name", ["events-lab-first-run.json", "events-lab-no-change.json"])
def test_the_fixtures_are_what_they_say(name: str) -> None:
    result, reports, rows = replay(name)
    assert sorted(result.hosts) == ["node1", "node2", "node3"] == sorted(reports)
    assert bool(rows) == ("first" in name) == all(h.changed for h in result.hosts.values())
