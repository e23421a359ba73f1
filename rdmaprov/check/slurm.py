"""Drain and resume this node in Slurm after a check, the way LBNL NHC does it.

NHC's helpers (node-mark-offline, node-mark-online in github.com/mej/nhc) read the node's state
and reason with `sinfo -o '%t %E'` first, and then:
- offline: leave a node in a state they do not know (boot, power saving, reserved for
  maintenance ...) or DOWN alone; leave a drained node with no reason alone; keep a reason
  someone else set; otherwise drain with their own leader word ("NHC:") and the reason.
- online: resume only a node whose reason starts with their leader; a node drained for any other
  reason (an administrator's "hardware swap ticket 1234") stays drained.
rdmaprov does the same with the leader "rdmaprov:". One rule, used by the prolog and the
health-check program alike (`rdmaprov check --drain`); NHC sites use NHC's own marking instead.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

LEADER = "rdmaprov:"
# Enough for the reason line and a few more words; sinfo -R and dashboards show less anyway.
MAX_REASON = 200
TIMEOUT_S = 15


@dataclass(frozen=True)
class NodeState:
    state: str  # sinfo's compact state: idle, alloc, mix, drain, drng, down*, ...
    reason: str | None  # None when sinfo says "none"


@dataclass(frozen=True)
class Action:
    kind: str  # "drain", "resume" or "none"
    why: str  # for the log: what was done, or why nothing was
    reason: str = ""  # the drain reason, for "drain"


def reason_text(reason: str) -> str:
    """`rdmaprov: <reason>` as one printable line of at most MAX_REASON characters. It goes to
    scontrol as one argv word (never through a shell), but scontrol still eats a double quote
    at the end of a value (seen with Slurm 22.05: `reason=... "PSU"` is stored `... "PSU`), so
    double quotes become single ones."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in reason).split())
    flat = flat.replace('"', "'")
    text = f"{LEADER} {flat}"
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def _ours(reason: str | None) -> bool:
    return reason is not None and reason.split(None, 1)[0:1] == [LEADER]


def _unknown(state: str) -> bool:
    """States NHC does not act on: transitional or flagged ones (booting, powering, planned,
    reserved, maintenance windows)."""
    return any(c in state for c in "@#-~%!^") or state.startswith(("boot", "plnd", "unk",
                                                                     "pow"))


def decide(node: NodeState, problem: str | None) -> Action:
    """What to do with ``node`` given the check's reason line (None: healthy). Pure."""
    state = node.state.rstrip("*$")
    if _unknown(node.state):
        return Action("none", f"state {node.state!r} is not handled; left alone")
    drained = state.startswith(("drain", "drng", "fail", "maint", "down"))
    if problem is not None:
        if state.startswith("down"):
            return Action("none", "node is DOWN; left alone")
        if drained and node.reason is None:
            return Action("none", "already drained with no reason; left alone")
        if drained and not _ours(node.reason):
            return Action("none", f"drained by someone else ({node.reason}); reason kept")
        text = reason_text(problem)
        if drained and node.reason == text:
            return Action("none", "already drained with this reason")
        return Action("drain", f"drain: {text}", text)
    if drained and _ours(node.reason):
        return Action("resume", f"resume: check passed ({node.reason})")
    if drained:
        why = f"reason {node.reason!r} is not rdmaprov's" if node.reason else "it has no reason"
        return Action("none", f"healthy, but left drained: {why}")
    return Action("none", "healthy")


class SlurmError(RuntimeError):
    pass


def _run(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{argv[0]}: {exc}") from None
    if p.returncode != 0:
        raise SlurmError(f"{' '.join(argv[:3])}: {(p.stderr or p.stdout).strip()[:200]}")
    return p.stdout


def read(node: str) -> NodeState:
    """The node's state and reason as slurmctld has them (sinfo, as NHC reads them)."""
    out = _run(["sinfo", "-h", "-N", "-n", node, "-o", "%t|%E"]).strip()
    if not out:
        raise SlurmError(f"sinfo knows no node {node!r}")
    state, _, reason = out.splitlines()[0].partition("|")
    return NodeState(state.strip(), None if reason.strip() in ("", "none") else reason.strip())


def apply(node: str, problem: str | None) -> Action:
    """Read the node, decide, and drain or resume it through scontrol."""
    if shutil.which("sinfo") is None or shutil.which("scontrol") is None:
        raise SlurmError("--drain needs Slurm's sinfo and scontrol on PATH")
    action = decide(read(node), problem)
    if action.kind == "drain":
        _run(["scontrol", "update", f"nodename={node}", "state=drain",
              f"reason={action.reason}"])
    elif action.kind == "resume":
        _run(["scontrol", "update", f"nodename={node}", "state=resume"])
    return action
