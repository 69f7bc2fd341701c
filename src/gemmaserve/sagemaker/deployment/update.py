"""Update a live endpoint blue/green: plan (pure), then new Model and EndpointConfig, alarms, UpdateEndpoint, gate.

SageMaker's deployment guardrails do the traffic shifting and the rollback
(https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-blue-green.html): ``UpdateEndpoint``
with ``DeploymentConfig.BlueGreenUpdatePolicy`` provisions the new (green) fleet beside the old (blue) one,
shifts traffic CANARY / LINEAR / ALL_AT_ONCE with a baking period (``WaitIntervalInSeconds``) after each
step, and rolls back to the old fleet when an alarm of ``AutoRollbackConfiguration`` goes to ALARM during
a bake. gemmaserve creates those alarms on the endpoint's own metrics (``AWS/SageMaker`` namespace,
dimensions EndpointName and VariantName: https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html)
and one more, the gate's: no metric ever feeds it; gemmaserve sets it to ALARM (``SetAlarmState``) when the
quality and speed gate (:mod:`.update_gate`) finds the new variant worse, so SageMaker's own rollback fires.
Should the update finish on the new config all the same, gemmaserve updates back to the old config itself.

A stop (Ctrl-C, SIGTERM, SIGHUP, a cancelled MCP call) before ``UpdateEndpoint`` deletes what this run
made; after it, the gate alarm is set to ALARM so SageMaker rolls back, and the report lists what is left.
The endpoint keeps serving the old variant throughout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from gemmaserve.cost import PriceLookup, catalog_price
from gemmaserve.errors import AwsError, DeployInterrupted, GemmaserveError, UsageError
from gemmaserve.progress import Cancelled, CancelToken, ProgressCallback, ProgressEvent, check, report
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import Deps, call
from gemmaserve.sagemaker.deployment.endpoint import DeploySpec, PlannedCall, plan_deploy
from gemmaserve.sagemaker.deployment.update_gate import GateDecision, Verdict
from gemmaserve.sagemaker.operations.teardown import EntryState, Journal, signal_name, stop_signals_interrupt
from gemmaserve.sagemaker.spec.container import CREATED_KEY, OWNER_KEY, tags_to_dict, validate_name

# The runtime's own limit on one answer: a container must answer InvokeEndpoint within 60 s
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html). A variant whose
# slowest answer in a minute took that long is failing requests; ModelLatency is in microseconds (same page as
# the metrics above).
LATENCY_ALARM_US = 60_000_000
ALARM_PERIOD_S = 60  # CloudWatch's standard resolution for AWS/SageMaker endpoint metrics (1 minute)
GATE_NAMESPACE = "gemmaserve"
GATE_METRIC = "UpdateGate"
# UpdateEndpoint's bounds (botocore sagemaker service-2.json: MaximumExecutionTimeoutInSeconds 600..28800,
# WaitIntervalInSeconds and TerminationWaitInSeconds 0..3600).
MIN_EXECUTION_S, MAX_EXECUTION_S = 600, 28800


class ShiftMode(StrEnum):
    CANARY = "CANARY"
    LINEAR = "LINEAR"
    ALL_AT_ONCE = "ALL_AT_ONCE"


class UpdatePolicy(BaseModel):
    mode: ShiftMode
    percent: int | None  # CanarySize / LinearStepSize as CAPACITY_PERCENT of the new fleet
    bake_s: int
    termination_wait_s: int
    max_execution_s: int
    max_slowdown: float  # a fraction: 0.10


class UpdatePlan(BaseModel):
    endpoint_name: str
    region: str
    model_name: str
    config_name: str
    variant_name: str
    alarm_names: list[str]
    gate_alarm: str
    policy: UpdatePolicy
    calls: list[PlannedCall]
    usd_per_hour: float | None  # the new fleet
    gate: str  # what the gate measures, in words

    def masked_calls(self) -> list[PlannedCall]:
        return [planned.masked() for planned in self.calls]


class UpdateOutcome(StrEnum):
    PLANNED = "planned"  # dry run
    UPDATED = "updated"
    ROLLED_BACK = "rolled-back"


class UpdateResult(ActionResult):
    dry_run: bool
    plan: UpdatePlan
    outcome: UpdateOutcome
    old_config: str | None = None
    old_usd_per_hour: float | None = None
    extra_usd_per_hour: float | None = None  # the new fleet, billed beside the old one while it bakes
    gate: GateDecision | None = None
    rollback: str | None = None  # how it went back, and why
    created: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    # This run's resources still there, with ``commands`` to remove them
    remaining: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)

    def succeeded(self) -> bool:
        """Not ok when the update went back to the old config."""
        return self.outcome is not UpdateOutcome.ROLLED_BACK


def _suffix(now: datetime) -> str:
    """Five base-36 characters from the second: new names beside the old ones, and still within 63 characters."""
    value = int(now.timestamp()) % 36**5
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    for _ in range(5):
        value, rest = divmod(value, 36)
        out = digits[rest] + out
    return out


def _alarm(
    name: str, namespace: str, metric: str, statistic: str, threshold: float, dims: list[dict[str, str]]
) -> PlannedCall:
    return PlannedCall(
        service="cloudwatch",
        operation="PutMetricAlarm",
        params={
            "AlarmName": name,
            "AlarmDescription": "gemmaserve sagemaker update: rolls the update back when in ALARM",
            "Namespace": namespace,
            "MetricName": metric,
            "Dimensions": dims,
            "Statistic": statistic,
            "Period": ALARM_PERIOD_S,
            "EvaluationPeriods": 1,
            "Threshold": threshold,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "TreatMissingData": "notBreaching",  # no traffic yet is no failure
        },
    )


def plan_update(
    spec: DeploySpec, policy: UpdatePolicy, *, region: str, now: datetime, price_lookup: PriceLookup = catalog_price
) -> UpdatePlan:
    """The calls an update makes (no AWS call): the deploy's Model and EndpointConfig under new names, alarms,
    then UpdateEndpoint with the blue/green policy naming those alarms."""
    deploy = plan_deploy(spec, region=region, now=now, price_lookup=price_lookup)
    name, stamp = spec.endpoint_name, _suffix(now)
    model_name = validate_name(f"{name}-m{stamp}", kind="model")
    config_name = validate_name(f"{name}-c{stamp}", kind="endpoint config")
    variant = validate_name(f"update-{stamp}", kind="variant")
    create_model, create_config = (planned.model_copy(deep=True) for planned in deploy.calls[:2])
    create_model.params["ModelName"] = model_name
    create_config.params["EndpointConfigName"] = config_name
    for production in create_config.params["ProductionVariants"]:
        production["ModelName"], production["VariantName"] = model_name, variant
    dims = [{"Name": "EndpointName", "Value": name}, {"Name": "VariantName", "Value": variant}]
    alarm_base = f"gemmaserve-{name}-{stamp}"
    alarms = [
        _alarm(f"{alarm_base}-5xx", "AWS/SageMaker", "Invocation5XXErrors", "Sum", 1, dims),
        _alarm(f"{alarm_base}-latency", "AWS/SageMaker", "ModelLatency", "Maximum", LATENCY_ALARM_US, dims),
        _alarm(
            f"{alarm_base}-gate", GATE_NAMESPACE, GATE_METRIC, "Maximum", 1, [{"Name": "EndpointName", "Value": name}]
        ),
    ]
    routing: dict[str, Any] = {"Type": policy.mode.value, "WaitIntervalInSeconds": policy.bake_s}
    if policy.mode is ShiftMode.CANARY:
        routing["CanarySize"] = {"Type": "CAPACITY_PERCENT", "Value": policy.percent}
    elif policy.mode is ShiftMode.LINEAR:
        routing["LinearStepSize"] = {"Type": "CAPACITY_PERCENT", "Value": policy.percent}
    update = PlannedCall(
        service="sagemaker",
        operation="UpdateEndpoint",
        params={
            "EndpointName": name,
            "EndpointConfigName": config_name,
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": routing,
                    "TerminationWaitInSeconds": policy.termination_wait_s,
                    "MaximumExecutionTimeoutInSeconds": policy.max_execution_s,
                },
                "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": a.params["AlarmName"]} for a in alarms]},
            },
        },
    )
    gate = (
        f"during the first bake: A-B-A (old {variant} old) with TargetVariant, decode rate by differencing "
        f"short and long replies, the 40 questions paired (McNemar exact); rolls back on worse answers beyond "
        f"the detectable gap or a decode rate more than {policy.max_slowdown:.0%} lower"
    )
    return UpdatePlan(
        endpoint_name=name,
        region=region,
        model_name=model_name,
        config_name=config_name,
        variant_name=variant,
        alarm_names=[a.params["AlarmName"] for a in alarms],
        gate_alarm=alarms[-1].params["AlarmName"],
        policy=policy,
        calls=[create_model, create_config, *alarms, update],
        usd_per_hour=deploy.usd_per_hour,
        gate=gate,
    )


GateRunner = Callable[[str, str], GateDecision]  # (old variant, new variant) → verdict


@dataclass(frozen=True)
class UpdateDeps(Deps):
    """The seams of a live update (:class:`~gemmaserve.sagemaker.aws.Deps`: clients, time, progress, cancel)
    and its own: the gate's measurement (None: no gate, only SageMaker's own alarms), poll and timeout."""

    gate: GateRunner | None = None
    poll_s: float = 30.0
    timeout_s: float = 3600.0


class _Run:
    """What this run made so far, journaled like a deploy's resources."""

    def __init__(self, plan: UpdatePlan) -> None:
        self.plan = plan
        self.journal = Journal()
        self.entries: dict[str, str] = {}
        self.created: list[str] = []  # "model:NAME", "endpoint-config:NAME", "alarm:NAME"
        self.update_sent = False
        self.in_flight: str | None = None  # the call sent whose answer had not come when the run stopped

    def sending(self, kind: str, name: str, tags: dict[str, str]) -> None:
        if kind in ("model", "endpoint-config"):
            self.entries[f"{kind}:{name}"] = self.journal.sending(
                region=self.plan.region,
                kind=kind,
                name=name,
                owner=tags.get(OWNER_KEY),
                created_tag=tags.get(CREATED_KEY),
            )

    def mark(self, key: str, state: EntryState) -> None:
        if key in self.entries:
            self.journal.mark(self.entries[key], state)


