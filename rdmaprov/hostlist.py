"""The one rule for writing a set of host names short: Slurm's (and ClusterShell's) hostlist form.

``fold(["node1", "node2", "node3", "gpu-a01", "gpu-a02"])`` is ``"gpu-a[01-02],node[1-3]"``:
names that differ only in their last number share a prefix (and a suffix: ``node[1-2]-ib``) and
a bracket of numbers and ranges. A number with leading zeros keeps its width (``node[01-10]``);
numbers of another width get a range of their own (``node[1-2,01]``). A name without a number,
or one that cannot be read back from the folded form (a bracket or a comma in it), stays as it
is. ``expand`` reads the form back (for tests and for anyone who needs the names again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# The last run of digits in a name: what comes before it, the digits, what comes after.
_LAST_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")


def _width(digits: str) -> int:
    """The width a number is written in: 0 (any) without leading zeros, else its length."""
    return len(digits) if len(digits) > 1 and digits.startswith("0") else 0


def _ranges(numbers: list[str]) -> list[str]:
    """Numbers of one prefix and suffix as ranges: ``['1-3', '7', '01-02']``."""
    padded = {_width(d) for d in numbers} - {0}
    by_width: dict[int, set[int]] = {}
    for d in numbers:
        w = _width(d)
        if w == 0 and len(d) in padded:
            w = len(d)  # node10 among node01..node09: the same width
        by_width.setdefault(w, set()).add(int(d))
    out: list[tuple[int, str]] = []
    for w, values in by_width.items():
        ordered = sorted(values)
        start = prev = ordered[0]
        for v in [*ordered[1:], None]:
            if v is not None and v == prev + 1:
                prev = v
                continue
            first, last = str(start).zfill(w), str(prev).zfill(w)
            out.append((start, first if start == prev else f"{first}-{last}"))
            if v is not None:
                start = prev = v
    return [r for _, r in sorted(out, key=lambda item: (item[0], len(item[1])))]


def fold(names: Iterable[str]) -> str:
    """The names as one hostlist, e.g. ``node[1-3],login1``: each (prefix, suffix) once, in
    name order; duplicates once."""
    groups: dict[tuple[str, str], list[str]] = {}
    alone: set[str] = set()
    for name in names:
        m = _LAST_NUMBER.match(name)
        if m is None or any(c in name for c in "[],"):
            alone.add(name)
            continue
        prefix, digits, suffix = m.groups()
        groups.setdefault((prefix, suffix), [])
        if digits not in groups[(prefix, suffix)]:
            groups[(prefix, suffix)].append(digits)
    parts: list[tuple[tuple[str, str, int], str]] = []
    for (prefix, suffix), numbers in groups.items():
        ranges = _ranges(numbers)
        body = ranges[0] if len(ranges) == 1 and "-" not in ranges[0] else \
            f"[{','.join(ranges)}]"
        parts.append(((prefix, suffix, min(int(d) for d in numbers)), f"{prefix}{body}{suffix}"))
    parts += [((name, "", -1), name) for name in alone]
    return ",".join(text for _, text in sorted(parts, key=lambda p: p[0]))


_PART = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?([^,\[]*)")


def expand(hostlist: str) -> list[str]:
    """``node[1-3],login1`` -> ``['node1', 'node2', 'node3', 'login1']`` (fold's form back)."""
    out: list[str] = []
    pos = 0
    while pos < len(hostlist):
        m = _PART.match(hostlist, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"not a hostlist: {hostlist!r}")
        prefix, body, suffix = m.groups()
        if body is None:
            out.append(prefix + suffix)
        else:
            for item in body.split(","):
                first, _, last = item.partition("-")
                width = len(first) if _width(first) else 0
                for v in range(int(first), int(last or first) + 1):
                    out.append(f"{prefix}{str(v).zfill(width)}{suffix}")
        pos = m.end()
        if pos < len(hostlist):
            if hostlist[pos] != ",":
                raise ValueError(f"not a hostlist: {hostlist!r}")
            pos += 1
    return out
