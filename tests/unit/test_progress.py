"""Progress folding, plain-line output, summary and the --json document."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rdmaprov.engine import Failure, HostResult, RunResult
from rdmaprov.progress import Progress, ProgressState, print_drift, print_summary, result_document


def ev(kind: str, host: str | None = None, task: str = "Gather RDMA facts",
       role: str | None = "rdmaprov.cluster.preflight", **res: object) -> dict:
    data: dict = {"task": task, "role": role, "play": "site"}
    if host:
        data["host"] = host
        data["res"] = res
    return {"event": kind, "event_data": data}


def test_state_folds_events() -> None:
    s = ProgressState()
    s.apply({"event": "playbook_on_play_start", "event_data": {"play": "site"}})
    s.apply(ev("playbook_on_task_start"))
    assert s.apply(ev("runner_on_start", "node1")) is None
    assert s.apply(ev("runner_on_ok", "node1", changed=True)) == \
        ("node1", "changed", "preflight : Gather RDMA facts")
    assert s.apply(ev("runner_on_ok", "node2")) == ("node2", "ok", "preflight : Gather RDMA facts")
    s.apply(ev("runner_on_unreachable", "node3"))
    assert s.play == "site" and s.task == "preflight : Gather RDMA facts"
    assert s.hosts["node3"].status == "unreachable"
    assert s.totals()["changed"] == 1 and s.totals()["ok"] == 1


def test_plain_lines_without_a_terminal() -> None:
    """-v: one line per host result; without it, one line per task once the next one starts."""
    out = io.StringIO()
    with Progress(out, hosts=["node1", "node10"], verbose=1) as p:
        p(ev("runner_on_start", "node1"))
        p(ev("runner_on_ok", "node1"))
        p(ev("runner_on_failed", "node10", task="Load modules", role=None))
    assert out.getvalue().splitlines() == [
        "node1   ok           preflight : Gather RDMA facts",
        "node10  failed       Load modules",
    ]
    out = io.StringIO()
    with Progress(out, hosts=["node1", "node10"]) as p:
        p(ev("playbook_on_task_start"))
        p(ev("runner_on_start", "node1"))
        p(ev("runner_on_ok", "node1"))
        p(ev("runner_on_ok", "node10", changed=True))
        assert out.getvalue() == ""
        p(ev("playbook_on_task_start", task="Load modules", role=None))
        assert out.getvalue() == "preflight : Gather RDMA facts  ok=1  changed=1\n"
        p(ev("runner_on_failed", "node10", task="Load modules", role=None))
    assert out.getvalue().splitlines()[1:] == ["Load modules  failed=1  failed: node10"]


def test_live_view_renders_hosts() -> None:
    out = io.StringIO()
    p = Progress(out, live=True, hosts=["node1"])
    p(ev("runner_on_ok", "node1"))
    text = io.StringIO()
    from rich.console import Console

    Console(file=text, width=120).print(p._render())
    assert "node1" in text.getvalue() and "preflight : Gather RDMA facts" in text.getvalue()


def result() -> RunResult:
    return RunResult(rc=2, status="failed", artifacts_dir=Path("/tmp/a"), hosts={
        "node1": HostResult("node1", ok=5, changed=1),
        "node2": HostResult("node2", ok=2, failed=1,
                            failure=Failure("net_mtu : Set MTU", "ip: RTNETLINK answers")),
        "node3": HostResult("node3", unreachable=1,
                            failure=Failure("preflight : Probe", "refused", unreachable=True)),
    })


def test_summary_names_failures() -> None:
    out = io.StringIO()
    print_summary(result(), out)
    text = out.getvalue()
    assert "node2: failed at 'net_mtu : Set MTU': ip: RTNETLINK answers" in text
    assert "node3: unreachable at 'preflight : Probe': refused" in text
    assert "node1: " not in text
    assert "artifacts: /tmp/a" in text


def test_json_document() -> None:
    doc = json.loads(json.dumps(result_document(result(), 2)))
    assert doc["rc"] == 2 and doc["ansible_rc"] == 2
    assert doc["counts"]["ok"] == 7 and doc["counts"]["unreachable"] == 1
    assert doc["hosts"]["node1"]["changed"] == 1
    assert [f["host"] for f in doc["failures"]] == ["node2", "node3"]
    assert doc["failures"][0]["task"] == "net_mtu : Set MTU"


def test_role_reports_are_collected_per_host_and_printed():
    from rdmaprov.outcome import print_reports
    from rdmaprov.progress import ProgressState, report_lines

    def ev(action, msg, host="node1", kind="runner_on_ok"):
        return {"event": kind, "event_data": {"host": host, "task": "Report what this host has",
                                              "role": "preflight", "task_action": action,
                                              "res": {"msg": msg, "changed": False}}}

    state = ProgressState()
    state.apply(ev("ansible.builtin.debug", ["GPUs: none visible", "RDMA: none"]))
    state.apply(ev("ansible.builtin.command", "not a report"))
    state.apply(ev("ansible.builtin.debug", "one\ntwo", host="node2"))
    state.apply(ev("ansible.builtin.debug", "skipped", kind="runner_on_skipped"))
    assert report_lines(ev("ansible.builtin.command", "x")) is None
    looped = ev("ansible.builtin.debug", None)
    looped["event_data"]["res"] = {"results": [{"msg": "eth1: not capable"}, {"skipped": True},
                                               {"msg": ["a", "b"]}]}
    assert report_lines(looped) == ["eth1: not capable", "a", "b"]
    # An assert that passed reports its own success_msg, never Ansible's default words.
    assert report_lines(ev("ansible.builtin.assert", ["backend nftables"])) == ["backend nftables"]
    assert report_lines(ev("ansible.builtin.assert", "All assertions passed")) is None
    assert report_lines(ev("ansible.builtin.assert", "x", kind="runner_on_failed")) is None
    # The same lines again from the same host (a role reading its host again after acting): once.
    state.apply(ev("ansible.builtin.debug", ["GPUs: none visible", "RDMA: none"]))
    assert len(state.reports["node1"]) == 1
    # A module of the collection that reports on its own.
    own = ev("rdmaprov.cluster.kernel_modules", None)
    own["event_data"]["res"]["rdmaprov_report"] = ["ib_core: loaded"]
    assert report_lines(own) == ["ib_core: loaded"]
    assert [lines for _, lines in state.reports["node1"]] == [["GPUs: none visible", "RDMA: none"]]
    assert state.reports["node2"][0][1] == ["one", "two"]
    out = io.StringIO()
    print_reports(state.reports, ["node1", "node2"], out, verbose=1)
    text = out.getvalue()
    assert text.index("node1:") < text.index("GPUs: none visible") < text.index("node2:")


def test_drift_table_prints_bracketed_loop_labels_as_text() -> None:
    from rdmaprov.drift import DriftRow

    out = io.StringIO()
    rows = [DriftRow("node1", "container_runtime : Directories [/etc/systemd/system.conf.d]",
                     "state=absent", "state=directory")]
    print_drift(rows, out, check=True)
    text = out.getvalue()
    assert "Drift (current -> wanted)" in text
    assert "[/etc/systemd/system.conf.d]" in text


def test_a_start_without_a_result_is_not_counted_running_forever() -> None:
    s = ProgressState()
    s.apply(ev("runner_on_start", "node1"))
    s.apply(ev("runner_on_start", "node1", task="Load modules"))
    s.apply(ev("runner_on_ok", "node1", task="Load modules"))
    assert [t.counts["running"] for t in s.tasks.values()] == [0, 0]