def _say(progress: ProgressCallback | None, phase: str, message: str) -> None:
    report(progress, ProgressEvent(phase, message))


def _described(sm: Any, plan: UpdatePlan) -> dict[str, Any]:
    return dict(call(plan.region, sm.describe_endpoint, EndpointName=plan.endpoint_name))


def _variants(described: dict[str, Any]) -> list[str]:
    return [str(v.get("VariantName")) for v in described.get("ProductionVariants") or []]


def _baking(described: dict[str, Any], variant: str) -> bool:
    """Whether the new variant is baking (it takes traffic): PendingDeploymentSummary's VariantStatus."""
    pending = described.get("PendingDeploymentSummary") or {}
    for production in pending.get("ProductionVariants") or []:
        if production.get("VariantName") == variant:
            return any(s.get("Status") == "Baking" for s in production.get("VariantStatus") or [])
    return False


def execute_update(plan: UpdatePlan, deps: UpdateDeps) -> UpdateResult:
    """Create the new variant's resources, start the blue/green update, gate it during the bake, follow it to
    the end; raise :class:`~gemmaserve.errors.UpdateRolledBack` when it went back, saying why."""
    from gemmaserve.errors import UpdateRolledBack

    sm, cw = deps.clients("sagemaker", plan.region), deps.clients("cloudwatch", plan.region)
    before = _described(sm, plan)
    if before.get("EndpointStatus") != "InService":
        raise UsageError(
            f"Endpoint {plan.endpoint_name} is {before.get('EndpointStatus')}, not InService: nothing was created.",
            hint=f"Wait for it first: gemmaserve sagemaker wait {plan.endpoint_name} --region {plan.region}",
        )
    old_config = str(before["EndpointConfigName"])
    old_variants = _variants(before)
    result = UpdateResult(dry_run=False, plan=plan, outcome=UpdateOutcome.UPDATED, old_config=old_config)
    run = _Run(plan)
    methods = {
        "CreateModel": sm.create_model,
        "CreateEndpointConfig": sm.create_endpoint_config,
        "PutMetricAlarm": cw.put_metric_alarm,
        "UpdateEndpoint": sm.update_endpoint,
    }
    try:
        with stop_signals_interrupt():
            for planned in plan.calls:
                check(deps.cancel)
                key = _key(planned)
                kind, name = key.split(":", 1)
                run.sending(kind, name, tags_to_dict(planned.params.get("Tags", [])))
                run.in_flight = key  # its answer not yet in: SageMaker may act on it all the same
                if planned.operation == "UpdateEndpoint":
                    run.update_sent = True  # in flight counts: the endpoint may be updating
                call(plan.region, methods[planned.operation], **planned.params)
                run.in_flight = None
                if planned.operation != "UpdateEndpoint":
                    run.created.append(key)
                _say(deps.progress, "create", f"{planned.operation} {key} in {plan.region}")
            final = _follow(sm, cw, plan, deps, result, old_variants[0] if old_variants else "AllTraffic")
    except BaseException as exc:
        _after_stop(sm, cw, plan, run, result, exc)
        raise
    result.created = list(run.created)
    if final.get("EndpointConfigName") == plan.config_name and (result.gate is None or result.gate.passed):
        for key in run.created:
            run.mark(key, EntryState.DONE)
        _delete_alarms(cw, plan, result)
        result.commands = [f"gemmaserve sagemaker cleanup --orphans --region {plan.region}"]
        _say(
            deps.progress,
            "done",
            f"{plan.endpoint_name} serves {plan.config_name}; the old config {old_config} "
            "and its model are unused now (cleanup --orphans removes them)",
        )
        return result
    # Back on the old config: SageMaker rolled back (an alarm, a failed health check) or gemmaserve did.
    result.outcome = UpdateOutcome.ROLLED_BACK
    if result.rollback is None:
        reason = final.get("FailureReason") or "SageMaker rolled the update back (an alarm or a failed health check)"
        result.rollback = f"The update did not complete: {reason}"
    _remove_new(sm, cw, plan, run, result)
    raise UpdateRolledBack(
        f"{plan.endpoint_name} serves the old config {old_config} again. {result.rollback}. "
        f"Deleted: {', '.join(result.deleted) or 'nothing'}; left: {', '.join(result.remaining) or 'nothing'}.",
        hint="Fix the new variant (see gemmaserve sagemaker logs) and update again; nothing of the new variant bills.",
        result=result.model_dump(mode="json"),
    )


