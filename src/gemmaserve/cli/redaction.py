"""The CLI's output boundary: everything written to stdout and stderr passes :func:`gemmaserve.redact.redact`.

Results, tables, ``--json``, errors and their hints, echoed bad input, progress and warnings are all
written through ``sys.stdout``/``sys.stderr`` (click and rich look them up at each write), so wrapping
the two streams once hides a secret wherever a command would print it. Text is redacted a line at a
time (a secret is never split across two writes of one line); ``flush`` writes what is pending, so a
prompt or a progress line without a newline still shows at once.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from gemmaserve.redact import redact


class RedactingWriter:
    """A text stream that writes :func:`redact`-ed lines to ``inner``.

    Its ``buffer`` (where click writes bytes: shell completion's script) redacts too.
    """

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._pending = ""
        self.buffer = RedactingBuffer(self)

    @property
    def inner(self) -> TextIO:
        return self._inner

    def write(self, text: str) -> int:
        self._pending += text
        head, newline, tail = self._pending.rpartition("\n")
        if newline:
            self._inner.write(redact(head + newline))
            self._pending = tail
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            self._inner.write(redact(self._pending))
            self._pending = ""
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:
        return getattr(self._inner, "errors", None)

    @property
    def closed(self) -> bool:
        return bool(getattr(self._inner, "closed", False))


def install() -> None:
    """For the rest of the process, ``sys.stdout`` and ``sys.stderr`` redact (a bug's traceback included)."""
    import atexit

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, RedactingWriter):
            setattr(sys, name, RedactingWriter(stream))
    atexit.register(_flush_both)


def _flush_both() -> None:
    _flush(sys.stdout)
    _flush(sys.stderr)


def _flush(stream: Any) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.flush()


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """While inside, ``sys.stdout`` and ``sys.stderr`` redact what passes through them."""
    streams = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, RedactingWriter):
        sys.stdout = RedactingWriter(sys.stdout)
    if not isinstance(sys.stderr, RedactingWriter):
        sys.stderr = RedactingWriter(sys.stderr)
    try:
        yield
    finally:
        _flush(sys.stdout)
        _flush(sys.stderr)
        sys.stdout, sys.stderr = streams


class RedactingBuffer:
    """The bytes side of a :class:`RedactingWriter`: decoded, redacted, encoded, in order with its text."""

    def __init__(self, text: RedactingWriter) -> None:
        self._text = text

    def write(self, data: bytes) -> int:
        self._text.flush()
        inner = self._text.inner
        encoding = getattr(inner, "encoding", None) or "utf-8"
        redacted = redact(data.decode(encoding, errors="surrogateescape")).encode(encoding, errors="surrogateescape")
        target = getattr(inner, "buffer", None)
        if target is not None:
            target.write(redacted)
        else:  # a text-only stream (a test's capture): the text is what it takes
            inner.write(redacted.decode(encoding, errors="replace"))
        return len(data)

    def flush(self) -> None:
        self._text.flush()
        target = getattr(self._text.inner, "buffer", None)
        if target is not None:
            target.flush()

    def writable(self) -> bool:
        return True


@contextlib.contextmanager
def unwrapped() -> Iterator[None]:
    """The raw streams, for a front end that redacts on its own and needs them whole (the MCP server's
    stdio transport reads ``sys.stdout.buffer``)."""
    streams = sys.stdout, sys.stderr
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, RedactingWriter):
            stream.flush()
            setattr(sys, name, stream.inner)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = streams
