"""The progress of a fleet: 1,000 hosts' runner events (the shapes ansible-runner's display
callback emits) shown on a fixed-size terminal and on a plain stream, read as a user reads them."""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Iterator
from typing import Any

from rich.console import Console

from rdmaprov.engine import Failure, HostResult, RunResult
from rdmaprov.outcome import print_reports
from rdmaprov.progress import Progress, print_summary

HOSTS = [f"node{i:04d}" for i in range(1, 999)] + ["[red]evil", "\x1b]0;pwned\x07node-esc"]
UNREACHABLE = "node0017"
MTU_FAILED = "node0230"
SLOW = "node0555"
# Task 3 fails on 30 hosts (both odd names among them) and is still running on 10 others.
T3_FAILED = [f"node{i:04d}" for i in range(600, 628)] + HOSTS[-2:]
T3_RUNNING = [f"node{i:04d}" for i in range(900, 910)]
TASKS = [("rdmaprov.cluster.preflight", "Gather RDMA facts", "rdmaprov.cluster.rdma_facts"),
         ("rdmaprov.cluster.net_mtu", "Set MTU", "rdmaprov.cluster.netcfg_mtu"),
         ("rdmaprov.cluster.rdma_ofed", "Install [bold]packages[/bold]", "ansible.builtin.apt")]


class Stream:
    """ansible-runner job events: the top-level keys and the event_data of awx_display."""

    def __init__(self) -> None:
        self.counter = 0
        self.play_uuid = str(uuid.uuid4())

    def event(self, kind: str, **data: Any) -> dict[str, Any]:
        self.counter += 1
        base = {"playbook": "site.yml", "playbook_uuid": "pb", "play": "site",
                "play_uuid": self.play_uuid, "play_pattern": "all"}
        return {"uuid": str(uuid.uuid4()), "counter": self.counter, "stdout": "",
                "start_line": 0, "end_line": 0, "runner_ident": "r", "pid": 1,
                "created": "2026-12-04T17:00:00.000000+00:00", "parent_uuid": "",
                "event": kind, "event_data": {**base, **data}}


def host_result(s: Stream, kind: str, host: str, task: dict[str, Any], res: dict[str, Any],
                seconds: float) -> dict[str, Any]:
    return s.event(kind, host=host, remote_addr=host, res=res, start="t0", end="t1",
                   duration=seconds, event_loop=None, **task)


def fleet_events() -> Iterator[dict[str, Any]]:
    s = Stream()
    yield s.event("playbook_on_start")
    yield s.event("playbook_on_play_start", name="site", pattern="all", uuid=s.play_uuid)
    alive = list(HOSTS)
    for n, (role, name, action) in enumerate(TASKS):
        task = {"task": name, "role": role, "task_action": action, "task_args": "",
                "task_path": f"/roles/{role}/tasks/main.yml:{n}", "task_uuid": str(uuid.uuid4())}
        yield s.event("playbook_on_task_start", name=name, is_conditional=False, **task)
        for host in alive:
            yield s.event("runner_on_start", host=host, **task)
        for i, host in enumerate(alive):
            seconds = 95.0 if host == SLOW else 1.0 + (i % 10) / 10
            if n == 0 and host == UNREACHABLE:
                yield host_result(s, "runner_on_unreachable", host, task, {
                    "unreachable": True, "changed": False,
                    "msg": "Failed to connect to the host via ssh: ssh: connect to host "
                           "node0017 port 22: Connection refused"}, seconds)
            elif n == 1 and host == MTU_FAILED:
                yield host_result(s, "runner_on_failed", host, task, {
                    "changed": False, "rc": 2, "msg": "non-zero return code",
                    "stderr": "RTNETLINK answers: Operation not permitted"}, seconds)
            elif n == 2 and host in T3_FAILED:
                yield host_result(s, "runner_on_failed", host, task, {
                    "changed": False, "msg": "No package matching 'rdma-core' is available"},
                    seconds)
            elif n == 2 and host in T3_RUNNING:
                continue
            else:
                yield host_result(s, "runner_on_ok", host, task,
                                  {"changed": n == 1 and i % 100 == 0}, seconds)
        gone = {0: UNREACHABLE, 1: MTU_FAILED}.get(n)  # a host that failed runs no more tasks
        alive = [h for h in alive if h != gone]


