"""The outcome of one probe step: a value, or the text of the exception that stopped it.

Every probe step can fail on its own (a missing binary, an unreadable file, a
crashed import); callers see which step failed and why, and never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")


class Probed(BaseModel, Generic[T]):
    """``value`` when the step worked, else ``error`` (``"ExceptionType: message"``)."""

    model_config = ConfigDict(frozen=True)

    value: T | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.value is not None


def describe_exception(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def probe_step(step: Callable[[], T]) -> Probed[T]:
    """Run ``step``; an exception becomes ``error`` instead of propagating."""
    try:
        return Probed[T](value=step())
    except Exception as exc:  # a probe step must never take doctor down with it
        return Probed[T](error=describe_exception(exc))
