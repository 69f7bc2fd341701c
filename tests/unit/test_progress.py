"""The one progress event and cancellation token every long action uses."""

from __future__ import annotations

import threading
import time

import pytest

from gemmaserve.progress import Cancelled, CancelToken, ProgressEvent, check, report


def test_fraction_is_clamped_and_unknown_without_a_total() -> None:
    assert ProgressEvent("tensor", "3 of 4", 3, 4).fraction == 0.75
    assert ProgressEvent("tensor", "5 of 4", 5, 4).fraction == 1.0
    assert ProgressEvent("wait", "waiting", 12.0, None).fraction is None
    assert ProgressEvent("wait", "waiting", None, 0).fraction is None


def test_report_without_a_listener_does_nothing_and_with_one_delivers() -> None:
    report(None, ProgressEvent("x", "y"))
    seen: list[ProgressEvent] = []
    report(seen.append, ProgressEvent("x", "y", 1, 2))
    assert seen == [ProgressEvent("x", "y", 1, 2)]


def test_check_raises_only_after_cancel() -> None:
    token = CancelToken()
    token.check()
    check(token)
    check(None)
    token.cancel()
    assert token.cancelled
    with pytest.raises(Cancelled):
        token.check()
    with pytest.raises(Cancelled):
        check(token)


def test_sleep_returns_early_when_cancelled_from_another_thread() -> None:
    token = CancelToken()
    threading.Timer(0.05, token.cancel).start()
    # A sleep no test run outlasts: only the cancel can end it (else the suite's timeout fails the test).
    with pytest.raises(Cancelled):
        token.sleep(threading.TIMEOUT_MAX)


def test_sleep_without_cancel_sleeps_and_returns() -> None:
    token = CancelToken()
    started = time.monotonic()
    token.sleep(0.02)
    assert time.monotonic() - started >= 0.015  # a lower bound: a busy machine only makes sleeps longer
