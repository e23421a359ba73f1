# Copyright: rdmaprov developers
# Apache-2.0
"""One value as one word of a systemd unit's setting (an Exec line's argument, a path).

systemd splits an Exec line at whitespace, unquotes "..." and '...' with C escapes, expands
%-specifiers and $VARIABLES, and ends a setting at a newline. A value quoted here stays one word
and means itself: a plain value (the usual path or interface name) is written as it is, anything
else double-quoted with \\, ", control characters escaped and % and $ doubled.
"""

from __future__ import annotations

import re

_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")


def systemd_word(value):
    text = "" if value is None else str(value)
    if _PLAIN.fullmatch(text):
        return text
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch in "%$":
            out.append(ch + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
