"""Early diagnosis of the slow SageMaker failures, from status, log-group presence and log lines (pure).

The ones that cost hours: no log group long after creation (waiting for capacity,
or a container that cannot start), ``CannotStartContainerError`` (CUDA newer than
the host driver), a container crash in the log, and an endpoint still ``Creating``
long after its container answered ``/ping``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel

from gemmaserve.sagemaker.container import DEFAULT_AMI
from gemmaserve.sagemaker.status import EndpointState, EndpointStatus

PING_OK = re.compile(r'"GET /ping HTTP/1\.[01]" 200')
# A traceback alone is not a death: libraries log handled exceptions (a failed optional import,
# a retried download) with full tracebacks and go on. Only lines that mean the process ended are.
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_CRASH = (
    re.compile(r"exited with (?:code|status) [1-9]"),
    re.compile(r"Worker failed to boot|ERROR: Application startup failed"),
)


class Severity(StrEnum):
    WARNING = "warning"
    FATAL = "fatal"


class Diagnosis(BaseModel):
    code: str
    severity: Severity
    message: str
    hint: str


@dataclass(frozen=True, slots=True)
class WatchThresholds:
    no_log_group_after_s: float = 15 * 60
    ping_stall_after_s: float = 15 * 60


@dataclass(frozen=True, slots=True)
class LogEvent:
    timestamp_s: float  # epoch seconds
    message: str


DEFAULT_THRESHOLDS = WatchThresholds()


def crash_lines(messages: Sequence[str]) -> list[str]:
    """Lines that mean the container or engine died (our patterns plus the engine log parser's fatal ones)."""
    from gemmaserve.engine_log import parse_engine_log

    found = [line.strip() for line in messages if any(pattern.search(line) for pattern in _CRASH)]
    found.extend(parse_engine_log(messages).errors)
    return list(dict.fromkeys(found))


def first_ping_s(events: Sequence[LogEvent]) -> float | None:
    times = [event.timestamp_s for event in events if PING_OK.search(event.message)]
    return min(times) if times else None


def diagnose(
    state: EndpointState,
    *,
    now_s: float,
    log_group_exists: bool | None,
    events: Sequence[LogEvent],
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS,
) -> list[Diagnosis]:
    """Everything wrong or suspicious right now, fatal first."""
    name = state.endpoint_name
    reason = state.failure_reason or ""
    found: list[Diagnosis] = []
    logs_hint = f"gemmaserve sagemaker logs {name} --region {state.region}"
    if state.status is EndpointStatus.FAILED:
        if "CannotStartContainerError" in reason:
            found.append(
                Diagnosis(
                    code="cannot-start-container",
                    severity=Severity.FATAL,
                    message=f"Endpoint {name!r} failed: the container could not start ({reason}).",
                    hint=f"A CUDA 13 image on ml.g4dn needs InferenceAmiVersion={DEFAULT_AMI} "
                    f"(gemmaserve sets it unless --ami overrides it); check the image with: "
                    f"gemmaserve sagemaker preflight … ; then {logs_hint}",
                )
            )
        elif "InsufficientInstanceCapacity" in reason or "insufficient capacity" in reason.lower():
            found.append(
                Diagnosis(
                    code="capacity",
                    severity=Severity.FATAL,
                    message=f"Endpoint {name!r} failed for capacity in {state.region}: {reason}",
                    hint="Retry in another region (deploy --regions …) or add same-GPU types to the pool.",
                )
            )
        else:
            found.append(
                Diagnosis(
                    code="failed",
                    severity=Severity.FATAL,
                    message=f"Endpoint {name!r} is Failed: {reason or 'no reason given'}.",
                    hint=f"See its log: {logs_hint}",
                )
            )
        return found
    crashes = crash_lines([event.message for event in events])
    if crashes and state.status is not EndpointStatus.IN_SERVICE:
        found.append(
            Diagnosis(
                code="container-crashed",
                severity=Severity.FATAL,
                message=f"Endpoint {name!r}: the container log shows a crash: {crashes[0][:300]}",
                hint=f"SageMaker will retry and bill until it gives up; delete it and fix the cause. Full log: {logs_hint}",
            )
        )
    elif any(TRACEBACK.search(event.message) for event in events) and state.status is not EndpointStatus.IN_SERVICE:
        found.append(
            Diagnosis(
                code="traceback-in-log",
                severity=Severity.WARNING,
                message=f"Endpoint {name!r}: the container logged a Python traceback (not by itself fatal; "
                "waiting to see whether the server comes up).",
                hint=f"Read it with: {logs_hint} --grep Traceback",
            )
        )
    if state.status is EndpointStatus.CREATING:
        ping_s = first_ping_s(events)
        if ping_s is not None and now_s - ping_s >= thresholds.ping_stall_after_s:
            found.append(
                Diagnosis(
                    code="ping-ok-still-creating",
                    severity=Severity.FATAL,
                    message=f"Endpoint {name!r} has answered /ping for {(now_s - ping_s) / 60:.0f} min "
                    "but SageMaker still says Creating.",
                    hint="This does not resolve on its own: delete the endpoint and deploy again "
                    "(gemmaserve sagemaker delete " + name + ").",
                )
            )
        elapsed = state.elapsed_s or 0.0
        if log_group_exists is False and elapsed >= thresholds.no_log_group_after_s:
            found.append(
                Diagnosis(
                    code="no-log-group",
                    severity=Severity.WARNING,
                    message=f"Endpoint {name!r} has been Creating for {elapsed / 60:.0f} min with no log group: "
                    "SageMaker is waiting for capacity, or the container cannot start.",
                    hint="A capacity failure surfaces only after ~30 min; consider deleting and trying another region.",
                )
            )
    found.sort(key=lambda item: item.severity != Severity.FATAL)
    return found
