"""Live progress from runner events, and the final per-host summary.

With a terminal: a rich Live view. While every host fits on the screen, one row per host (last
status, counts); past that, a fleet view: per-task counts (ok, changed, failed, unreachable,
running), the failing hosts and the slowest ones, never one row per host. Without a terminal
(CI, pipes): one line per task once it is done, with its counts and failing hosts, e.g.
``preflight : Gather RDMA facts  ok=998  failed=2  failed: node17, node230``; with -v, one line
per host result instead, e.g. ``node1  ok       preflight : Gather RDMA facts``.
Host, task and message text from a run reaches the terminal only through textsafe.safe_text and
rich Text (never markup). Everything here reads runner events and RunResult objects; nothing
parses Ansible's stdout.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rdmaprov.console import table_console
from rdmaprov.drift import DriftRow
from rdmaprov.engine import RunResult, failure_message, task_label
from rdmaprov.textsafe import safe_text

STATUS_STYLE = {
    "ok": "green", "changed": "yellow", "failed": "bold red", "unreachable": "bold red",
    "skipped": "cyan", "running": "dim", "rescued": "magenta", "ignored": "dim red",
}
COUNT_KEYS = ("ok", "changed", "failed", "unreachable", "skipped", "rescued")
TASK_KEYS = ("ok", "changed", "failed", "unreachable", "skipped", "ignored", "running")
FAILING = ("failed", "unreachable")
TASK_STARTS = ("playbook_on_task_start", "playbook_on_handler_task_start")
# A line or panel names this many hosts, then says how many more: a fleet's failures are all
# named in the summary (and --json), not in the progress.
NAMES_SHOWN = 20
SLOWEST_SHOWN = 5
# Past this many hosts the summary table has one row per kind of host, not one per host (-v: per
# host again); the failing hosts are still named one a line.
SUMMARY_HOST_ROWS = 50
# The per-host view's status column: wide enough for the longest status word; the counts'
# headers on a terminal too narrow for the whole words.
STATUS_WIDTH = max(len(w) for w in [*STATUS_STYLE, "waiting"])
COUNT_SHORT = {"changed": "chg", "failed": "fail", "unreachable": "unr", "skipped": "skip",
               "rescued": "resc"}
# Lines the per-host view needs besides its host rows (play/task line, header, totals, Live's).
HOST_VIEW_EXTRA = 4


def text(value: object, style: str = "") -> Text:
    """Text from a run (host, task, message) for rich: escapes dropped, brackets literal."""
    return Text(safe_text(str(value)), style=style)


def name_list(names: list[str], shown: int = NAMES_SHOWN) -> str:
    """'a, b, c' or 'a, b, … (+N more)': at most ``shown`` names."""
    head = ", ".join(safe_text(n) for n in names[:shown])
    return head if len(names) <= shown else f"{head} (+{len(names) - shown} more)"


def event_status(event: Mapping[str, Any]) -> str | None:
    """The per-host status a runner event reports, or None for events about no host."""
    kind = event.get("event", "")
    data = event.get("event_data") or {}
    res = data.get("res") or {}
    if kind == "runner_on_start":
        return "running"
    if kind == "runner_on_ok":
        return "changed" if res.get("changed") else "ok"
    if kind == "runner_on_failed":
        return "ignored" if data.get("ignore_errors") else "failed"
    if kind == "runner_on_unreachable":
        return "unreachable"
    if kind == "runner_on_skipped":
        return "skipped"
    return None


def task_key(data: Mapping[str, Any]) -> str:
    """Which task an event belongs to. ansible-runner marks a task start it has seen before (free
    strategy, serial) with a ``_N`` suffix; the hosts' results carry the task's own uuid."""
    uuid = str(data.get("task_uuid") or "")
    return uuid.split("_")[0] if uuid else task_label(data)


@dataclass
class HostLine:
    status: str = "waiting"
    task: str = ""
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))


@dataclass
class TaskLine:
    """One task's results over all hosts."""

    label: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TASK_KEYS, 0))
    failing: dict[str, str] = field(default_factory=dict)  # host -> failed|unreachable, in order

    def line(self) -> Text:
        """``label  ok=N  changed=N ...  failed: hosts  unreachable: hosts`` (nonzero counts)."""
        out = text(self.label, "bold")
        counts = [f"{k}={v}" for k, v in self.counts.items() if v]
        out.append("  " + ("  ".join(counts) if counts else "no host results"))
        for status in FAILING:
            names = [h for h, s in self.failing.items() if s == status]
            if names:
                out.append(f"  {status}: ")
                out.append(name_list(names), style=STATUS_STYLE[status])
        return out