def _key(planned: PlannedCall) -> str:
    params = planned.params
    if planned.operation == "CreateModel":
        return f"model:{params['ModelName']}"
    if planned.operation == "CreateEndpointConfig":
        return f"endpoint-config:{params['EndpointConfigName']}"
    if planned.operation == "PutMetricAlarm":
        return f"alarm:{params['AlarmName']}"
    return f"endpoint:{params['EndpointName']}"


def _follow(
    sm: Any, cw: Any, plan: UpdatePlan, deps: UpdateDeps, result: UpdateResult, old_variant: str
) -> dict[str, Any]:
    """Poll until the update ends; run the gate once when the new variant bakes; trip the gate alarm on a fail."""
    started = deps.now()
    gated = False
    while True:
        check(deps.cancel)
        described = _described(sm, plan)
        status = described.get("EndpointStatus")
        if status != "Updating":
            on_new = status == "InService" and described.get("EndpointConfigName") == plan.config_name
            if on_new and deps.gate is not None and result.gate is None:
                # The update ended before the new variant was seen baking: nothing was measured, so no pass.
                result.gate = GateDecision(
                    verdict=Verdict.UNKNOWN,
                    reasons=["the update finished before the new variant was seen baking: old and new not measured"],
                )
                result.rollback = f"The gate's verdict is unknown: {result.gate.reasons[0]}"
            if on_new and result.gate is not None and not result.gate.passed:
                # The rollback alarm came too late (the update had finished): go back to the old config ourselves.
                _say(deps.progress, "rollback", f"updating {plan.endpoint_name} back to {result.old_config}")
                call(
                    plan.region,
                    sm.update_endpoint,
                    EndpointName=plan.endpoint_name,
                    EndpointConfigName=result.old_config,
                )
                result.rollback = (
                    result.rollback or ""
                ) + " (SageMaker had finished the update; gemmaserve updated back)"
                deps.real_sleep()(deps.poll_s)
                continue
            if status != "InService":
                raise AwsError(
                    f"Endpoint {plan.endpoint_name} is {status} after the update: {described.get('FailureReason')}",
                    region=plan.region,
                )
            return described
        if not gated and deps.gate is not None and _baking(described, plan.variant_name):
            gated = True
            _say(deps.progress, "gate", f"measuring {old_variant} / {plan.variant_name} / {old_variant}")
            decision = deps.gate(old_variant, plan.variant_name)
            result.gate = decision
            if not decision.passed:
                why = "; ".join(decision.reasons)
                result.rollback = f"The gate's verdict is {decision.verdict.value}: {why}"
                _say(deps.progress, "rollback", result.rollback)
                _trip(cw, plan, result.rollback)
        if (deps.now() - started).total_seconds() > deps.timeout_s:
            raise AwsError(
                f"The update of {plan.endpoint_name} did not finish within {deps.timeout_s:.0f} s.",
                region=plan.region,
            )
        deps.real_sleep()(deps.poll_s)