def feed(p: Progress) -> None:
    for event in fleet_events():
        p(event)


def row(text: str, needle: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(needle))
    return re.findall(r"(?<!\w)\d+(?!\w)", line.split(needle, 1)[1])


def test_a_terminal_shows_counts_failing_and_slowest_hosts_not_a_row_per_host() -> None:
    now = [1000.0]
    screen = Console(file=io.StringIO(), width=140, height=40, record=True)
    p = Progress(io.StringIO(), live=True, hosts=HOSTS, console=screen, clock=lambda: now[0])
    feed(p)
    screen.print(p.renderable())
    slowest = screen.export_text().split("slowest hosts")[1].splitlines()
    assert slowest[2].split()[:3] == [SLOW, "95.0", "ok"]
    now[0] += 120.0  # the 10 hosts still on task 3 have run it for two minutes
    screen.print(p.renderable())
    seen = screen.export_text()

    assert len(seen.splitlines()) < 40
    assert len(re.findall(r"node\d{4}", seen)) < 40  # not one row per host
    assert "1000 hosts: 10 running, 0 waiting, 32 failing" in seen
    # Per-task counts: ok, changed, failed, unreachable, skipped, ignored, running.
    assert row(seen, "preflight : Gather RDMA facts") == ["999", "1"]
    assert row(seen, "net_mtu : Set MTU") == ["988", "10", "1"]
    assert row(seen, "rdma_ofed : Install [bold]packages[/bold]") == ["958", "30", "10"]
    failing = seen[seen.index("failing hosts (32)"):seen.index("slowest hosts")]
    assert UNREACHABLE in failing and "ssh to node0017:22: Connection refused" in failing
    assert MTU_FAILED in failing and "RTNETLINK answers: Operation not permitted" in failing
    assert "more failing hosts" in failing
    slowest = seen[seen.index("slowest hosts"):].splitlines()
    assert [line.split()[0] for line in slowest[2:7]] == T3_RUNNING[:5]
    assert "120.0" in slowest[2] and "running" in slowest[2]


def test_a_hosts_odd_name_shows_literally_and_never_reaches_the_terminal_raw() -> None:
    raw = io.StringIO()
    screen = Console(file=raw, width=160, height=80, record=True, force_terminal=True)
    p = Progress(io.StringIO(), live=True, hosts=HOSTS, console=screen)
    for event in fleet_events():
        # Only the odd hosts fail on task 3, so that the failing panel shows them.
        data = event["event_data"]
        if event["event"] == "runner_on_failed" and data["host"] in T3_FAILED[:-2]:
            continue
        p(event)
    screen.print(p.renderable())
    seen = screen.export_text()
    assert "[red]evil" in seen and "node-esc" in seen
    assert "Install [bold]packages[/bold]" in seen
    assert "\x1b]" not in raw.getvalue() and "pwned" not in raw.getvalue()


def test_a_live_fleet_view_runs_end_to_end() -> None:
    raw = io.StringIO()
    # The terminal's kind is pinned: the test must not depend on the caller's TERM.
    screen = Console(file=raw, width=140, height=40, force_terminal=True,
                     _environ={"TERM": "xterm-256color"})
    with Progress(io.StringIO(), hosts=HOSTS, console=screen) as p:
        assert p.live_mode
        feed(p)
    out = raw.getvalue()
    assert "failing hosts (32)" in out and "\x1b]0;" not in out


def test_a_dumb_terminal_gets_the_plain_lines_not_an_empty_screen() -> None:
    # TERM=dumb (an editor's pane, some CI consoles): rich's Live draws nothing there, so a
    # user would see no progress at all; the plain one-line-per-task stream is what works.
    raw = io.StringIO()
    screen = Console(file=raw, width=140, height=40, force_terminal=True,
                     _environ={"TERM": "dumb"})
    with Progress(raw, hosts=HOSTS, console=screen) as p:
        assert not p.live_mode
        feed(p)
    lines = raw.getvalue().splitlines()
    assert lines[0] == "preflight : Gather RDMA facts  ok=999  unreachable=1  unreachable: node0017"
    assert lines[1].startswith("net_mtu : Set MTU  ok=988  changed=10  failed=1")
    assert lines[2].startswith("rdma_ofed : Install [bold]packages[/bold]  ok=958  failed=30")


