"""The one rule for how wide a table prints, and for how host text gets into one."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TextIO

from rich.console import Console
from rich.table import Table

from rdmaprov.textsafe import rich_text

# Wider than any table we print: a pipe or a log gets one line per row, never a wrapped cell.
UNWRAPPED = 10_000


def table_console(stream: TextIO) -> Console:
    """A terminal's own width on a terminal; otherwise (a pipe, a log) one line per row, however
    wide, so that grep and awk see a whole row. No markup or emoji codes in strings: styles come
    as Text, so that a string with host text in it is never read as markup."""
    return Console(file=stream, highlight=False, markup=False, emoji=False,
                   width=None if stream.isatty() else UNWRAPPED)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A borderless table whose every cell is safe text (textsafe.rich_text)."""
    t = Table(box=None, pad_edge=False)
    for c in columns:
        t.add_column(c)
    for row in rows:
        t.add_row(*(rich_text(cell) for cell in row))
    return t
