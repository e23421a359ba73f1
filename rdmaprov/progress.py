"""Live per-host progress from runner events, and the final per-host summary.

With a terminal: a rich Live view (current play and task, each host's last status, counts).
Without one (CI, pipes): one plain line per host result, e.g.
``node1  ok       preflight : Gather RDMA facts``. Everything here reads runner events and
RunResult objects; nothing parses Ansible's stdout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rdmaprov.console import table_console
from rdmaprov.drift import DriftRow
from rdmaprov.engine import RunResult, task_label

STATUS_STYLE = {
    "ok": "green", "changed": "yellow", "failed": "bold red", "unreachable": "bold red",
    "skipped": "cyan", "running": "dim", "rescued": "magenta", "ignored": "dim red",
}
COUNT_KEYS = ("ok", "changed", "failed", "unreachable", "skipped", "rescued")


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


@dataclass
class HostLine:
    status: str = "waiting"
    task: str = ""
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))


REPORT_ACTIONS = ("debug", "ansible.builtin.debug", "ansible.legacy.debug")
# A check that passed reports too when it says more than Ansible's default words: a role's
# "refuse what cannot be done" assert carries what the host has as its success_msg, one task
# for both.
ASSERT_ACTIONS = ("assert", "ansible.builtin.assert", "ansible.legacy.assert")
ASSERT_DEFAULT_MSG = "All assertions passed"
# A module of the collection that both acts and says what it found (kernel_modules: each
# module's status) returns its lines under this key; one task instead of a module and a debug.
MODULE_REPORT_KEY = "rdmaprov_report"


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


@dataclass
class ProgressState:
    """What the live view shows, folded from events (pure; unit-tested on its own)."""

    play: str = ""
    task: str = ""
    hosts: dict[str, HostLine] = field(default_factory=dict)
    # What the roles report about each host (their debug tasks), in order: (task, lines).
    reports: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)

    def apply(self, event: Mapping[str, Any]) -> tuple[str, str, str] | None:
        """Fold one event in; return (host, status, task) when it is a host's final result."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            self.play = str(data.get("play") or data.get("name") or "")
        elif kind == "playbook_on_task_start":
            self.task = task_label(data)
        status = event_status(event)
        host = data.get("host")
        if status is None or not host:
            return None
        line = self.hosts.setdefault(str(host), HostLine())
        line.status, line.task = status, task_label(data)
        lines = report_lines(event)
        # A role that reads its host again after acting reports the same lines again: once.
        if lines is not None and lines not in [seen for _, seen in self.reports.get(str(host), [])]:
            self.reports.setdefault(str(host), []).append((line.task, lines))
        if status == "running":
            return None
        if status in line.counts:
            line.counts[status] += 1
        return str(host), status, line.task

    def totals(self) -> dict[str, int]:
        out = dict.fromkeys(COUNT_KEYS, 0)
        for line in self.hosts.values():
            for k, v in line.counts.items():
                out[k] += v
        return out