REPORT_ACTIONS = ("debug", "ansible.builtin.debug", "ansible.legacy.debug")
# A check that passed reports too when it says more than Ansible's default words: a role's
# "refuse what cannot be done" assert carries what the host has as its success_msg, one task
# for both.
ASSERT_ACTIONS = ("assert", "ansible.builtin.assert", "ansible.legacy.assert")
ASSERT_DEFAULT_MSG = "All assertions passed"
# A module of the collection that both acts and says what it found (kernel_modules: each
# module's status) returns its lines under this key; one task instead of a module and a debug.
MODULE_REPORT_KEY = "rdmaprov_report"
# A task that reads several roles at once returns each role's report as {"task", "lines"}.
MODULE_REPORTS_KEY = "rdmaprov_reports"


def report_lines(event: Mapping[str, Any]) -> list[str] | None:
    """The message of a role's report task (a debug task that ran, an assert that passed with
    a success_msg of its own, or a module's ``rdmaprov_report``), as lines."""
    data = event.get("event_data") or {}
    action = data.get("task_action")
    res = data.get("res") or {}
    if event.get("event") != "runner_on_ok":
        return None
    if isinstance(res.get(MODULE_REPORT_KEY), list):  # a module that reports on its own
        return [str(m) for m in res[MODULE_REPORT_KEY]] or None
    if action not in REPORT_ACTIONS + ASSERT_ACTIONS:
        return None
    if isinstance(res.get("results"), list):  # a looped task: one message per item
        msgs = [item.get("msg") for item in res["results"]
                if isinstance(item, dict) and not item.get("skipped")]
    else:
        msgs = [res.get("msg")]
    if action in ASSERT_ACTIONS:
        msgs = [m for m in msgs if m != ASSERT_DEFAULT_MSG]
    lines: list[str] = []
    for msg in msgs:
        if isinstance(msg, list):
            lines += [str(m) for m in msg]
        elif msg not in (None, ""):
            lines += str(msg).splitlines()
    return lines or None


def report_entries(event: Mapping[str, Any], label: str) -> list[tuple[str, list[str]]]:
    """The role reports an event carries, each as (task label, lines): report_lines' under the
    task's own ``label``, or, from a task that speaks for several roles (site.yml's site plan,
    for a host whose roles are all in line), each role's under its own label."""
    data = event.get("event_data") or {}
    res = data.get("res") or {}
    many = res.get(MODULE_REPORTS_KEY) if event.get("event") == "runner_on_ok" else None
    if isinstance(many, list):
        out = []
        for item in many:
            if isinstance(item, Mapping) and isinstance(item.get("lines"), list) and item["lines"]:
                out.append((str(item.get("task") or label), [str(x) for x in item["lines"]]))
        return out
    lines = report_lines(event)
    return [(label, lines)] if lines is not None else []