def _trip(cw: Any, plan: UpdatePlan, reason: str) -> None:
    call(
        plan.region,
        cw.set_alarm_state,
        AlarmName=plan.gate_alarm,
        StateValue="ALARM",
        StateReason=reason[:1023],  # SetAlarmState's StateReason is at most 1023 characters (service-2.json)
        StateReasonData=json.dumps({"endpoint": plan.endpoint_name, "variant": plan.variant_name}),
    )


def _delete_alarms(cw: Any, plan: UpdatePlan, result: UpdateResult) -> None:
    try:
        call(plan.region, cw.delete_alarms, AlarmNames=plan.alarm_names)
        result.deleted += [f"alarm:{name}" for name in plan.alarm_names]
    except AwsError:
        result.remaining += [f"alarm:{name}" for name in plan.alarm_names]
        result.commands.append(
            f"aws cloudwatch delete-alarms --region {plan.region} --alarm-names " + " ".join(plan.alarm_names)
        )


def _remove_new(sm: Any, cw: Any, plan: UpdatePlan, run: _Run, result: UpdateResult) -> None:
    """Delete this run's model and config (the endpoint no longer uses them) and its alarms."""
    for key in reversed(run.created):
        kind, name = key.split(":", 1)
        if kind == "alarm":
            continue
        method = sm.delete_endpoint_config if kind == "endpoint-config" else sm.delete_model
        field = "EndpointConfigName" if kind == "endpoint-config" else "ModelName"
        try:
            call(plan.region, method, **{field: name})
            result.deleted.append(key)
            run.mark(key, EntryState.DELETED)
        except AwsError:
            result.remaining.append(key)
            run.mark(key, EntryState.LEFT)
    if any(key.startswith("alarm:") for key in run.created):
        _delete_alarms(cw, plan, result)
    if any(not key.startswith("alarm:") for key in result.remaining):
        result.commands.append(f"gemmaserve sagemaker cleanup --orphans --region {plan.region}")


