"""The judge's verdict per host, kept on the controller for ``rdmaprov status``.

A host keeps only its worker's exit status (``/var/tmp/rdmaprov-validate/<label>/rc``): exit 0
says the all_reduce ran, not that it passed. The verdict (transport, bar, rails, stability) is
the judge's, on the controller, so the controller keeps it: one JSON file per inventory under
``$XDG_STATE_HOME/rdmaprov/validations/`` (``~/.local/state``), host name -> its last verdict.
``status`` shows it for a host whose newest worker run it judged, and says so where it did not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rdmaprov.validate import verdict as V
from rdmaprov.validate.report import Report

# The host's rc may be written a little after the judge's clock read on another machine.
CLOCK_SLACK_S = 120


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rdmaprov" / "validations"


def _file(inventory: Path) -> Path:
    key = hashlib.sha256(str(inventory.resolve()).encode()).hexdigest()[:16]
    return state_dir() / f"{key}.json"


def host_verdicts(report: Report) -> dict[str, dict[str, Any]]:
    """Each host's verdict: its own first reason, else the fabric's first failed check (a host
    that passed its own checks in a failed run did not pass)."""
    fabric_why = report.error or next(
        (f"{c.name}: {c.reason}" for c in report.checks if c.status == V.FAIL), None)
    out = {}
    for h in report.hosts:
        if not h.passed:
            # error: it gave no result (a preflight refusal, unreachable, hung), as JUnit's
            # <error>; the report's own class, so a setting's refusal is not a fabric failure.
            out[h.host] = {"verdict": "error" if h.error else "fail",
                           "reason": h.reasons[0] if h.reasons else "failed"}
        elif fabric_why:
            out[h.host] = {"verdict": "fail", "reason": f"the run failed: {fabric_why}"}
        else:
            out[h.host] = {"verdict": "pass", "reason": ""}
    return out


def save(report: Report, inventory: Path, label: str = "fabric") -> None:
    """Merge this run's verdicts into the inventory's record (other hosts keep theirs). A
    record that cannot be written costs the run nothing: status then says "not judged here"."""
    path = _file(inventory)
    now = int(time.time())
    with contextlib.suppress(OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True)
        old = load(inventory)
        for host, v in host_verdicts(report).items():
            old[host] = {**v, "label": label, "time": now, "inventory": str(inventory)}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".validations-")
        with os.fdopen(fd, "w") as f:
            json.dump(old, f, indent=1)
        os.replace(tmp, path)


def load(inventory: Path) -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads(_file(inventory).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) \
        else {}


def cell(host_run: dict[str, Any] | None, judged: dict[str, Any] | None) -> tuple[str, str]:
    """(verdict word, text) for status: the judge's verdict of the host's newest run when this
    controller judged it; otherwise only what the host knows (its worker's exit status)."""
    def when(t: Any) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(int(t)))

    run_t = int(host_run["mtime"]) if host_run and str(host_run.get("mtime", "")).isdigit() \
        else None
    if judged and isinstance(judged.get("time"), int) and (
            run_t is None or judged["time"] + CLOCK_SLACK_S >= run_t):
        word = str(judged["verdict"]) if judged.get("verdict") in ("pass", "error") else "fail"
        why = f": {judged['reason']}" if word != "pass" and judged.get("reason") else ""
        return word, f"{word} ({judged.get('label', 'fabric')}, {when(judged['time'])}){why}"
    if not host_run:
        return "never", "never"
    rc = str(host_run.get("rc", "")).strip()
    what = "worker exit 0" if rc == "0" else f"worker failed (exit {rc or 'unknown'})"
    return ("unjudged" if rc == "0" else "fail",
            f"{what} ({host_run.get('label')}, {when(run_t or 0)}); not judged on this controller")
