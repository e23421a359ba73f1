"""The kernel's own messages since the last check, read through explain's rules table.

`rdmaprov explain` reads a pasted `dmesg`; `check --kernel-log` reads the same messages from
/dev/kmsg on the node and judges them with the same rules (rdmaprov/parsers/rules.py, scope
"kernel": mlx5 health syndromes and command failures, PCIe width/power warnings, probe
failures, link flaps): one rule, one place.

Only the records new since the previous check are judged: /dev/kmsg numbers records with a
sequence number that restarts at boot, so the last number read (with the boot it belongs to) is
kept beside the link state file. A message is reported, not drained on: the kernel's words say
where to look, and the items that judge the parts (ports, links, pcie) decide the verdict; a
stale or noisy log line must never take a healthy node out of production.

Opt-in (``--kernel-log`` / ``kernel_log: true``): reading the ring costs a few milliseconds a
thousand records, which a 0.1 s prolog budget does not always have; the periodic
HealthCheckProgram has the time.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from rdmaprov.check import history

SCHEMA = "rdmaprov.check-kmsg/1"
STATE_NAME = "check-kmsg.json"
MAX_RECORDS = 20000  # the largest rings hold a few thousand lines; stop reading past this


def parse_record(record: str) -> tuple[int, str] | None:
    """/dev/kmsg's 'PRI,SEQ,TS_USEC,FLAGS[,..];MESSAGE' -> (seq, message); None for a
    continuation line (' KEY=VALUE') or anything else."""
    head, sep, message = record.partition(";")
    if not sep or record.startswith(" "):
        return None
    fields = head.split(",")
    if len(fields) < 3 or not fields[1].isdigit():
        return None
    return int(fields[1]), message.rstrip("\n")


def read_records(path: Path) -> tuple[list[tuple[int, str]], str | None]:
    """Every record of /dev/kmsg (a character device: one record per read, non-blocking until
    the ring is drained), or of a file in that format (a fixture root). (records, problem)."""
    out: list[tuple[int, str]] = []
    try:
        st = os.stat(path)
    except OSError as exc:
        return out, f"{path}: {exc.strerror or exc}"
    if not stat.S_ISCHR(st.st_mode):
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError as exc:
            return out, f"{path}: {exc.strerror or exc}"
        out = [r for r in map(parse_record, lines[-MAX_RECORDS:]) if r is not None]
        return out, None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return out, f"{path}: {exc.strerror or exc}"
    try:
        while len(out) < MAX_RECORDS:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break  # the ring is drained
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # records were overwritten while reading: go on with the next
                return out, f"{path}: {exc.strerror or exc}"
            if not chunk:
                break
            rec = parse_record(chunk.decode(errors="replace").split("\n", 1)[0])
            if rec is not None:
                out.append(rec)
    finally:
        os.close(fd)
    return out, None


def boot_id(root: str) -> str | None:
    with contextlib.suppress(OSError):
        return (Path(root) / "proc/sys/kernel/random/boot_id").read_text().strip() or None
    return None


def _save(path: Path, doc: dict[str, Any]) -> str | None:
    try:
        history.write_atomic(path, doc)
    except OSError as exc:
        return f"{path}: not saved ({exc.strerror or exc})"
    return None


def step(root: str, state_file: Path | None) -> dict[str, Any]:
    """Read the messages new since the last check, judge them, remember where this one ended.

    {"file", "new": n, "findings": [diagnosis dicts, first error first], "problem"}."""
    kmsg = Path(root) / "dev/kmsg"
    records, problem = read_records(kmsg)
    if problem is not None and not records:
        return {"file": str(kmsg), "new": 0, "findings": [], "problem": problem}
    boot = boot_id(root)
    last = None
    if state_file is not None:
        with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
            doc = json.loads(state_file.read_text())
            if doc.get("schema") == SCHEMA and doc.get("boot_id") == boot:
                last = int(doc["seq"])
    # A sequence number below the last one read: the ring restarted (a new boot whose id
    # could not be read): everything is new.
    if last is not None and records and records[-1][0] < last:
        last = None
    new = [msg for seq, msg in records if last is None or seq > last]
    # Imported here: a check without --kernel-log stays clear of the parsers (its start-up).
    from rdmaprov.parsers import rules

    found = [d for d in rules.diagnose(new, scope="kernel") if d.severity in ("error", "warning")]
    if state_file is not None and records:
        saved = _save(state_file, {"schema": SCHEMA, "boot_id": boot, "seq": records[-1][0]})
        problem = problem or saved
    return {"file": str(kmsg), "new": len(new), "findings": [d.to_dict() for d in found],
            "problem": problem}