def _after_stop(sm: Any, cw: Any, plan: UpdatePlan, run: _Run, result: UpdateResult, exc: BaseException) -> None:
    """A stop or a failure: before UpdateEndpoint delete what was made; after it, trip the rollback and say what is left."""
    from gemmaserve.errors import UpdateRolledBack

    if isinstance(exc, UpdateRolledBack):
        return
    result.created = list(run.created)
    if not run.update_sent:
        _remove_new(sm, cw, plan, run, result)
        verdict = "nothing was changed on the endpoint"
        if run.in_flight is not None:
            # A refused Create made nothing; one whose answer never came may have: SageMaker acts on what it got.
            code = exc.fields.get("aws_error_code") if isinstance(exc, GemmaserveError) else None
            if not code:
                result.remaining.append(f"{run.in_flight} (sent when the run stopped: it may exist)")
                run.mark(run.in_flight, EntryState.UNCONFIRMED)
                result.commands.append(f"gemmaserve sagemaker cleanup --journal --region {plan.region}")
            else:
                run.mark(run.in_flight, EntryState.ABSENT)
    else:
        try:
            _trip(
                cw,
                plan,
                f"gemmaserve sagemaker update stopped ({signal_name(exc) if isinstance(exc, KeyboardInterrupt) else type(exc).__name__})",
            )
            verdict = (
                f"the gate alarm {plan.gate_alarm} is in ALARM, so SageMaker rolls the update back to "
                f"{result.old_config}; the old variant serves throughout"
            )
        except AwsError as error:
            verdict = f"the rollback alarm could not be set ({error.message}): look at the endpoint now"
        result.remaining = list(run.created)
        result.commands = [
            f"gemmaserve sagemaker status {plan.endpoint_name} --region {plan.region}",
            f"gemmaserve sagemaker cleanup --orphans --region {plan.region}",
            f"aws cloudwatch delete-alarms --region {plan.region} --alarm-names " + " ".join(plan.alarm_names),
        ]
        for key in run.created:
            run.mark(key, EntryState.LEFT)
    detail = f"{verdict}. Deleted: {', '.join(result.deleted) or 'nothing'}. Left: {', '.join(result.remaining) or 'nothing'}."
    fields = {"update": result.model_dump(mode="json")}
    if isinstance(exc, Cancelled):
        exc.args = (f"{exc.args[0] if exc.args else 'Cancelled'}: {detail}",)
        return
    if isinstance(exc, KeyboardInterrupt):
        raise DeployInterrupted(
            f"Update of {plan.endpoint_name} stopped by {signal_name(exc)}: {detail}",
            hint=" ; ".join(result.commands) or None,
            **fields,
        ) from exc
    if isinstance(exc, GemmaserveError):
        exc.fields.update(fields)
        exc.message = f"{exc.message} ({detail})"
        exc.args = (exc.message,)


