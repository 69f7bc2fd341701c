"""One finding model for every check gemmaserve makes: doctor, preflight, checkpoint validate, endpoint logs.

A finding says what was checked (``check``, a stable dotted id), how it came out (``status``), what was
seen (``detail``), and what to do about it (``fix``; its shell commands, whole, in ``commands``).
``unknown`` is its own status and never counts as a pass: a check that could not run is not a check that
found nothing. ``required`` findings that did not pass block the action that asked (a start, a deploy, a
repack).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "not-applicable"


PASSING = frozenset({Status.OK, Status.WARN, Status.NOT_APPLICABLE})


class Finding(BaseModel):
    """One check's outcome. ``where`` names what it was about when a check runs per item (a region, a
    tensor, an endpoint); ``state`` names a recognised broken state (``cpu-torch-under-cuda-vllm``).
    ``commands`` are the fix's shell commands, each a whole line to paste as is (the fix text names them too),
    kept apart so a renderer can print them unwrapped."""

    model_config = ConfigDict(frozen=True)

    check: str
    status: Status
    detail: str
    fix: str | None = None
    title: str | None = None
    required: bool = True
    where: str | None = None
    state: str | None = None
    commands: list[str] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status in PASSING

    @property
    def blocks(self) -> bool:
        """Whether this finding makes the whole report not ok."""
        return self.required and not self.passed


@dataclass(frozen=True, slots=True)
class Check:
    """One check's stable id and title, named once: its outcomes are ``check.ok(detail)``, ``check.fail(…)``.

    ``required`` is the default of its findings; an outcome may override it (an unknown that must not block).
    A check made once per item (a region, an instance type) is ``check.at(item)``: ``quota:us-east-1``, its
    findings' ``where`` the item.
    """

    check: str
    title: str
    required: bool = True
    where: str | None = None

    def at(self, where: str) -> Check:
        return Check(f"{self.check}:{where}", self.title, self.required, where)

    def finding(
        self,
        status: Status,
        detail: str,
        *,
        fix: str | None = None,
        commands: Sequence[str] = (),
        state: str | None = None,
        required: bool | None = None,
    ) -> Finding:
        return Finding(
            check=self.check,
            title=self.title,
            status=status,
            detail=detail,
            fix=fix,
            commands=list(commands),
            state=state,
            required=self.required if required is None else required,
            where=self.where,
        )

    def ok(self, detail: str, *, required: bool | None = None) -> Finding:
        return self.finding(Status.OK, detail, required=required)

    def warn(self, detail: str, *, fix: str | None = None, required: bool | None = None) -> Finding:
        return self.finding(Status.WARN, detail, fix=fix, required=required)

    def unknown(self, detail: str, *, fix: str | None = None, required: bool | None = None) -> Finding:
        return self.finding(Status.UNKNOWN, detail, fix=fix, required=required)

    def fail(
        self, detail: str, *, fix: str | None = None, commands: Sequence[str] = (), state: str | None = None
    ) -> Finding:
        return self.finding(Status.FAIL, detail, fix=fix, commands=commands, state=state)


def all_pass(findings: Iterable[Finding]) -> bool:
    """True only when no finding blocks (an empty list passes: nothing was required)."""
    return not any(finding.blocks for finding in findings)


def worst(findings: Iterable[Finding]) -> Status:
    """The most serious status among ``findings``: fail, then unknown, then warn, then ok."""
    order = [Status.FAIL, Status.UNKNOWN, Status.WARN, Status.OK, Status.NOT_APPLICABLE]
    seen = {finding.status for finding in findings}
    return next((status for status in order if status in seen), Status.OK)
