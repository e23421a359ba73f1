"""The per-node state file of ``rdmaprov check``: port error counters and flaps over time.

The judgement itself is plugins/module_utils/link_counters.py (``advance``: deltas per counter
class, a sticky flap window that clears by itself); this module only reads and writes its
history, atomically (a temp file in the same directory, then rename), so two checks at once
(a prolog and a health check) never leave a torn file: the last one wins, and a lost sample
only shortens a window.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rdmaprov import collection
from rdmaprov.check.expect import Expectations

SCHEMA = "rdmaprov.check-links/1"


def load(path: Path) -> tuple[dict | None, str | None]:
    """(history, problem): None and no problem when there is no file yet; a file that does not
    parse is started again (and said so), never a reason to fail a node."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"{path}: unreadable, started again ({getattr(exc, 'strerror', None) or exc})"
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or \
            not isinstance(doc.get("ports"), dict):
        return None, f"{path}: not a {SCHEMA} file, started again"
    return doc, None


def save(path: Path, history: dict) -> None:
    write_atomic(path, {"schema": SCHEMA, **history})


def write_atomic(path: Path, doc: dict) -> None:
    """``doc`` as JSON at ``path``: a temp file in the same directory, then rename (two checks
    at once never leave a torn file); the temp file is removed when anything fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def step(sample: dict, exp: Expectations, now: float | None = None) -> dict[str, Any]:
    """Judge ``sample`` ({"dev/port": {state, counters}}) against the history in the state
    file and write the new history. {file, first, findings: [Finding.as_dict()], saturated,
    unjudged (ports without a readable error counter), no_failing (nor one of a failing class),
    problem}."""
    lc = collection.link_counters
    now = time.time() if now is None else now
    path = Path(exp.link_state) if exp.link_state else None
    history, problem = load(path) if path is not None else (None, None)
    new, findings = lc.advance(history, sample, now, exp.link_thresholds or None,
                               stable_s=exp.link_stable_s, window_s=exp.link_window_s)
    if path is not None and (sample or history is not None):  # no ports, no history: no file
        try:
            save(path, new)
        except OSError as exc:
            problem = f"{path}: cannot write ({exc.strerror or exc}): no history kept"
    return {"file": str(path) if path else None, "first": history is None,
            "findings": [f.as_dict() for f in findings], "saturated": lc.saturated(sample),
            "unjudged": lc.unjudged(sample), "no_failing": lc.unjudged(sample, "fail"),
            "problem": problem}
