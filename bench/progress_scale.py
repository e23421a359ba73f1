"""The progress view's cost per runner event at fleet size, and what it prints.

    python bench/progress_scale.py [--hosts 1000,10000] [--tasks 21] [--modes plain,live]

A synthetic stream in ansible-runner's event shapes (playbook_on_task_start, runner_on_start,
runner_on_ok / _failed / _unreachable) for N hosts and --tasks tasks (21: a no-change bootstrap
re-run's task results per host, bench/RESULTS.md), 0.1 % of the hosts failing, folded by
rdmaprov.progress three ways: the plain per-task lines (no terminal), -v's per-host lines, and the
terminal's fleet view (events folded, one render per 1,000 events: Live renders 8 times a second,
not per event). Prints events, seconds, microseconds per event, lines printed and one render's
time and line count on a 50-line terminal.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console

from rdmaprov.progress import Progress


def events(n: int, tasks: int) -> Iterator[dict[str, Any]]:
    hosts = [f"gpu{i:05d}" for i in range(n)]
    failing = set(hosts[3::1000])
    yield {"event": "playbook_on_play_start", "event_data": {"play": "site", "name": "site"}}
    for t in range(tasks):
        data = {"task": f"Task {t}", "role": f"rdmaprov.cluster.role{t % 7}",
                "task_uuid": f"00000000-0000-0000-0000-{t:012d}", "play": "site"}
        yield {"event": "playbook_on_task_start", "event_data": data}
        for h in hosts:
            yield {"event": "runner_on_start", "event_data": {**data, "host": h}}
        for i, h in enumerate(hosts):
            if h in failing and t == tasks // 2:
                yield {"event": "runner_on_failed", "event_data": {
                    **data, "host": h, "duration": 2.0,
                    "res": {"msg": "non-zero return code", "rc": 1,
                            "stderr": "RTNETLINK answers: Operation not permitted"}}}
            elif h in failing and t > tasks // 2:
                continue
            else:
                yield {"event": "runner_on_ok", "event_data": {
                    **data, "host": h, "duration": 0.5 + (i % 100) / 100,
                    "res": {"changed": False}}}
    yield {"event": "playbook_on_stats", "event_data": {}}


def fold(n: int, tasks: int, mode: str) -> dict[str, Any]:
    out = io.StringIO()
    screen = Console(file=io.StringIO(), width=160, height=50)
    hosts = [f"gpu{i:05d}" for i in range(n)]
    render_s: list[float] = []
    count = 0
    t0 = time.perf_counter()
    if mode == "live":
        p = Progress(out, live=True, hosts=hosts, console=screen)
        for count, ev in enumerate(events(n, tasks), 1):
            p(ev)
            if count % 1000 == 0:
                r = time.perf_counter()
                screen.print(p.renderable())
                render_s.append(time.perf_counter() - r)
    else:
        with Progress(out, hosts=hosts, verbose=int(mode == "plain -v")) as p:
            for ev in events(n, tasks):
                count += 1
                p(ev)
    wall = time.perf_counter() - t0
    row: dict[str, Any] = {"hosts": n, "tasks": tasks, "mode": mode, "events": count,
                           "wall_s": round(wall, 2), "us_per_event": round(wall / count * 1e6, 1),
                           "lines": len(out.getvalue().splitlines())}
    if render_s:
        last = Console(file=io.StringIO(), width=160, height=50, record=True)
        last.print(p.renderable())
        row.update(renders=len(render_s), render_ms_median=round(
            sorted(render_s)[len(render_s) // 2] * 1e3, 1),
            render_lines=len(last.export_text().splitlines()))
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="1000,10000")
    ap.add_argument("--tasks", type=int, default=21)
    ap.add_argument("--modes", default="plain,plain -v,live")
    args = ap.parse_args()
    print(json.dumps({"loadavg_before": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)
    for n in (int(x) for x in args.hosts.split(",")):
        for mode in args.modes.split(","):
            print(json.dumps(fold(n, args.tasks, mode)), flush=True)
    print(json.dumps({"loadavg_after": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