SHORT_TOKENS, LONG_TOKENS = 16, 512  # the bench's decode lengths (bench/requests.py decode_short/decode_long)
QUESTION_SET = "published-40"


def measure_gate(
    runtime: Any,
    plan: UpdatePlan,
    *,
    repeats: int = 3,
    clock: Callable[[], float] | None = None,
    cancel: CancelToken | None = None,
) -> GateRunner:
    """The gate's measurement through InvokeEndpoint's TargetVariant: A-B-A decode timings, then the questions.

    A reply that came from another variant than the one aimed at, or that is not exactly the asked length,
    is not a timing (the gate then says unknown): the measurement never credits one variant with another's.
    """
    import time

    from gemmaserve.measurements.questions import get_question_set, score_answer
    from gemmaserve.sagemaker.deployment.update_gate import DecodeSample, GateInput, decide

    tick = clock or time.perf_counter
    questions = get_question_set(QUESTION_SET)

    def ask(variant: str, prompt: str, max_tokens: int, ignore_eos: bool) -> tuple[dict[str, Any], float] | None:
        body: dict[str, Any] = {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        if ignore_eos:
            body["ignore_eos"] = True
        check(cancel)  # a stop during the measurement: the caller rolls back
        started = tick()
        try:
            answer = call(
                plan.region,
                runtime.invoke_endpoint,
                EndpointName=plan.endpoint_name,
                TargetVariant=variant,
                Body=json.dumps(body).encode(),
                ContentType="application/json",
                Accept="application/json",
            )
            document = json.loads(answer["Body"].read())
        except (AwsError, ValueError):
            return None
        wall = tick() - started
        if answer.get("InvokedProductionVariant") != variant:
            return None
        return document, wall

    def timings(variant: str) -> DecodeSample:
        sample = DecodeSample(short_s=[], long_s=[])
        for _ in range(repeats):
            for tokens, into in ((SHORT_TOKENS, sample.short_s), (LONG_TOKENS, sample.long_s)):
                got = ask(variant, "Count upwards from one, one number per line.", tokens, True)
                if got is not None and (got[0].get("usage") or {}).get("completion_tokens") == tokens:
                    into.append(got[1])
        return sample

    def answers(variant: str) -> list[bool | None]:
        flags: list[bool | None] = []
        for question in questions.questions:
            got = ask(variant, question.prompt, questions.max_tokens, False)
            if got is None:
                flags.append(None)
                continue
            choice = (got[0].get("choices") or [{}])[0]
            flags.append(score_answer(question, (choice.get("message") or {}).get("content")).correct)
        return flags

    def run(old: str, new: str) -> GateDecision:
        first, second, third = timings(old), timings(new), timings(old)
        return decide(
            GateInput(
                old_first=first,
                new=second,
                old_again=third,
                short_tokens=SHORT_TOKENS,
                long_tokens=LONG_TOKENS,
                old_correct=answers(old),
                new_correct=answers(new),
                max_slowdown=plan.policy.max_slowdown,
            )
        )

    return run
