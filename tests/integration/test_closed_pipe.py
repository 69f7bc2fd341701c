"""A reader that closes stdout early (``gemmaserve plan | head -1``) ends the command quietly, as it ends
``git log | head -1``: no traceback, exit 141 (128 + SIGPIPE, what the shell reports for git, cat or seq).

The pipe is shrunk to one page and the reader takes a few bytes before closing it, so the command is
certainly still writing when its reader goes: the order is fixed by the pipe's size, not by timing.
"""

from __future__ import annotations

import fcntl
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemmaserve.cli.errors import EXIT_OUTPUT_CLOSED
from gemmaserve.cli.redaction import OutputClosed, RedactingWriter

SRC = Path(__file__).resolve().parents[2] / "src"
PAGE = 4096


def _run_and_close_early(argv: list[str]) -> tuple[int, bytes, str]:
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PAGE)
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "100"}
    with subprocess.Popen(
        [sys.executable, "-m", "gemmaserve", *argv], stdout=write_end, stderr=subprocess.PIPE, env=env
    ) as child:
        os.close(write_end)
        first = os.read(read_end, 64)
        os.close(read_end)
        assert child.stderr is not None
        err = child.stderr.read().decode()
        code = child.wait(timeout=120)
    return code, first, err


@pytest.mark.parametrize("argv", [["plan", "--wide"], ["plan"]], ids=" ".join)
def test_a_reader_that_leaves_early_ends_the_command_quietly_with_141(argv: list[str]) -> None:
    code, first, err = _run_and_close_early(argv)
    assert first.startswith(b"gemmaserve plan")
    assert err == ""  # no traceback, no "Exception ignored", no "Error:"
    assert code == EXIT_OUTPUT_CLOSED == 141


class _Closed(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_the_writer_says_output_closed_once_then_drops_what_follows() -> None:
    writer = RedactingWriter(_Closed())
    with pytest.raises(OutputClosed):
        writer.write("a line\n")
    writer.write("more\n")  # the reader is gone: nothing to tell, nothing raised again
    writer.flush()


def test_output_closed_is_not_an_error_a_library_catch_all_would_swallow() -> None:
    assert not issubclass(OutputClosed, Exception)