@dataclass
class ProgressState:
    """What the views show, folded from events (pure; unit-tested on its own). Every fold is
    O(1) (amortized) so that a fleet's events cost the same per host as a lab's."""

    play: str = ""
    task: str = ""
    hosts: dict[str, HostLine] = field(default_factory=dict)
    # What the roles report about each host (their debug tasks), in order: (task, lines).
    reports: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)
    tasks: dict[str, TaskLine] = field(default_factory=dict)
    # Hosts that failed or went unreachable, in that order: host -> (status, task, why).
    failures: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # Hosts with a task under way: host -> (task key, when it started by ``clock``).
    running: dict[str, tuple[str, float]] = field(default_factory=dict)
    # Each host's slowest finished result: host -> (seconds, task, status).
    slow: dict[str, tuple[float, str, str]] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic

    def task_line(self, data: Mapping[str, Any]) -> TaskLine:
        key = task_key(data)
        line = self.tasks.get(key)
        if line is None:
            line = self.tasks[key] = TaskLine(task_label(data))
        return line

    def apply(self, event: Mapping[str, Any]) -> tuple[str, str, str] | None:
        """Fold one event in; return (host, status, task) when it is a host's final result."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            self.play = str(data.get("play") or data.get("name") or "")
        elif kind in TASK_STARTS:
            self.task = task_label(data)
            self.task_line(data)
        status = event_status(event)
        host = data.get("host")
        if status is None or not host:
            return None
        host = str(host)
        line = self.hosts.setdefault(host, HostLine())
        line.status, line.task = status, task_label(data)
        for label, lines in report_entries(event, line.task):
            # A role that reads its host again after acting reports the same lines again: once.
            if lines not in [seen for _, seen in self.reports.get(host, [])]:
                self.reports.setdefault(host, []).append((label, lines))
        task = self.task_line(data)
        if status == "running":
            before = self.running.get(host)
            if before is not None and before[0] in self.tasks:  # a start that got no result
                self.tasks[before[0]].counts["running"] -= 1
            task.counts["running"] += 1
            self.running[host] = (task_key(data), self.clock())
            return None
        started = self.running.pop(host, None)
        if started is not None and started[0] in self.tasks:
            self.tasks[started[0]].counts["running"] -= 1
        if status in line.counts:
            line.counts[status] += 1
        task.counts[status] += 1
        if status in FAILING:
            task.failing[host] = status
            res = data.get("res")
            why = failure_message(res) if isinstance(res, Mapping) else ""
            self.failures[host] = (status, line.task, why)
        seconds = data.get("duration")
        if not isinstance(seconds, (int, float)) and started is not None:
            seconds = self.clock() - started[1]
        if isinstance(seconds, (int, float)) and status != "skipped" and \
                seconds > self.slow.get(host, (-1.0,))[0]:
            self.slow[host] = (float(seconds), line.task, status)
        return host, status, line.task

    def totals(self) -> dict[str, int]:
        out = dict.fromkeys(COUNT_KEYS, 0)
        for line in self.hosts.values():
            for k, v in line.counts.items():
                out[k] += v
        return out

    def slowest(self, k: int = SLOWEST_SHOWN) -> list[tuple[float, str, str, str]]:
        """The hosts that took longest, each once: those still running a task (by how long so far)
        and the slowest finished results, longest first: (seconds, host, task, running|status)."""
        now = self.clock()
        under_way = heapq.nlargest(k, ((now - t0, host, self.tasks[key].label, "running")
                                       for host, (key, t0) in self.running.items()
                                       if key in self.tasks), key=lambda r: r[0])
        done = heapq.nlargest(k, ((sec, host, task, status)
                                  for host, (sec, task, status) in self.slow.items()),
                              key=lambda r: r[0])
        out: list[tuple[float, str, str, str]] = []
        for item in sorted(under_way + done, key=lambda r: -r[0]):
            if item[1] not in {o[1] for o in out}:
                out.append(item)
        return out[:k]


class _HostTable:
    """The per-host view's table, sized for the width it is drawn at. Widths are set here: rich
    squeezes a column to nothing beside a long no_wrap one (a narrow terminal showed `runn…`, or
    no status at all). The status and the counts are whole; the host name, then the last task,
    give way (cut with "…"), and the counts' headers are abbreviated where the whole words leave
    too little room."""

    def __init__(self, state: ProgressState) -> None:
        self.state = state

    def __rich_console__(self, console: Console, options: Any) -> Any:
        hosts, width = self.state.hosts, options.max_width
        heads = list(COUNT_KEYS)
        for short in (False, True):
            if short:
                heads = [COUNT_SHORT.get(k, k) for k in COUNT_KEYS]
            counts = [max(len(head), *(len(str(h.counts[k])) for h in hosts.values()))
                      for head, k in zip(heads, COUNT_KEYS, strict=True)]
            fixed = STATUS_WIDTH + sum(counts) + 2 * (len(COUNT_KEYS) + 2)
            if width - fixed >= 40:
                break
        host_w = max(4, min(max((len(safe_text(h)) for h in hosts), default=4),
                            max(8, (width - fixed) // 2)))
        table = Table(box=None, pad_edge=False, show_edge=False)
        table.add_column("host", no_wrap=True, overflow="ellipsis", width=host_w)
        table.add_column("status", no_wrap=True, width=STATUS_WIDTH)
        for head, w in zip(heads, counts, strict=True):
            table.add_column(head, justify="right", no_wrap=True, width=w)
        table.add_column("last task", overflow="ellipsis", no_wrap=True,
                         max_width=max(4, width - fixed - host_w))
        for name, line in sorted(hosts.items()):
            table.add_row(text(name), Text(line.status, style=STATUS_STYLE.get(line.status, "")),
                          *(str(line.counts[k]) for k in COUNT_KEYS), text(line.task))
        yield table


class Progress:
    """Consumes runner events (``__call__``) and shows them; use as a context manager.

    ``verbose`` (-v) gives one plain line per host result where there is no terminal; without
    it, one line per task; ``quiet`` (-q), none (a terminal's live view still shows, and goes).
    ``console`` and ``clock`` are for tests (a fixed-size console)."""

    def __init__(self, stream: TextIO, *, live: bool | None = None,
                 hosts: list[str] | None = None, verbose: int = 0, quiet: bool = False,
                 console: Console | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console or Console(file=stream, highlight=False, soft_wrap=True)
        # A terminal that cannot move its cursor (TERM=dumb or unknown: an IDE's pane, some CI
        # consoles) gets the plain lines: rich's Live draws nothing there.
        self.live_mode = (self.console.is_terminal and not self.console.is_dumb_terminal
                          if live is None else live)
        self.verbose = verbose
        self.quiet = quiet
        self.state = ProgressState(clock=clock)
        for h in hosts or []:
            self.state.hosts[h] = HostLine()
        self._live: Live | None = None
        self._lock = threading.Lock()  # events come on the runner's thread, refreshes on Live's
        self._width = max((len(safe_text(h)) for h in hosts or []), default=8)
        self._pending: dict[str, None] = {}  # tasks with results not yet in a plain line

    def __enter__(self) -> Progress:
        if self.live_mode:
            # Live renders on its own clock (8 a second), not once per event: a fleet's events
            # cost one fold each, not one render each.
            self._live = Live(console=self.console, get_renderable=self.renderable,
                              refresh_per_second=8, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None
        elif not self.verbose and not self.quiet:
            self._print_tasks(lambda _key: True)

    def __call__(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            done = self.state.apply(event)
        if self.live_mode or self.quiet:
            return
        if self.verbose:
            if done is not None:
                host, status, task = done
                host = safe_text(host)
                self._width = max(self._width, len(host))
                self.console.print(Text(f"{host:<{self._width}}  {status:<11}  "
                                        f"{safe_text(task)}"))
            return
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if done is not None:
            self._pending[task_key(data)] = None
        elif kind in TASK_STARTS:
            # Linear: a task is done when the next one starts. Free: when no host runs it.
            current = task_key(data)
            self._print_tasks(lambda key: key != current
                              and self.state.tasks[key].counts["running"] <= 0)
        elif kind in ("playbook_on_play_start", "playbook_on_stats"):
            self._print_tasks(lambda _key: True)

    def _print_tasks(self, ready: Callable[[str], bool]) -> None:
        """The plain line of each task with new results that ``ready`` says is done, in order.
        A task that gets results after its line (free strategy) gets a line again."""
        for key in [k for k in self._pending if ready(k)]:
            del self._pending[key]
            self.console.print(self.state.tasks[key].line())

    def renderable(self) -> Group:
        with self._lock:
            return self._render()

    def _render(self) -> Group:
        height = self.console.size.height
        if len(self.state.hosts) + HOST_VIEW_EXTRA <= height:
            return self._render_hosts()
        return self._render_fleet(height)

    def _head(self) -> Text:
        head = text(f"PLAY {self.state.play}  ", "bold")
        head.append(safe_text(f"TASK {self.state.task}"), style="bold blue")
        return head

    def _render_hosts(self) -> Group:
        totals = self.state.totals()
        foot = Text("  ".join(f"{k}={v}" for k, v in totals.items()), style="dim")
        return Group(self._head(), _HostTable(self.state), foot)

    def _render_fleet(self, height: int) -> Group:
        """Per-task counts, the failing hosts, the slowest hosts: a fixed number of lines
        whatever the number of hosts."""
        s = self.state
        waiting = sum(1 for line in s.hosts.values() if line.status == "waiting")
        summary = Text(f"{len(s.hosts)} hosts: {len(s.running)} running, {waiting} waiting, "
                       f"{len(s.failures)} failing", style="dim")
        slow = s.slowest()
        budget = height - 1  # Live's cursor line
        fail_rows = min(len(s.failures), max(3, budget // 4))
        fixed = 2 + 1 + (2 + fail_rows + 1 if s.failures else 0) + (2 + len(slow) if slow else 0)
        task_rows = max(2, budget - fixed)

        tasks = Table(box=None, pad_edge=False, show_edge=False)
        tasks.add_column("task", overflow="ellipsis", no_wrap=True)
        for k in TASK_KEYS:
            tasks.add_column(k, justify="right", style=STATUS_STYLE.get(k, ""))
        keys = list(s.tasks)
        if len(keys) > task_rows:
            earlier = len(keys) - task_rows + 1
            tasks.add_row(Text(f"({earlier} earlier tasks)", style="dim"))
            keys = keys[earlier:]
        for key in keys:
            t = s.tasks[key]
            tasks.add_row(text(t.label), *(str(t.counts[k]) if t.counts[k] else ""
                                           for k in TASK_KEYS))
        parts: list[Any] = [self._head(), summary, tasks]

        if s.failures:
            failing = Table(title=f"failing hosts ({len(s.failures)})", title_justify="left",
                            box=None, pad_edge=False, show_edge=False)
            shown = list(s.failures.items())[:fail_rows]
            # The why column gives way, never the host's name.
            failing.add_column("host", no_wrap=True,
                               min_width=min(40, max(len(safe_text(h)) for h, _ in shown)))
            failing.add_column("status", no_wrap=True, min_width=11)
            failing.add_column("task", no_wrap=True, overflow="ellipsis", max_width=40)
            failing.add_column("why", overflow="ellipsis", no_wrap=True)
            for host, (status, task, why) in shown:
                failing.add_row(text(host), Text(status, style=STATUS_STYLE[status]),
                                text(task), text(why.splitlines()[0] if why else ""))
            parts.append(failing)
            if len(s.failures) > fail_rows:
                parts.append(Text(f"(+{len(s.failures) - fail_rows} more failing hosts: the "
                                  "summary names them all)", style="dim"))
        if slow:
            slowest = Table(title="slowest hosts", title_justify="left", box=None,
                            pad_edge=False, show_edge=False)
            for col in ("host", "seconds", "state", "task"):
                slowest.add_column(col, no_wrap=True, justify="right" if col == "seconds"
                                   else "left")
            for seconds, host, task, state in slow:
                slowest.add_row(text(host), f"{seconds:.1f}",
                                Text(state, style=STATUS_STYLE.get(state, "")), text(task))
            parts.append(slowest)
        return Group(*parts)


def print_drift(rows: list[DriftRow], stream: TextIO, *, check: bool) -> None:
    """What --diff shows (bootstrap and reconfigure alike): per host and setting, the value on
    the host and the wanted one (--check: nothing was changed). The hosts in line are named
    after it (rdmaprov.outcome.print_changes)."""
    console = table_console(stream)
    title = "Drift (current -> wanted)" if check else "Changed (before -> after)"
    table = Table(title=title, title_justify="left")
    for col in ("host", "setting", *(("current", "wanted") if check else ("before", "after"))):
        table.add_column(col)
    for r in rows:  # Text: loop labels like "[/etc/x]" are data, not rich markup
        table.add_row(*(text(v) for v in (r.host, r.setting, r.current, r.wanted)))
    if rows:
        console.print(table)


SUMMARY_KEYS = ("ok", "changed", "failed", "unreachable", "skipped")


def summary_table(result: RunResult, *, verbose: int = 0) -> Table:
    table = Table(title="Summary", title_justify="left")
    table.add_column("host" if verbose or len(result.hosts) <= SUMMARY_HOST_ROWS else "hosts")
    for k in SUMMARY_KEYS:
        table.add_column(k, justify="right")
    if verbose or len(result.hosts) <= SUMMARY_HOST_ROWS:
        for name, h in result.hosts.items():
            table.add_row(text(name), *(str(getattr(h, k)) for k in SUMMARY_KEYS),
                          style="" if h.healthy else "red")
        return table
    groups: dict[str, list[Any]] = {}
    for h in result.hosts.values():
        kind = ("unreachable" if h.unreachable else "failed") if not h.healthy else \
            ("changed" if h.changed else "in line")
        groups.setdefault(kind, []).append(h)
    for kind in ("in line", "changed", "failed", "unreachable"):
        if kind in groups:
            hs = groups[kind]
            table.add_row(f"{len(hs)} {kind}", *(str(sum(getattr(h, k) for h in hs))
                                                   for k in SUMMARY_KEYS),
                          style="red" if kind in FAILING else "")
    return table


def print_summary(result: RunResult, stream: TextIO, *, verbose: int = 0,
                  table: bool = True) -> None:
    """The per-host table (a fleet: per kind of host; unless ``table`` is false:
    rdmaprov.outcome.wants_table), then the failing task and message of each failed host."""
    console = Console(file=stream, highlight=False, soft_wrap=True)
    if result.hosts and table:
        console.print(summary_table(result, verbose=verbose))
    for name, h in result.hosts.items():
        if h.healthy:
            continue
        kind = "unreachable" if h.unreachable else "failed"
        if h.failure is None:
            console.print(text(f"{name}: {kind}"))
        else:
            console.print(text(f"{name}: {kind} at '{h.failure.task}': {h.failure.message}"))
    if result.error:
        console.print(text(f"error: {result.error}"))
    if result.artifacts_dir is not None:
        console.print(text(f"artifacts: {result.artifacts_dir}"))


def result_document(result: RunResult, exit_code: int,
                    reports: Mapping[str, list[tuple[str, list[str]]]] | None = None
                    ) -> dict[str, Any]:
    """The machine-readable result that ``--json`` prints."""
    totals = dict.fromkeys(("ok", "changed", "failed", "unreachable", "skipped", "rescued",
                            "ignored"), 0)
    for h in result.hosts.values():
        for k in totals:
            totals[k] += getattr(h, k)
    return {
        "rc": exit_code,
        "ansible_rc": result.rc,
        "status": result.status,
        "hosts": {name: h.as_dict() for name, h in result.hosts.items()},
        "counts": totals,
        "failures": [{"host": name, "task": h.failure.task if h.failure else None,
                      "message": h.failure.message if h.failure else None,
                      "unreachable": bool(h.unreachable)}
                     for name, h in result.hosts.items() if not h.healthy],
        "error": result.error,
        "artifacts": str(result.artifacts_dir) if result.artifacts_dir else None,
        "reports": {host: [{"task": task, "lines": lines} for task, lines in items]
                    for host, items in (reports or {}).items()},
    }
