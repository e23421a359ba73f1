"""A stdout that its reader closed (``rdmaprov check | true``, ``explain … | head -1``): the
command goes on quietly and ends with its own exit code.

The usual answers do not fit here: the default SIGPIPE disposition kills the process (exit 141,
and ``check --drain`` would never drain or resume), and an uncaught BrokenPipeError is a
traceback and exit 1, which for ``check`` means "config error" to NHC. So the first write or
flush that finds the pipe closed points file descriptor 1 at /dev/null (what Python's own
documentation recommends, so that the interpreter's last flush cannot fail either) and every
later write is dropped; the command's result, its --prometheus file and its drain are unchanged.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO


class QuietStdout:
    """A text stream over ``stream`` that stops writing, without an error, once its reader is
    gone. Everything else (isatty, encoding, fileno) is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def _gone(self) -> None:
        self.reader_gone = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.reader_gone:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def quiet_stdout() -> Iterator[QuietStdout]:
    """sys.stdout as a QuietStdout for the duration; flushed before it is given back, so that a
    closed pipe is found here and not in the interpreter's last flush."""
    original = sys.stdout
    guarded = QuietStdout(original)
    sys.stdout = guarded  # type: ignore[assignment]
    try:
        yield guarded
    finally:
        guarded.flush()
        if sys.stdout is guarded:
            sys.stdout = original
