"""NHC's drain/resume rules for `rdmaprov check --drain` (rdmaprov/check/slurm.py), state by
state. Against real slurmctld: tests/integration/test_slurm_lab.py."""

from __future__ import annotations

import pytest

from rdmaprov.check.slurm import LEADER, MAX_REASON, NodeState, decide, reason_text

SICK = "1 of 2 RDMA ports ACTIVE: mlx5_1/1 INIT"
OURS = f"{LEADER} {SICK}"


@pytest.mark.parametrize(("state", "reason", "problem", "kind"), [
    # unhealthy
    ("idle", None, SICK, "drain"),
    ("alloc", None, SICK, "drain"),
    ("mix", None, SICK, "drain"),
    ("idle*", None, SICK, "drain"),  # not responding right now: NHC still marks it
    ("drain", "hardware swap ticket 1234", SICK, "none"),  # an admin's reason is kept
    ("drng", "hardware swap ticket 1234", SICK, "none"),
    ("drain", None, SICK, "none"),  # drained with no reason: NHC leaves it
    ("drain", OURS, SICK, "none"),  # same reason already
    ("drain", f"{LEADER} 1 of 8 GPUs visible", SICK, "drain"),  # ours, new reason
    ("down*", None, SICK, "none"),
    ("boot", None, SICK, "none"),
    ("idle~", None, SICK, "none"),  # powered down
    ("mix@", None, SICK, "none"),  # reboot pending
    # healthy
    ("drain", OURS, None, "resume"),
    ("drng", OURS, None, "resume"),
    ("down", OURS, None, "resume"),
    ("drain", "hardware swap ticket 1234", None, "none"),  # not ours: never resumed
    ("drain", "rdmaprovx: lookalike", None, "none"),
    ("drain", "Prolog error", None, "none"),
    ("drain", None, None, "none"),
    ("idle", None, None, "none"),
])
def test_decide(state: str, reason: str | None, problem: str | None, kind: str) -> None:
    action = decide(NodeState(state, reason), problem)
    assert action.kind == kind, action
    if kind == "drain":
        assert action.reason == f"{LEADER} {SICK}"


def test_reason_is_one_printable_line_of_bounded_length() -> None:
    assert reason_text('port "mlx5_0"\nsays\tno') == f"{LEADER} port 'mlx5_0' says no"
    long = reason_text("x" * 1000)
    assert len(long) == MAX_REASON and long.endswith("...")
    assert reason_text("\x1b[31mred\x1b[0m").isprintable()
