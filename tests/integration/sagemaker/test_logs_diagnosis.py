"""CloudWatch logs (moto), the engine facts parsed from them, and the early-failure rules fed by them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from gemmaserve.errors import EndpointFailed, UsageError
from gemmaserve.findings import Status
from gemmaserve.sagemaker.aws import Deps
from gemmaserve.sagemaker.operations.logs import LogEvent, log_group_name, read_endpoint_logs
from gemmaserve.sagemaker.operations.status import (
    EndpointState,
    EndpointStatus,
    WatchThresholds,
    diagnose,
)
from gemmaserve.sagemaker.spec.requests import LogsRequest
from tests.support.sagemaker.helpers import START, Lines, ScriptedClock, wait_on

REGION = "us-east-1"
NAME = "gemma4-e2b-t4"
ENGINE_LINES = [
    "INFO 12-02 17:01:00 [api_server.py:1] vLLM API server version 0.20.0",
    "INFO 12-02 17:02:06 [gpu_model_runner.py:1] Model loading took 8.01 GiB memory and 66.190265 seconds",
    "INFO 12-02 17:03:00 [kv_cache_utils.py:1] GPU KV cache size: 867,999 tokens",
    "INFO 12-02 17:03:00 [kv_cache_utils.py:1] Maximum concurrency for 8,192 tokens per request: 105.96x",
    'INFO:     10.0.0.1:5000 - "GET /ping HTTP/1.1" 200 OK',
]


def put_logs(logs: Any, lines: list[str], start_s: float) -> None:
    group = log_group_name(NAME)
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-0abc")
    logs.put_log_events(
        logGroupName=group,
        logStreamName="AllTraffic/i-0abc",
        logEvents=[{"timestamp": int((start_s + i) * 1000), "message": line} for i, line in enumerate(lines)],
    )


def described(status: str) -> dict[str, Any]:
    """DescribeEndpoint's answer for NAME in ``status``: one ml.g4dn.xlarge in its pool."""
    return {
        "EndpointName": NAME,
        "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/x",
        "EndpointConfigName": "c",
        "EndpointStatus": status,
        "CreationTime": START,
        "LastModifiedTime": START,
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "InstancePools": [{"InstanceType": "ml.g4dn.xlarge", "CurrentInstanceCount": 1}],
            }
        ],
    }


def test_logs_are_filtered_in_code_and_facts_come_from_the_whole_window() -> None:
    with mock_aws():
        logs = boto3.client("logs", region_name=REGION)
        put_logs(logs, ENGINE_LINES, START.timestamp())
        result = read_endpoint_logs(
            logs, LogsRequest(endpoint_name=NAME, region=REGION, contains="KV cache"), now=START + timedelta(minutes=5)
        )
        assert result.log_group_exists and [line.message for line in result.lines] == [ENGINE_LINES[2]]
        assert result.facts.vllm_version == "0.20.0" and result.facts.weights_gib == 8.01
        assert result.facts.kv_cache_tokens == 867_999 and result.facts.max_concurrency == 105.96
        request = LogsRequest(endpoint_name=NAME, region=REGION, tail=2, grep=r"^INFO \d")
        tail = read_endpoint_logs(logs, request, now=START + timedelta(minutes=5))
        assert [line.message for line in tail.lines] == ENGINE_LINES[2:4]
        with pytest.raises(UsageError):
            # past the request's own check (a library caller may build one unchecked): the reader refuses too
            read_endpoint_logs(
                logs, LogsRequest.model_construct(endpoint_name=NAME, region=REGION, grep="("), now=START
            )
        missing = read_endpoint_logs(logs, LogsRequest(endpoint_name="other", region=REGION), now=START)
        assert not missing.log_group_exists and missing.lines == []


def state(status: EndpointStatus, minutes: float) -> EndpointState:
    return EndpointState(endpoint_name=NAME, region=REGION, status=status, elapsed_s=minutes * 60)


