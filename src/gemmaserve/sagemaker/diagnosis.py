"""Early diagnosis of the slow SageMaker failures, from status, log-group presence and log lines (pure).

The ones that cost hours: no log group long after creation (waiting for capacity,
or a container that cannot start), ``CannotStartContainerError`` (CUDA newer than
the host driver), a container crash in the log, and an endpoint still ``Creating``
long after its container answered ``/ping``. Each is a :class:`gemmaserve.findings.Finding`: ``fail``
is fatal (the wait stops and says why), ``warn`` is reported once and the wait goes on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gemmaserve.findings import Finding, Status
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
) -> list[Finding]:
    """Everything wrong or suspicious right now, fatal first."""
    name = state.endpoint_name
    reason = state.failure_reason or ""
    found: list[Finding] = []
    logs_hint = f"gemmaserve sagemaker logs {name} --region {state.region}"
    if state.status is EndpointStatus.FAILED:
        if "CannotStartContainerError" in reason:
            found.append(
                Finding(
                    check="cannot-start-container",
                    status=Status.FAIL,
                    detail=f"Endpoint {name!r} failed: the container could not start ({reason}).",
                    fix=f"A CUDA 13 image on ml.g4dn needs InferenceAmiVersion={DEFAULT_AMI} "
                    f"(gemmaserve sets it unless --ami overrides it); check the image with: "
                    f"gemmaserve sagemaker preflight … ; then {logs_hint}",
                )
            )
        elif "InsufficientInstanceCapacity" in reason or "insufficient capacity" in reason.lower():
            found.append(
                Finding(
                    check="capacity",
                    status=Status.FAIL,
                    detail=f"Endpoint {name!r} failed for capacity in {state.region}: {reason}",
                    fix="Retry in another region (deploy --regions …) or add same-GPU types to the pool.",
                )
            )
        else:
            found.append(
                Finding(
                    check="failed",
                    status=Status.FAIL,
                    detail=f"Endpoint {name!r} is Failed: {reason or 'no reason given'}.",
                    fix=f"See its log: {logs_hint}",
                )
            )
        return found
    crashes = crash_lines([event.message for event in events])
    if crashes and state.status is not EndpointStatus.IN_SERVICE:
        found.append(
            Finding(
                check="container-crashed",
                status=Status.FAIL,
                detail=f"Endpoint {name!r}: the container log shows a crash: {crashes[0][:300]}",
                fix=f"SageMaker will retry and bill until it gives up; delete it and fix the cause. Full log: {logs_hint}",
            )
        )
    elif any(TRACEBACK.search(event.message) for event in events) and state.status is not EndpointStatus.IN_SERVICE:
        found.append(
            Finding(
                check="traceback-in-log",
                status=Status.WARN,
                detail=f"Endpoint {name!r}: the container logged a Python traceback (not by itself fatal; "
                "waiting to see whether the server comes up).",
                fix=f"Read it with: {logs_hint} --grep Traceback",
            )
        )
    if state.status is EndpointStatus.CREATING:
        ping_s = first_ping_s(events)
        if ping_s is not None and now_s - ping_s >= thresholds.ping_stall_after_s:
            found.append(
                Finding(
                    check="ping-ok-still-creating",
                    status=Status.FAIL,
                    detail=f"Endpoint {name!r} has answered /ping for {(now_s - ping_s) / 60:.0f} min "
                    "but SageMaker still says Creating.",
                    fix="This does not resolve on its own: delete the endpoint and deploy again "
                    "(gemmaserve sagemaker delete " + name + ").",
                )
            )
        elapsed = state.elapsed_s or 0.0
        if log_group_exists is False and elapsed >= thresholds.no_log_group_after_s:
            found.append(
                Finding(
                    check="no-log-group",
                    status=Status.WARN,
                    detail=f"Endpoint {name!r} has been Creating for {elapsed / 60:.0f} min with no log group: "
                    "SageMaker is waiting for capacity, or the container cannot start.",
                    fix="A capacity failure surfaces only after ~30 min; consider deleting and trying another region.",
                )
            )
    found.sort(key=lambda item: item.status is not Status.FAIL)
    return found
