"""When a validation ran and how long each part took: measured, never assumed.

Two clocks measure a run:
- the hosts' own, in each host's ``steps.log`` (the launch shell's ``launch start`` and
  ``launch exit RC``, and each rank's phases; plugins/module_utils/validate_launch.py
  START_SCRIPT, rdmaprov/validate/worker_base.py step): a host's part is its launch, start to
  exit (to its last line when it never exited); a pair round is its first step's line to the
  rendezvous host's next line after the round;
- the controller's, for a run this rdmaprov made (pipeline.execute): the whole validation, start
  to report, and Ansible's time on the tasks of a host that never launched. A kept results
  directory (``--results DIR``) holds that record (``RECORD``), so ``--judge DIR`` later says
  the same start, duration and inventory.

The report carries them (report.RunInfo, HostResult.duration_s); its renderings show them:
JUnit's ``timestamp`` and ``time``, the HTML page's facts.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rdmaprov import __version__
from rdmaprov.validate.report import Report, RunInfo

RECORD = "rdmaprov-run.json"  # in a kept results directory: the controller's record of the run
_ROUND = re.compile(r"^pair round (\d+) step \d+")


def iso_utc(t: float) -> str:
    """A Unix time as ISO 8601 in UTC, to the second: ``2026-12-08T00:03:01Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _lines(steps: str | None) -> list[tuple[float, str, str]]:
    """(time, who, what) of each well-formed steps.log line, in file order."""
    from rdmaprov import collection

    return list(collection.validate_launch.steps_lines(steps))


def launch_span(steps: str | None) -> tuple[float, float] | None:
    """(start, end) of a host's launch from its steps.log: ``launch start`` (else its first
    line) to the last ``launch exit`` (else its last line: a launch that never exited ran at
    least that long); None without a timed line."""
    lines = _lines(steps)
    if not lines:
        return None
    start = next((at for at, who, what in lines if who == "launch" and what == "start"),
                 lines[0][0])
    exits = [at for at, who, what in lines if who == "launch" and what.startswith("exit")]
    end = exits[-1] if exits else max(at for at, _, _ in lines)
    return (start, end) if end >= start else None


def round_spans(steps: str | None) -> dict[str, float]:
    """Seconds of each pair round (by number, as text) in the rendezvous host's steps.log: from
    rank 0's first line of the round to its first line after the round's last step."""
    lines = [(at, what) for at, who, what in _lines(steps) if who == "rank0"]
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, (_, what) in enumerate(lines):
        m = _ROUND.match(what)
        if m:
            first.setdefault(m[1], i)
            last[m[1]] = i
    return {r: round(lines[last[r] + 1][0] - lines[i][0], 3) for r, i in first.items()
            if last[r] + 1 < len(lines)}


def measure(report: Report, runs: list[Any], results: Path,
            ansible_s: Mapping[str, float] | None = None) -> None:
    """Set the report's times from the runs' steps.log (``runs``: judge.Run, fabric first),
    Ansible's time on the tasks of a host with none (``ansible_s``: engine.HostResult.seconds)
    and, when ``results`` holds it, the controller's record of the run (RECORD)."""
    starts, ends = [], []
    per_host: dict[str, float] = {}
    fabric_span: list[float] = []
    for n, run in enumerate(runs):
        for h in run.hosts:
            span = launch_span(run.files[h].steps)
            if span is None:
                continue
            starts.append(span[0])
            ends.append(span[1])
            per_host[h] = per_host.get(h, 0.0) + span[1] - span[0]
            if n == 0:
                fabric_span += span
    for row in report.hosts:
        if row.host in per_host:
            row.duration_s = round(per_host[row.host], 3)
        elif row.host in (ansible_s or {}):
            row.duration_s = round(float((ansible_s or {})[row.host]), 3)
    info = RunInfo()
    if starts:
        info.started, info.duration_s = iso_utc(min(starts)), round(max(ends) - min(starts), 3)
        info.clock = "steps.log"
    if fabric_span:
        info.fabric_s = round(max(fabric_span) - min(fabric_span), 3)
    if runs:
        fabric = runs[0]
        master = str(fabric.meta.get("master") or fabric.hosts[0])
        if master in fabric.files:
            info.rounds_s = round_spans(fabric.files[master].steps)
    rec = load_record(results)
    if rec:
        info.inventory = rec.get("inventory") if isinstance(rec.get("inventory"), str) else None
        if isinstance(rec.get("started"), str) and isinstance(rec.get("duration_s"), int | float):
            info.started, info.duration_s = rec["started"], float(rec["duration_s"])
            info.clock = "controller"
    report.run = info


def controller(report: Report, started: float, inventory: Path | str) -> None:
    """A run this rdmaprov made: its start and duration by the controller's clock (from
    ``started`` to now) and its inventory (the Slurm launcher's: a line saying it has none)."""
    report.run.started = iso_utc(started)
    report.run.duration_s = round(time.time() - started, 3)
    report.run.clock = "controller"
    report.run.inventory = str(inventory)


def save_record(report: Report, results: Path) -> None:
    """The controller's record of the run, in a kept results directory (``--judge DIR`` reads
    it). A record that cannot be written costs the run nothing."""
    with contextlib.suppress(OSError):
        (results / RECORD).write_text(json.dumps({
            "started": report.run.started, "duration_s": report.run.duration_s,
            "inventory": report.run.inventory, "version": __version__}) + "\n")


def load_record(results: Path) -> dict[str, Any]:
    try:
        doc = json.loads((results / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
