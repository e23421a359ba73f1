"""A stand-in for RunnerSession: hands a command the events and the result a run would."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rdmaprov.engine import RunResult


class FakeSession:
    events: ClassVar[list[Mapping[str, Any]]] = []
    result = RunResult(rc=2, status="failed", hosts={}, artifacts_dir=None)

    def __init__(self, spec: Any, on_event: Callable[[Mapping[str, Any]], None] | None = None):
        self.on_event = on_event

    def run(self) -> RunResult:
        for ev in self.events:
            if self.on_event is not None:
                self.on_event(ev)
        return self.result
