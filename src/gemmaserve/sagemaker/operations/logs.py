"""CloudWatch logs of an endpoint (``/aws/sagemaker/Endpoints/NAME``), filtered in code, and the engine facts in them.

Adapter over a ``logs`` client; the parsing is :func:`gemmaserve.engine_log.parse_engine_log`,
the same parser the local launcher uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from gemmaserve.engine_log import EngineFacts, parse_engine_log
from gemmaserve.errors import AwsError, UsageError
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import call, is_not_found, paginate
from gemmaserve.sagemaker.spec.container import validate_name
from gemmaserve.sagemaker.spec.requests import LogsRequest


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One raw log event as the wait reads it (epoch seconds, unfiltered)."""

    timestamp_s: float  # epoch seconds
    message: str


class LogLine(BaseModel):
    timestamp: datetime
    stream: str
    message: str


class EndpointLogs(ActionResult):
    endpoint_name: str
    region: str
    log_group: str
    log_group_exists: bool
    lines: list[LogLine]
    facts: EngineFacts
    truncated: bool


def log_group_name(endpoint_name: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def log_group_exists(logs: Any, endpoint_name: str, *, region: str) -> bool:
    group = log_group_name(endpoint_name)
    response = call(region, logs.describe_log_groups, logGroupNamePrefix=group)
    return any(item.get("logGroupName") == group for item in response.get("logGroups", []))


def fetch_log_events(
    logs: Any, endpoint_name: str, *, region: str, start_s: float | None = None, limit: int = 20_000
) -> tuple[list[LogEvent], list[str], bool]:
    """Events (oldest first), their stream names, and whether ``limit`` cut them; [] when the group is absent."""
    params: dict[str, Any] = {"logGroupName": log_group_name(endpoint_name)}
    if start_s is not None:
        params["startTime"] = int(start_s * 1000)
    events: list[LogEvent] = []
    streams: list[str] = []
    try:
        for page in paginate(region, logs, "filter_log_events", **params):
            for item in page.get("events", []):
                events.append(LogEvent(timestamp_s=item["timestamp"] / 1000.0, message=item.get("message", "")))
                streams.append(item.get("logStreamName", ""))
                if len(events) >= limit:
                    return events, streams, True
    except AwsError as error:
        if is_not_found(error):
            return [], [], False
        raise
    return events, streams, False


def read_endpoint_logs(logs: Any, request: LogsRequest, *, now: datetime, limit: int = 20_000) -> EndpointLogs:
    """The endpoint's log lines in the request's window, filtered in code; engine facts come from the whole window."""
    endpoint_name, region = validate_name(request.endpoint_name), request.chosen_region()
    since_s, contains, pattern, tail = request.since_min * 60, request.contains, request.grep, request.tail
    regex = None
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--grep {pattern!r} is not a valid regular expression: {exc}") from exc
    start_s = now.timestamp() - since_s if since_s else None
    exists = log_group_exists(logs, endpoint_name, region=region)
    events, streams, truncated = fetch_log_events(logs, endpoint_name, region=region, start_s=start_s, limit=limit)
    facts = parse_engine_log(event.message for event in events)
    lines = [
        LogLine(
            timestamp=datetime.fromtimestamp(event.timestamp_s, tz=now.tzinfo),
            stream=stream,
            message=event.message.rstrip("\n"),
        )
        for event, stream in zip(events, streams, strict=True)
        if (contains is None or contains in event.message) and (regex is None or regex.search(event.message))
    ]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return EndpointLogs(
        endpoint_name=endpoint_name,
        region=region,
        log_group=log_group_name(endpoint_name),
        log_group_exists=exists,
        lines=lines,
        facts=facts,
        truncated=truncated,
    )
