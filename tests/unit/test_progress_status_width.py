"""The live per-host view on a narrow terminal: the last task gives way, the status word never
(a user saw `runn…` for running at 100 columns with a long task name)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from rdmaprov.progress import Progress

HOSTS = ["gpu-node-rack12-slot07.cluster.example", "node2"]
TASK = ("container_runtime : Probe engines, GPUs, RDMA devices, locked memory, images, "
        "rdmaprov's drop-ins and CDI spec")


def _event(kind: str, host: str) -> dict:
    return {"event": kind, "event_data": {"host": host, "task": TASK.split(" : ", 1)[1],
                                          "role": "rdmaprov.cluster.container_runtime",
                                          "task_uuid": "t1", "res": {}}}


@pytest.mark.parametrize("width", [60, 80, 100])
def test_the_status_word_is_whole_however_narrow_the_terminal(width: int) -> None:
    screen = Console(file=io.StringIO(), width=width, height=40, record=True)
    p = Progress(io.StringIO(), live=True, hosts=HOSTS, console=screen)
    p(_event("runner_on_start", HOSTS[0]))
    p(_event("runner_on_unreachable", HOSTS[1]))
    screen.print(p.renderable())
    lines = screen.export_text().splitlines()
    rows = {host: next(line.split() for line in lines if line.startswith(host[:6]))
            for host in HOSTS}
    assert rows[HOSTS[0]][1] == "running", lines
    assert rows[HOSTS[1]][1] == "unreachable", lines
    assert rows[HOSTS[1]][0] == "node2"
    assert all(len(line) <= width for line in lines)
    # The last task is what gives way, cut with an ellipsis.
    assert rows[HOSTS[0]][-1].endswith("…") and rows[HOSTS[0]][2:8] == ["0"] * 6, lines