class Progress:
    """Consumes runner events (``__call__``) and shows them; use as a context manager."""

    def __init__(self, stream: TextIO, *, live: bool | None = None,
                 hosts: list[str] | None = None) -> None:
        self.console = Console(file=stream, highlight=False, soft_wrap=True)
        self.live_mode = self.console.is_terminal if live is None else live
        self.state = ProgressState()
        for h in hosts or []:
            self.state.hosts[h] = HostLine()
        self._live: Live | None = None
        self._width = max((len(h) for h in hosts or []), default=8)

    def __enter__(self) -> Progress:
        if self.live_mode:
            self._live = Live(self._render(), console=self.console, refresh_per_second=8,
                              transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def __call__(self, event: Mapping[str, Any]) -> None:
        done = self.state.apply(event)
        if self._live is not None:
            self._live.update(self._render())
        elif done is not None:
            host, status, task = done
            self._width = max(self._width, len(host))
            self.console.print(f"{host:<{self._width}}  {status:<11}  {task}", markup=False)

    def _render(self) -> Group:
        head = Text(f"PLAY {self.state.play}  ", style="bold")
        head.append(f"TASK {self.state.task}", style="bold blue")
        table = Table(box=None, pad_edge=False, show_edge=False)
        table.add_column("host")
        table.add_column("status")
        for k in COUNT_KEYS:
            table.add_column(k, justify="right")
        table.add_column("last task", overflow="ellipsis", no_wrap=True)
        for name, line in sorted(self.state.hosts.items()):
            table.add_row(name, Text(line.status, style=STATUS_STYLE.get(line.status, "")),
                          *(str(line.counts[k]) for k in COUNT_KEYS), line.task)
        totals = self.state.totals()
        foot = Text("  ".join(f"{k}={v}" for k, v in totals.items()), style="dim")
        return Group(head, table, foot)


def print_reports(reports: Mapping[str, list[tuple[str, list[str]]]], stream: TextIO) -> None:
    """What the roles found on each host, grouped by host, before the summary."""
    console = Console(file=stream, highlight=False, soft_wrap=True)
    for host in sorted(reports):
        console.print(Text(host, style="bold"))
        for task, lines in reports[host]:
            console.print(f"  {task}", markup=False, style="dim")
            for text in lines:
                console.print(f"    {text}", markup=False)


def print_drift(rows: list[DriftRow], hosts: list[str], stream: TextIO, *, check: bool) -> None:
    """What --diff shows (bootstrap and reconfigure alike): per host and setting, the value on
    the host and the wanted one (--check: nothing was changed), then the hosts in line."""
    console = table_console(stream)
    title = "Drift (current -> wanted)" if check else "Changed (before -> after)"
    table = Table(title=title, title_justify="left")
    for col in ("host", "setting", *(("current", "wanted") if check else ("before", "after"))):
        table.add_column(col)
    for r in rows:  # Text: loop labels like "[/etc/x]" are data, not rich markup
        table.add_row(*(Text(v) for v in (r.host, r.setting, r.current, r.wanted)))
    in_line = [h for h in hosts if not any(r.host == h for r in rows)]
    if rows:
        console.print(table)
    what = "in line" if check else "unchanged"
    console.print(f"{what}: {', '.join(in_line)}" if in_line
                  else ("every host drifts" if check else "every host changed"), markup=False)


def summary_table(result: RunResult) -> Table:
    table = Table(title="Summary", title_justify="left")
    table.add_column("host")
    for k in ("ok", "changed", "failed", "unreachable", "skipped"):
        table.add_column(k, justify="right")
    for name, h in result.hosts.items():
        style = "" if h.healthy else "red"
        table.add_row(name, str(h.ok), str(h.changed), str(h.failed), str(h.unreachable),
                      str(h.skipped), style=style)
    return table


def print_summary(result: RunResult, stream: TextIO) -> None:
    """The per-host table, then the failing task and message of each failed host."""
    console = Console(file=stream, highlight=False, soft_wrap=True)
    if result.hosts:
        console.print(summary_table(result))
    for name, h in result.hosts.items():
        if h.healthy:
            continue
        kind = "unreachable" if h.unreachable else "failed"
        if h.failure is None:
            console.print(f"{name}: {kind}", markup=False)
        else:
            console.print(f"{name}: {kind} at '{h.failure.task}': {h.failure.message}",
                          markup=False)
    if result.error:
        console.print(f"error: {result.error}", markup=False)
    if result.artifacts_dir is not None:
        console.print(f"artifacts: {result.artifacts_dir}", markup=False)


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


def print_json(result: RunResult, exit_code: int, stream: TextIO,
               reports: Mapping[str, list[tuple[str, list[str]]]] | None = None) -> None:
    stream.write(json.dumps(result_document(result, exit_code, reports), indent=2) + "\n")
    stream.flush()