def test_a_few_hosts_on_a_terminal_still_get_a_row_each() -> None:
    screen = Console(file=io.StringIO(), width=140, height=40, record=True)
    p = Progress(io.StringIO(), live=True, hosts=HOSTS[:10], console=screen)
    for event in fleet_events():
        if event["event_data"].get("host", HOSTS[0]) in HOSTS[:10]:
            p(event)
    screen.print(p.renderable())
    seen = screen.export_text()
    assert all(h in seen for h in HOSTS[:10]) and "failing hosts" not in seen


def test_a_plain_stream_gets_one_line_per_task() -> None:
    out = io.StringIO()
    with Progress(out, hosts=HOSTS) as p:
        assert not p.live_mode
        feed(p)
    lines = out.getvalue().splitlines()
    assert lines == [
        "preflight : Gather RDMA facts  ok=999  unreachable=1  unreachable: node0017",
        "net_mtu : Set MTU  ok=988  changed=10  failed=1  failed: node0230",
        "rdma_ofed : Install [bold]packages[/bold]  ok=958  failed=30  running=10  failed: "
        + ", ".join(T3_FAILED[:20]) + " (+10 more)",
    ]


def test_a_plain_stream_with_verbose_gets_one_line_per_host_and_task() -> None:
    out = io.StringIO()
    with Progress(out, hosts=HOSTS, verbose=1) as p:
        feed(p)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1000 + 999 + 988
    assert "[red]evil" in out.getvalue() and "\x1b" not in out.getvalue()
    assert next(line.split() for line in lines if line.startswith(UNREACHABLE))[:2] == \
        [UNREACHABLE, "unreachable"]


def test_a_fleet_summary_has_a_row_per_kind_of_host_and_names_the_failing() -> None:
    hosts = {h: HostResult(h, ok=20, changed=1 if i < 5 else 0) for i, h in enumerate(HOSTS)}
    hosts[MTU_FAILED] = HostResult(MTU_FAILED, ok=3, failed=1,
                                   failure=Failure("net_mtu : Set MTU", "RTNETLINK answers"))
    hosts["[red]evil"] = HostResult("[red]evil", unreachable=1, failure=Failure(
        "preflight : Gather RDMA facts", "refused", unreachable=True))
    out = io.StringIO()
    print_summary(RunResult(rc=2, status="failed", artifacts_dir=None, hosts=hosts), out)
    text = out.getvalue()
    assert len(text.splitlines()) < 20
    assert re.search(r"993 in line\s+│\s+19860 ", text) and "5 changed" in text
    assert "node0230: failed at 'net_mtu : Set MTU': RTNETLINK answers" in text
    assert "[red]evil: unreachable at 'preflight : Gather RDMA facts': refused" in text
    out = io.StringIO()
    print_summary(RunResult(rc=2, status="failed", artifacts_dir=None, hosts=hosts), out, verbose=1)
    assert len(out.getvalue().splitlines()) > 1000


def test_a_fleets_role_reports_are_grouped_by_what_they_say() -> None:
    """Each line once, under the hosts that said it, their names folded: the odd ones out say
    what differs under their own names."""
    same = [("preflight : Check the host and report what it has", ["GPUs: 8", "RDMA: mlx5_0"])]
    reports = {h: same for h in HOSTS}
    reports[SLOW] = [(same[0][0], ["GPUs: 7", "RDMA: mlx5_0"])]
    reports["[red]evil"] = [(same[0][0], ["GPUs: 8", "RDMA: none"])]
    out = io.StringIO()
    print_reports(reports, HOSTS, out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 * 3
    heads = [line for line in lines if not line.startswith(" ")]
    assert heads == ["node-esc,[red]evil,node[0001-0554,0556-0998]:", "node-esc,node[0001-0998]:",
                     f"{SLOW}:", "[red]evil:"]
    assert [lines[lines.index(h) + 2] for h in heads] == [
        "    GPUs: 8", "    RDMA: mlx5_0", "    GPUs: 7", "    RDMA: none"]
    assert "\x1b" not in out.getvalue()
    out = io.StringIO()
    print_reports(reports, HOSTS, out, verbose=1)
    assert len(out.getvalue().splitlines()) == 1000 * 4
