"""The CLI's output boundary: everything written to stdout and stderr passes :func:`gemmaserve.redact.redact`.

Results, tables, ``--json``, errors and their hints, echoed bad input, progress and warnings are all
written through ``sys.stdout``/``sys.stderr`` (click and rich look them up at each write), so wrapping
the two streams once hides a secret wherever a command would print it. Text is redacted a line at a
time (a secret is never split across two writes of one line); ``flush`` writes what is pending, so a
prompt or a progress line without a newline still shows at once.

A reader that leaves early (``gemmaserve plan | head -1``) is not an error of the command: the writer
raises :class:`OutputClosed` once, points the stream's descriptor at ``/dev/null`` so nothing buffered
fails again at exit (https://docs.python.org/3/library/signal.html#note-on-sigpipe), and drops what follows.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from gemmaserve.redact import redact


class OutputClosed(BaseException):
    """The reader of stdout or stderr closed its end: the command ends here, quietly
    (:func:`gemmaserve.cli.errors.run_with_error_mapping` exits 141, as ``git log | head -1`` does).

    Not an :class:`Exception`: a library's catch-all (a failed request recorded as a result) must not
    take it for one and go on writing to a pipe nobody reads. Not an :class:`OSError` either: click
    would turn that into exit 1.
    """


class RedactingWriter:
    """A text stream that writes :func:`redact`-ed lines to ``inner``.

    Its ``buffer`` (where click writes bytes: shell completion's script) redacts too.
    """

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._pending = ""
        self._reader_gone = False
        self.buffer = RedactingBuffer(self)

    @property
    def inner(self) -> TextIO:
        return self._inner

    def write(self, text: str) -> int:
        if self._reader_gone:
            return len(text)
        self._pending += text
        head, newline, tail = self._pending.rpartition("\n")
        if newline:
            self._pending = tail
            self._pass_on(redact(head + newline))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._reader_gone:
            return
        if self._pending:
            text, self._pending = self._pending, ""
            self._pass_on(redact(text))
        try:
            self._inner.flush()
        except BrokenPipeError as exc:
            self._left(exc)

    def _pass_on(self, text: str) -> None:
        try:
            self._inner.write(text)
        except BrokenPipeError as exc:
            self._left(exc)

    def _left(self, exc: BrokenPipeError) -> None:
        self._reader_gone = True
        with contextlib.suppress(OSError, ValueError):  # a test's in-memory stream has no descriptor
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._inner.fileno())
            os.close(devnull)
        raise OutputClosed(str(exc)) from exc

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
    with contextlib.suppress(OSError, ValueError, OutputClosed):
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