def test_no_log_group_after_the_threshold_is_a_warning() -> None:
    early = diagnose(state(EndpointStatus.CREATING, 14), now_s=0, log_group_exists=False, events=[])
    late = diagnose(state(EndpointStatus.CREATING, 16), now_s=0, log_group_exists=False, events=[])
    assert early == [] and [(d.check, d.status) for d in late] == [("no-log-group", Status.WARN)]


def test_ping_answered_but_still_creating_is_fatal_after_the_threshold() -> None:
    events = [LogEvent(timestamp_s=1000.0, message=ENGINE_LINES[4])]
    thresholds = WatchThresholds(ping_stall_after_s=600)
    assert (
        diagnose(
            state(EndpointStatus.CREATING, 30), now_s=1599, log_group_exists=True, events=events, thresholds=thresholds
        )
        == []
    )
    found = diagnose(
        state(EndpointStatus.CREATING, 30), now_s=1600, log_group_exists=True, events=events, thresholds=thresholds
    )
    assert [d.check for d in found] == ["ping-ok-still-creating"]
    assert diagnose(state(EndpointStatus.IN_SERVICE, 30), now_s=99999, log_group_exists=True, events=events) == []


@pytest.mark.parametrize(
    "line",
    [
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536",
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ],
)
def test_a_crash_in_the_log_is_fatal(line: str) -> None:
    found = diagnose(
        state(EndpointStatus.CREATING, 5),
        now_s=0,
        log_group_exists=True,
        events=[LogEvent(timestamp_s=0, message=line)],
    )
    assert found[0].check == "container-crashed" and found[0].status is Status.FAIL
    assert found[0].title == "The container log shows no crash"  # each diagnosis is a named check, as doctor's


def test_wait_stops_early_on_a_crash_in_the_log() -> None:
    clock = ScriptedClock()
    sm = boto3.client("sagemaker", region_name=REGION)
    creating = described("Creating")
    with mock_aws():
        logs = boto3.client("logs", region_name=REGION)
        with Stubber(sm) as stub:
            stub.add_response("describe_endpoint", creating, {"EndpointName": NAME})
            stub.add_response("describe_endpoint", creating, {"EndpointName": NAME})
            put_logs(
                logs,
                ["loading", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"],
                START.timestamp(),
            )
            with pytest.raises(EndpointFailed) as info:
                wait_on(sm, logs, NAME, Deps(clock=clock.now, sleep=clock.sleep), poll_s=30)
    assert info.value.fields["diagnosis"] == "container-crashed"
    assert clock.sleeps == []  # the first poll already saw it


HANDLED_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/site-packages/some_plugin/__init__.py", line 12, in <module>',
    "ModuleNotFoundError: No module named 'optional_dependency'",
    "INFO 12-02 17:05:01 [api_server.py:1024] Starting vLLM API server 0 on http://0.0.0.0:8080",
]


def test_a_handled_traceback_is_a_warning_not_a_failed_deploy() -> None:
    events = [LogEvent(timestamp_s=0, message=line) for line in HANDLED_TRACEBACK]
    found = diagnose(state(EndpointStatus.CREATING, 5), now_s=0, log_group_exists=True, events=events)
    assert [(d.check, d.status) for d in found] == [("traceback-in-log", Status.WARN)]


def test_wait_goes_on_past_a_handled_traceback_to_in_service() -> None:
    clock = ScriptedClock()
    sm = boto3.client("sagemaker", region_name=REGION)
    progress = Lines()
    with mock_aws():
        logs = boto3.client("logs", region_name=REGION)
        with Stubber(sm) as stub:
            stub.add_response("describe_endpoint", described("Creating"), {"EndpointName": NAME})
            stub.add_response("describe_endpoint", described("InService"), {"EndpointName": NAME})
            put_logs(logs, HANDLED_TRACEBACK, START.timestamp())
            final = wait_on(sm, logs, NAME, Deps(clock=clock.now, sleep=clock.sleep, progress=progress), poll_s=30)
    assert final.status is EndpointStatus.IN_SERVICE
    assert any("traceback" in line for line in progress)
