"""The one rule for how wide a table prints."""
from __future__ import annotations

from typing import TextIO

from rich.console import Console

# Wider than any table we print: a pipe or a log gets one line per row, never a wrapped cell.
UNWRAPPED = 10_000


def table_console(stream: TextIO) -> Console:
    """A terminal's own width on a terminal; otherwise (a pipe, a log) one line per row, however
    wide, so that grep and awk see a whole row."""
    return Console(file=stream, highlight=False, width=None if stream.isatty() else UNWRAPPED)
