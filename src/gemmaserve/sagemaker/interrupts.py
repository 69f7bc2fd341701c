"""Signals during a deploy: SIGTERM and SIGHUP stop it like Ctrl-C, and a teardown is not dropped by one more press.

A closed terminal (SIGHUP, unless the process was started with it ignored, as ``nohup`` does), a
dropped SSH session or a supervisor's SIGTERM would kill the process with a billing endpoint
behind it; here they raise :class:`SignalInterrupt`
(a ``KeyboardInterrupt``) so the deploy's own cleanup runs. During a teardown the first
further signal only says the teardown goes on; the next one abandons it, and the caller
reports what is left. Handlers are installed only on the main thread (Python's rule);
elsewhere (the MCP server's worker threads) these are no-ops.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class SignalInterrupt(KeyboardInterrupt):
    """A stop signal, raised where the program was, so ``except BaseException`` cleanup runs."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class TeardownAbandoned(KeyboardInterrupt):
    """The user pressed Ctrl-C (or sent a stop signal) twice while a teardown was running."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def live_stop_signals() -> tuple[int, ...]:
    """The stop signals this process reacts to: not those it was started with ignored.

    ``nohup`` starts a program with SIGHUP ignored so that it outlives its terminal, and a shell's
    ``&`` does the same to SIGINT; catching them anyway would turn that promise into a teardown.
    """
    return tuple(number for number in _STOP_SIGNALS if signal.getsignal(number) is not signal.SIG_IGN)


def signal_name(exc: BaseException) -> str:
    """``SIGTERM`` for a signal interrupt, ``SIGINT`` (Ctrl-C) for a plain KeyboardInterrupt."""
    return getattr(exc, "signal_name", "SIGINT")


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _handlers(handler: Callable[[int, FrameType | None], Any], signals: tuple[int, ...]) -> Iterator[None]:
    if not _on_main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in signals}
    for number in signals:
        signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            # None: a handler installed outside Python; the default is the closest we can restore.
            signal.signal(number, old if old is not None else signal.SIG_DFL)


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`SignalInterrupt` (Ctrl-C keeps raising KeyboardInterrupt)."""

    def handler(number: int, _frame: FrameType | None) -> None:
        raise SignalInterrupt(signal.Signals(number).name)

    signals = tuple(number for number in live_stop_signals() if number != signal.SIGINT)
    with _handlers(handler, signals):
        yield


@contextlib.contextmanager
def shielded_teardown(notify: Callable[[str], None], *, finish_hint: str) -> Iterator[None]:
    """While inside, the first stop signal is reported and ignored; the second raises :class:`TeardownAbandoned`."""
    presses: list[str] = []

    def handler(number: int, _frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        presses.append(name)
        if len(presses) == 1:
            notify(
                f"{name} received: the teardown continues so nothing is left billing. Press Ctrl-C once more "
                f"to abandon it (then finish it with: {finish_hint})."
            )
            return
        raise TeardownAbandoned(name)

    with _handlers(handler, live_stop_signals()):
        yield
