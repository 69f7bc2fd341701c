"""What moto lacks for a blue/green update, spoken in SageMaker's own wire format, in front of moto's server.

moto (5.x) has no ``UpdateEndpoint`` and no runtime that answers as a chosen variant. This proxy (a
:class:`~tests.support.sagemaker.moto_proxy.SageMakerProxy`) adds them, everything else going to moto unchanged:

- ``UpdateEndpoint`` (JSON 1.1, ``X-Amz-Target: SageMaker.UpdateEndpoint``; its shape from botocore's
  sagemaker service-2.json) starts an update: the next ``DescribeEndpoint`` answers ``Updating`` with a
  ``PendingDeploymentSummary`` whose new variant is ``Baking``; after ``bake_reads`` reads the update ends
  on the new config, or on the old one with a ``FailureReason`` when the new variant fails its health check
  (``fail_health``) or when one of the rollback alarms (read from moto's CloudWatch, as SageMaker would) is
  in ALARM.
- ``refuse``: an operation answered with SageMaker's ``ValidationException`` instead of reaching moto.
- ``POST /endpoints/NAME/invocations`` (rest-json, ``X-Amzn-SageMaker-Target-Variant``; the answer's
  ``x-Amzn-Invoked-Production-Variant``) answers as that variant: its decode rate advances ``clock`` by
  the reply's duration (no wall clock), and it answers the published questions right or wrong as told.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import boto3

from gemmaserve.measurements.questions import get_question_set
from tests.support.sagemaker.moto_proxy import SageMakerProxy, answer_with


@dataclass
class VariantBehaviour:
    rate_tokens_per_s: float = 50.0
    overhead_s: float = 0.2
    wrong_answers: int = 0  # the first this many questions are answered wrong


@dataclass
class FakeClock:
    value: float = 0.0

    def __call__(self) -> float:
        return self.value


@dataclass
class Update:
    old_config: str
    new_config: str
    alarms: list[str]
    reads: int = 0


@dataclass
class Scenario:
    bake_reads: int = 3
    fail_health: bool = False
    finish_despite_alarm: bool = False  # SageMaker finished before it saw the alarm
    behaviour: dict[str, VariantBehaviour] = field(default_factory=dict)


_INVOKE = re.compile(r"^/endpoints/([^/]+)/invocations$")


class UpdateFake(SageMakerProxy):
    def __init__(self, moto_url: str) -> None:
        super().__init__(moto_url)
        self.scenario = Scenario()
        self.clock = FakeClock()
        self.updates: dict[str, Update] = {}
        self.serving: dict[str, str] = {}  # endpoint → config after an update ended
        self.variant_of: dict[str, str] = {}  # config → its variant name
        self.invocations: list[str] = []  # the variant each invocation was aimed at
        self.failure: dict[str, str | None] = {}  # endpoint → FailureReason after an update ended
        self.refuse: dict[str, str] = {}  # operation → the ValidationException message it is answered with
        self._cw = boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=moto_url)
        self._sm = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=moto_url)

    def _serve(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        match = _INVOKE.match(handler.path.split("?", 1)[0])
        if match:
            self._invoke(handler, match.group(1), body)
            return
        target = handler.headers.get("X-Amz-Target", "")
        operation = target.rsplit(".", 1)[-1] if target.startswith("SageMaker.") else ""
        if operation in self.refuse:
            answer_with(handler, 400, _error("ValidationException", self.refuse[operation]))
            return
        if operation == "UpdateEndpoint":
            self._update(handler, json.loads(body))
            return
        if operation == "DescribeEndpoint":
            self._describe(handler, body)
            return
        super()._serve(handler, body)

    # -- control plane --

    def _update(self, handler: BaseHTTPRequestHandler, request: dict[str, Any]) -> None:
        with self._lock:
            self.calls.append(("UpdateEndpoint", request))
        name, config = request["EndpointName"], request["EndpointConfigName"]
        current = self._current_config(name)
        if current is None:
            answer_with(handler, 400, _error("ValidationException", f'Could not find endpoint "{name}".'))
            return
        if name in self.updates:
            answer_with(handler, 400, _error("ValidationException", f'Cannot update in-progress endpoint "{name}".'))
            return
        try:
            described = self._sm.describe_endpoint_config(EndpointConfigName=config)
        except Exception:
            answer_with(handler, 400, _error("ValidationException", f'Could not find endpoint config "{config}".'))
            return
        self.variant_of[config] = described["ProductionVariants"][0]["VariantName"]
        alarms = [
            a["AlarmName"]
            for a in request.get("DeploymentConfig", {}).get("AutoRollbackConfiguration", {}).get("Alarms", [])
        ]
        self.updates[name] = Update(old_config=current, new_config=config, alarms=alarms)
        arn = f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{name}"
        answer_with(handler, 200, json.dumps({"EndpointArn": arn}).encode())

    def _current_config(self, name: str) -> str | None:
        if name in self.serving:
            return self.serving[name]
        try:
            return str(self._sm.describe_endpoint(EndpointName=name)["EndpointConfigName"])
        except Exception:
            return None

    def _describe(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        request = json.loads(body)
        with self._lock:
            self.calls.append(("DescribeEndpoint", request))
        status, headers, answer = self._forward(handler, body)
        if status != 200:
            answer_with(handler, status, answer, headers)
            return
        document = json.loads(self._as_creating("DescribeEndpoint", answer))
        name = request["EndpointName"]
        update = self.updates.get(name)
        if update is not None:
            update.reads += 1
            alarmed = self._in_alarm(update.alarms)
            if alarmed and not self.scenario.finish_despite_alarm:
                self._end(name, update, update.old_config, f"Rolled back: alarm {alarmed} is in ALARM.")
            elif update.reads > self.scenario.bake_reads:
                if self.scenario.fail_health:
                    self._end(
                        name,
                        update,
                        update.old_config,
                        "The primary container for production variant did not pass the ping health check. "
                        "Rolled back to the previous endpoint configuration.",
                    )
                else:
                    self._end(name, update, update.new_config, None)
            else:
                document["EndpointStatus"] = "Updating"
                document["EndpointConfigName"] = update.old_config
                document["PendingDeploymentSummary"] = {
                    "EndpointConfigName": update.new_config,
                    "ProductionVariants": [
                        {
                            "VariantName": self.variant_of[update.new_config],
                            "VariantStatus": [{"Status": "Baking"}],
                        }
                    ],
                }
        if name in self.serving and name not in self.updates:
            config = self.serving[name]
            document["EndpointConfigName"] = config
            for production in document.get("ProductionVariants", []):
                production["VariantName"] = self.variant_of.get(config, production["VariantName"])
            if self.failure.get(name):
                document["FailureReason"] = self.failure[name]
        answer_with(handler, 200, json.dumps(document).encode(), headers)

    def _end(self, name: str, update: Update, config: str, reason: str | None) -> None:
        del self.updates[name]
        self.serving[name] = config
        self.failure[name] = reason

    def _in_alarm(self, names: list[str]) -> str | None:
        if not names:
            return None
        for alarm in self._cw.describe_alarms(AlarmNames=names)["MetricAlarms"]:
            if alarm["StateValue"] == "ALARM":
                return str(alarm["AlarmName"])
        return None

    # -- runtime --

    def _invoke(self, handler: BaseHTTPRequestHandler, name: str, body: bytes) -> None:
        variant = handler.headers.get("X-Amzn-SageMaker-Target-Variant") or ""
        self.invocations.append(variant)
        behaviour = self.scenario.behaviour.get(variant)
        if behaviour is None:
            message = f"Variant {variant!r} not found for endpoint {name}."
            answer_with(handler, 400, _error("ValidationError", message))
            return
        request = json.loads(body)
        tokens = int(request["max_tokens"]) if request.get("ignore_eos") else 12
        self.clock.value += behaviour.overhead_s + tokens / behaviour.rate_tokens_per_s
        text = "1\n2\n3"
        prompt = request["messages"][0]["content"]
        questions = get_question_set("published-40").questions
        for index, question in enumerate(questions):
            if question.prompt == prompt:
                text = f"Answer: {'nowhere' if index < behaviour.wrong_answers else question.expected}"
        answer = json.dumps(
            {
                "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens},
            }
        ).encode()
        answer_with(
            handler,
            200,
            answer,
            {"Content-Type": "application/json", "x-Amzn-Invoked-Production-Variant": variant},
        )


def _error(kind: str, message: str) -> bytes:
    return json.dumps({"__type": kind, "Message": message}).encode()
