"""What bootstrap and reconfigure print once a run is over, besides the summary table: the
roles' reports, what changed, and the hosts in line.

- Reports: each line the roles reported once, under the hosts that reported it, their names
  folded (``node[1-3]:``, rdmaprov.hostlist); lines only some hosts have (an address) come
  under those hosts. By default only the hosts that changed or failed are shown; a host in
  line is counted in the in-line line. ``-v``: every host's full report, host by host.
- Changes: one line per changed task (or loop item) and the hosts it changed on, from the
  run's own results (rdmaprov.drift.DriftCollector's rows: what each task reported as changed,
  and from what to what where the task says), e.g.
  ``node1: net_mtu : Set the runtime MTU [eth1]: 1500 -> 9000``.
- In line: ``in line: node[1-3]: nothing changed (27 report lines each; -v shows them)``: all
  a no-change re-run prints after its progress (the summary table only with -v, wants_table).

``-q``: no reports; the changes, the failures and the last line only. Host and report text
reaches the terminal only through rdmaprov.progress.text (textsafe, never markup).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

from rich.console import Console

from rdmaprov.drift import UNSAID, DriftRow
from rdmaprov.engine import RunResult
from rdmaprov.hostlist import fold
from rdmaprov.progress import text

Reports = Mapping[str, list[tuple[str, list[str]]]]
# (hosts, [(task, lines)]): what print_reports prints under one heading.
Block = tuple[list[str], list[tuple[str, list[str]]]]
# A heading longer than this names its first hosts and how many there are (--json and -v: all).
HEADING_CHARS = 200


def heading(hosts: list[str]) -> str:
    """The hosts as one folded name (``node[1-3]``); past HEADING_CHARS, the first of them and
    the count."""
    folded = fold(hosts)
    if len(folded) <= HEADING_CHARS:
        return folded
    cut = folded.rfind(",", 0, HEADING_CHARS)
    return f"{folded[:cut if cut > 0 else HEADING_CHARS]},... ({len(hosts)} hosts)"


def blocks(reports: Reports, hosts: list[str]) -> list[Block]:
    """The hosts' reports, each line once under the hosts that reported it (the same line under
    the same task), in the order the first of those hosts reported it. Hosts whose reports are
    the same get one block."""
    owners: dict[tuple[str, str, int], list[str]] = {}
    for host in hosts:
        seen: dict[tuple[str, str], int] = {}
        for task, lines in reports.get(host, []):
            for line in lines:
                n = seen[(task, line)] = seen.get((task, line), -1) + 1  # a line said twice
                owners.setdefault((task, line, n), []).append(host)
    out: dict[tuple[str, ...], list[tuple[str, list[str]]]] = {}
    for (task, line, _), owned in owners.items():
        entries = out.setdefault(tuple(owned), [])
        if entries and entries[-1][0] == task:
            entries[-1][1].append(line)
        else:
            entries.append((task, [line]))
    return [(list(owned), entries) for owned, entries in out.items()]


def shown_hosts(result: RunResult, reports: Reports, *, verbose: int) -> list[str]:
    """Whose reports print: -v every host's; else the hosts that changed or failed."""
    names = list(result.hosts) + [h for h in reports if h not in result.hosts]
    if verbose:
        return names
    return [h for h in names if h not in result.hosts or result.hosts[h].changed
            or not result.hosts[h].healthy]


def in_line(result: RunResult) -> list[str]:
    """The hosts the run found in line: no failure, nothing changed (or, --check, to change)."""
    return [name for name, h in result.hosts.items() if h.healthy and not h.changed]


def wants_table(result: RunResult, *, verbose: int, quiet: bool) -> bool:
    """Whether the summary table prints: not with -q, nor when every host is in line (the
    in-line line says it all) unless -v."""
    return not quiet and (bool(verbose) or len(in_line(result)) < len(result.hosts))


def print_reports(reports: Reports, hosts: list[str], stream: TextIO, *,
                  verbose: int = 0) -> None:
    """The roles' reports of ``hosts``: -v each host's in full, else grouped (blocks)."""
    console = Console(file=stream, highlight=False, soft_wrap=True)
    groups = [([h], reports[h]) for h in hosts if reports.get(h)] if verbose else \
        blocks(reports, hosts)
    for owned, entries in groups:
        console.print(text(f"{heading(owned)}:", "bold"))
        for task, lines in entries:
            console.print(text(f"  {task}", "dim"))
            for line in lines:
                console.print(text(f"    {line}"))


def change_lines(rows: list[DriftRow]) -> list[str]:
    """``hosts: task [item]: before -> after`` for each changed task, the hosts it changed the
    same way on folded into one line, in the order the run changed them."""
    said: dict[str, list[str]] = {}
    for r in rows:
        what = r.setting if (r.current, r.wanted) == UNSAID else \
            f"{r.setting}: {r.current} -> {r.wanted}"
        owned = said.setdefault(what, [])
        if r.host not in owned:
            owned.append(r.host)
    return [f"{heading(owned)}: {what}" for what, owned in said.items()]


def in_line_line(result: RunResult, reports: Reports, *, check: bool, verbose: int) -> str | None:
    """``in line: node[1-3]: nothing changed (27 report lines each; -v shows them)``; None when
    no host is in line."""
    hosts = in_line(result)
    if not hosts:
        return None
    line = f"in line: {heading(hosts)}: nothing {'to change' if check else 'changed'}"
    counts = {sum(len(lines) for _, lines in reports.get(h, [])) for h in hosts}
    if verbose or not any(counts):
        return line
    each = f"{counts.pop()} report lines each" if len(counts) == 1 else \
        f"{min(counts)} to {max(counts)} report lines a host"
    return f"{line} ({each}; -v shows them)"


def print_host_reports(result: RunResult, reports: Reports, stream: TextIO, *,
                       verbose: int = 0, quiet: bool = False) -> None:
    """Before the summary: the reports of the hosts that changed or failed, grouped (-v: every
    host's, host by host; -q: none)."""
    if not quiet:
        print_reports(reports, shown_hosts(result, reports, verbose=verbose), stream,
                      verbose=verbose)


def print_changes(result: RunResult, reports: Reports, rows: list[DriftRow], stream: TextIO,
                  *, check: bool, diff: bool, verbose: int = 0) -> None:
    """After the summary: what changed (--diff: its table instead, progress.print_drift), then
    the in-line line."""
    console = Console(file=stream, highlight=False, soft_wrap=True)
    if not diff:
        lines = change_lines(rows)
        if lines:
            console.print(text("would change:" if check else "changed:", "bold"))
        for line in lines:
            console.print(text(f"  {line}"))
    last = in_line_line(result, reports, check=check, verbose=verbose)
    if last is not None:
        console.print(text(last))
