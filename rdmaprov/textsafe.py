"""Text from hosts and pasted logs, made safe for a terminal, XML, HTML and metric labels: one
rule, used by `rdmaprov explain`, every rendering of the validation report, probe's, status's
and check's output and the Prometheus textfile.

Two dangers: terminal escape sequences and control characters (they retitle, clear or recolour
the reader's terminal and break XML 1.0), and rich markup (``MT_[/x]`` raises MarkupError,
``[rc 1]`` disappears as an unknown tag). Host text reaches rich only as a Text (rich_text).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported only where a Text is made: `rdmaprov check` starts fast
    from rich.text import Text

# Terminal escape sequences (CSI, OSC, DCS/APC/PM/SOS strings, two-byte ESC) and every other
# control character: a pasted log must not retitle, clear or recolour the reader's terminal.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_].*?(?:\x07|\x1b\\|$)|\x9b[0-?]*[ -/]*"
                      r"[@-~]|[\x9d\x90\x98\x9e\x9f].*?(?:\x07|\x9c|$)|\x1b[ -~]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: str) -> str:
    """Text for a terminal: escape sequences dropped, other control characters shown as '?'.

    Newlines and tabs stay; everything else below 0x20, DEL and the C1 range go.
    """
    if not _CONTROLS.search(text):  # the same set as below: most text has none (one C scan)
        return text
    return _CONTROLS.sub("?", _ESCAPES.sub("", text))


def safe_line(text: str) -> str:
    """One line of text for a table cell, a reason or a metric label: safe_text, with newlines
    and tabs as spaces (a cell that wraps a row breaks grep, NHC's one reason line, a label)."""
    return safe_text(text).replace("\r", " ").replace("\n", " ").replace("\t", " ")


def rich_text(value: object, style: str = "") -> Text:
    """Host text for rich: a Text, never a markup string (so ``MT_[/x]`` or ``[rc 1]`` prints as
    it is instead of raising MarkupError or vanishing as a tag), on one safe line."""
    from rich.text import Text

    if isinstance(value, Text):
        return Text(safe_line(value.plain), style=value.style)
    return Text(safe_line(str(value)), style=style)
