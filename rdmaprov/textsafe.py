"""Text from hosts and pasted logs, made safe for a terminal, XML and HTML: one rule, used by
`rdmaprov explain` and by every rendering of the validation report."""

from __future__ import annotations

import re

# Terminal escape sequences (CSI, OSC, DCS/APC/PM/SOS strings, two-byte ESC) and every other
# control character: a pasted log must not retitle, clear or recolour the reader's terminal.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_].*?(?:\x07|\x1b\\|$)|\x9b[0-?]*[ -/]*"
                      r"[@-~]|[\x9d\x90\x98\x9e\x9f].*?(?:\x07|\x9c|$)|\x1b[ -~]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: str) -> str:
    """Text for a terminal: escape sequences dropped, other control characters shown as '?'.

    Newlines and tabs stay; everything else below 0x20, DEL and the C1 range go.
    """
    if not any((c < " " and c not in "\n\t") or "\x7f" <= c <= "\x9f" for c in text):
        return text
    return _CONTROLS.sub("?", _ESCAPES.sub("", text))
