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


# -- PCIe AER counters over time -----------------------------------------------------------------
# The kernel's AER counts (rdma_sysfs.aer_counts) start at the device's enumeration and only
# grow, so a count says "since boot", not "now": a non-fatal error months ago is history.
# Growth of the non-fatal count since the last check fails, and keeps failing until stable_s
# passes without more (as link_counters' sticky window: a --drain is not resumed by the very
# next check); correctable growth is reported only (the link retried and recovered). Fatal
# errors are judged from the count itself (check/judge.check_aer). A new boot id starts again.
AER_SCHEMA = "rdmaprov.check-aer/1"
AER_STATE_NAME = "check-aer.json"


def _grown(old: dict | None, cur: dict | None) -> tuple[int, dict[str, int]] | None:
    """(growth of the total, {kind: growth}) between two parse_aer results; None when either
    is missing or the count went back (the device was re-enumerated: a new zero)."""
    if not old or not cur or int(cur["total"]) < int(old.get("total", 0)):
        return None
    kinds = {k: int(v) - int((old.get("kinds") or {}).get(k, 0))
             for k, v in (cur.get("kinds") or {}).items()}
    return int(cur["total"]) - int(old["total"]), {k: d for k, d in kinds.items() if d > 0}


def _kinds(kinds: dict[str, int]) -> str:
    return f" ({', '.join(f'{k} +{n}' for k, n in sorted(kinds.items()))})" if kinds else ""


def aer_advance(history: dict | None, sample: dict, boot: str | None, now: float,
                stable_s: float) -> tuple[dict, dict[str, dict[str, Any]]]:
    """(new history, {address: {"fail": text or None, "warn": text or None}}) for the AER
    counts ``sample`` ({address: {class: {total, kinds}}}) against ``history``."""
    same_boot = history is not None and history.get("boot_id") == boot
    old = ((history or {}).get("devices") or {}) if same_boot else {}
    devices: dict[str, Any] = {}
    verdict: dict[str, dict[str, Any]] = {}
    for addr, counts in sorted(sample.items()):
        prev = old.get(addr) or {}
        sticky = prev.get("sticky")
        fail = warn = None
        grown = _grown((prev.get("counts") or {}).get("nonfatal"), counts.get("nonfatal"))
        if grown and grown[0] > 0:
            sticky = {"text": f"+{grown[0]} non-fatal{_kinds(grown[1])}",
                      "until": now + stable_s}
        if sticky and now >= float(sticky["until"]):
            sticky = None
        if sticky:
            left = max(0, int(float(sticky["until"]) - now))
            fail = (f"{sticky['text']} (unhealthy until no more for {int(stable_s)} s: "
                    f"{left} s left)")
        grown = _grown((prev.get("counts") or {}).get("correctable"), counts.get("correctable"))
        if grown and grown[0] > 0:
            warn = f"+{grown[0]} correctable{_kinds(grown[1])}"
        devices[addr] = {"counts": counts, **({"sticky": sticky} if sticky else {})}
        verdict[addr] = {"fail": fail, "warn": warn}
    return {"boot_id": boot, "devices": devices}, verdict


def aer_step(sample: dict, exp: Expectations, boot: str | None,
             now: float | None = None) -> dict[str, Any]:
    """Judge the AER counts against the state file beside the link history (``link_state``'s
    directory, AER_STATE_NAME) and keep the new counts. {file, first, devices: {address:
    {fail, warn}}, problem}. Written only when something changed (a check is read-mostly)."""
    now = time.time() if now is None else now
    path = Path(exp.link_state).with_name(AER_STATE_NAME) if exp.link_state else None
    history, problem = None, None
    if path is not None:
        try:
            doc = json.loads(path.read_text())
            if isinstance(doc, dict) and doc.get("schema") == AER_SCHEMA \
                    and isinstance(doc.get("devices"), dict):
                history = doc
            else:
                problem = f"{path}: not a {AER_SCHEMA} file, started again"
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            problem = f"{path}: unreadable, started again ({getattr(exc, 'strerror', None) or exc})"
    new, verdict = aer_advance(history, sample, boot, now, float(exp.link_stable_s))
    first = history is None or history.get("boot_id") != boot
    if path is not None and sample and (history is None or {k: v for k, v in history.items()
                                                            if k != "schema"} != new):
        try:
            write_atomic(path, {"schema": AER_SCHEMA, **new})
        except OSError as exc:
            problem = f"{path}: cannot write ({exc.strerror or exc}): no AER history kept"
    return {"file": str(path) if path else None, "first": first, "devices": verdict,
            "problem": problem}
