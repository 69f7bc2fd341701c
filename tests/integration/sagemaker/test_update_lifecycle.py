"""A blue/green update of a live endpoint: moto's server for what it has, the update fake for the rest."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from gemmaserve.errors import AwsError, DeployInterrupted, UpdateRolledBack, UsageError
from gemmaserve.progress import Cancelled, CancelToken
from gemmaserve.sagemaker.aws import Boto3ClientFactory, Deps
from gemmaserve.sagemaker.deployment.endpoint import execute_deploy, plan_deploy
from gemmaserve.sagemaker.deployment.update import (
    ShiftMode,
    UpdateDeps,
    UpdateOutcome,
    UpdatePlan,
    UpdatePolicy,
    execute_update,
    measure_gate,
    plan_update,
)
from gemmaserve.sagemaker.deployment.update_gate import Verdict
from gemmaserve.sagemaker.operations.teardown import EntryState, Journal
from tests.support.sagemaker.helpers import START, Lines, ScriptedClock, make_role, make_spec
from tests.support.sagemaker.update_fake import UpdateFake, VariantBehaviour

REGION = "us-east-1"
NAME = "gemma4-e2b-t4"
POLICY = UpdatePolicy(
    mode=ShiftMode.CANARY, percent=50, bake_s=600, termination_wait_s=0, max_execution_s=3600, max_slowdown=0.10
)


@pytest.fixture
def fake(moto_factory: Any, moto_server_url: str) -> Iterator[UpdateFake]:
    proxy = UpdateFake(moto_server_url)
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture
def live(fake: UpdateFake, moto_factory: Any) -> tuple[Boto3ClientFactory, UpdatePlan, ScriptedClock]:
    """An InService endpoint deployed as gemmaserve deploys it, and the plan of its update."""
    clients = Boto3ClientFactory(endpoint_url=fake.url)
    clock = ScriptedClock()
    spec = make_spec(make_role(moto_factory("iam", REGION)))
    execute_deploy(clients("sagemaker", REGION), plan_deploy(spec, region=REGION, now=START), Deps(clock=clock.now))
    clock.sleep(3600)
    plan = plan_update(spec, POLICY, region=REGION, now=clock.now())
    fake.scenario.behaviour = {"AllTraffic": VariantBehaviour(), plan.variant_name: VariantBehaviour()}
    return clients, plan, clock


def deps(
    clients: Boto3ClientFactory, plan: UpdatePlan, clock: ScriptedClock, fake: UpdateFake, **changes: Any
) -> UpdateDeps:
    values: dict[str, Any] = {
        "factory": clients,
        "gate": measure_gate(clients("sagemaker-runtime", REGION), plan, clock=fake.clock),
        "clock": clock.now,
        "sleep": clock.sleep,
        "progress": Lines(),
    }
    values.update(changes)
    return UpdateDeps(**values)


def alarms(moto_server_url: str, plan: UpdatePlan) -> dict[str, str]:
    cw = boto3.client("cloudwatch", region_name=REGION, endpoint_url=moto_server_url)
    return {a["AlarmName"]: a["StateValue"] for a in cw.describe_alarms(AlarmNames=plan.alarm_names)["MetricAlarms"]}


def serving(clients: Boto3ClientFactory) -> str:
    return str(clients("sagemaker", REGION).describe_endpoint(EndpointName=NAME)["EndpointConfigName"])


def test_a_good_update_ends_on_the_new_config_and_removes_its_alarms(
    fake: UpdateFake, live: Any, moto_server_url: str
) -> None:
    clients, plan, clock = live
    result = execute_update(plan, deps(clients, plan, clock, fake))
    assert result.outcome is UpdateOutcome.UPDATED and result.old_config == f"{NAME}-config"
    assert result.gate is not None and result.gate.verdict is Verdict.PASS
    assert serving(clients) == plan.config_name
    sent = [body for op, body in fake.calls if op == "UpdateEndpoint"]
    assert len(sent) == 1 and sent[0]["DeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"] == {
        "Type": "CANARY",
        "WaitIntervalInSeconds": 600,
        "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50},
    }
    assert [
        a["AlarmName"] for a in sent[0]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    ] == plan.alarm_names
    # A-B-A: old, new, old decode passes, then the questions on each.
    first_new = fake.invocations.index(plan.variant_name)
    assert set(fake.invocations[:first_new]) == {"AllTraffic"} and first_new == 6
    assert fake.invocations.count(plan.variant_name) == 6 + 40
    assert alarms(moto_server_url, plan) == {}  # deleted once the update finished
    assert [e.state for e in Journal().entries() if e.name in (plan.model_name, plan.config_name)] == [
        EntryState.DONE,
        EntryState.DONE,
    ]


def test_a_new_variant_failing_its_health_check_goes_back_and_says_why(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    fake.scenario.fail_health = True
    with pytest.raises(UpdateRolledBack, match="ping health check") as caught:
        execute_update(plan, deps(clients, plan, clock, fake, gate=None))
    assert serving(clients) == f"{NAME}-config"
    result = caught.value.fields["result"]
    assert result["outcome"] == "rolled-back"
    assert result["deleted"][:2] == [f"endpoint-config:{plan.config_name}", f"model:{plan.model_name}"]
    sm = clients("sagemaker", REGION)
    assert plan.config_name not in [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]]


def test_worse_answers_trip_the_gate_alarm_and_sagemaker_rolls_back(
    fake: UpdateFake, live: Any, moto_server_url: str
) -> None:
    clients, plan, clock = live
    fake.scenario.behaviour[plan.variant_name] = VariantBehaviour(wrong_answers=15)
    with pytest.raises(UpdateRolledBack, match="worse-answers") as caught:
        execute_update(plan, deps(clients, plan, clock, fake))
    assert "McNemar" in caught.value.message and "25/40 vs the old 40/40" in caught.value.message
    assert serving(clients) == f"{NAME}-config"
    set_state = [op for op, _ in fake.calls if op == "DescribeEndpoint"]
    assert set_state  # followed to the end
    assert len([op for op, _ in fake.calls if op == "UpdateEndpoint"]) == 1  # SageMaker's rollback, not ours


def test_a_slower_variant_is_rolled_back_with_the_numbers(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    fake.scenario.behaviour[plan.variant_name] = VariantBehaviour(rate_tokens_per_s=35.0)
    with pytest.raises(UpdateRolledBack, match="slower") as caught:
        execute_update(plan, deps(clients, plan, clock, fake))
    assert "35.0 tokens/s vs the old 50.0 (30% slower; at most 10% allowed)" in caught.value.message
    assert serving(clients) == f"{NAME}-config"


def test_when_sagemaker_finished_before_the_alarm_gemmaserve_updates_back(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    fake.scenario.finish_despite_alarm = True
    fake.scenario.behaviour[plan.variant_name] = VariantBehaviour(rate_tokens_per_s=20.0)
    with pytest.raises(UpdateRolledBack, match="gemmaserve updated back"):
        execute_update(plan, deps(clients, plan, clock, fake))
    back = [body for op, body in fake.calls if op == "UpdateEndpoint"][-1]
    assert back == {"EndpointName": NAME, "EndpointConfigName": f"{NAME}-config"}
    assert serving(clients) == f"{NAME}-config"


def test_an_unknown_gate_never_lets_the_update_through(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    del fake.scenario.behaviour[plan.variant_name]  # the new variant cannot be reached by TargetVariant
    with pytest.raises(UpdateRolledBack, match="unknown"):
        execute_update(plan, deps(clients, plan, clock, fake))
    assert serving(clients) == f"{NAME}-config"


class CancelAt:
    """A progress callback that cancels when the n-th event arrives (each event follows one call)."""

    def __init__(self, token: CancelToken, at: int) -> None:
        self.token, self.at, self.seen = token, at, 0

    def __call__(self, _event: Any) -> None:
        self.seen += 1
        if self.seen == self.at:
            self.token.cancel()


@pytest.mark.parametrize("step", [1, 2, 3, 4, 5])
def test_a_stop_before_update_endpoint_removes_what_was_made(
    fake: UpdateFake, live: Any, moto_server_url: str, step: int
) -> None:
    clients, plan, clock = live
    token = CancelToken()
    with pytest.raises(Cancelled) as caught:
        execute_update(plan, deps(clients, plan, clock, fake, cancel=token, progress=CancelAt(token, step)))
    assert "nothing was changed on the endpoint" in str(caught.value)
    assert not [op for op, _ in fake.calls if op == "UpdateEndpoint"]
    sm = clients("sagemaker", REGION)
    assert plan.config_name not in [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]]
    assert plan.model_name not in [m["ModelName"] for m in sm.list_models()["Models"]]
    assert alarms(moto_server_url, plan) == {}
    assert {e.state for e in Journal().entries() if e.name in (plan.model_name, plan.config_name)} <= {
        EntryState.DELETED
    }


def test_a_ctrl_c_during_the_bake_rolls_back_and_lists_what_is_left(
    fake: UpdateFake, live: Any, moto_server_url: str
) -> None:
    clients, plan, clock = live

    def interrupt(_old: str, _new: str) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(DeployInterrupted, match="SIGINT") as caught:
        execute_update(plan, deps(clients, plan, clock, fake, gate=interrupt))
    assert alarms(moto_server_url, plan)[plan.gate_alarm] == "ALARM"
    left = caught.value.fields["update"]["remaining"]
    assert f"model:{plan.model_name}" in left and f"endpoint-config:{plan.config_name}" in left
    assert "cleanup --orphans" in (caught.value.hint or "")
    # SageMaker's rollback (the fake reads the alarm as SageMaker does) leaves the old config serving.
    assert serving(clients) == f"{NAME}-config"


def test_an_endpoint_not_in_service_is_refused_before_anything_is_made(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    fake.creating(NAME)
    fake.calls.clear()
    with pytest.raises(UsageError, match="not InService"):
        execute_update(plan, deps(clients, plan, clock, fake))
    assert [op for op, _ in fake.calls if op.startswith("Create")] == []


def test_a_cancel_after_update_endpoint_rolls_back_and_keeps_the_old_variant_serving(
    fake: UpdateFake, live: Any, moto_server_url: str
) -> None:
    clients, plan, clock = live
    token = CancelToken()
    with pytest.raises(Cancelled) as caught:  # the 6th event follows UpdateEndpoint
        execute_update(plan, deps(clients, plan, clock, fake, cancel=token, progress=CancelAt(token, 6)))
    assert "SageMaker rolls the update back" in str(caught.value)
    assert f"Left: model:{plan.model_name}, endpoint-config:{plan.config_name}" in str(caught.value)
    assert alarms(moto_server_url, plan)[plan.gate_alarm] == "ALARM"
    assert serving(clients) == f"{NAME}-config"
    states = {e.name: e.state for e in Journal().entries() if e.name in (plan.model_name, plan.config_name)}
    assert states == {plan.model_name: EntryState.LEFT, plan.config_name: EntryState.LEFT}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_during_the_gate_rolls_back(
    fake: UpdateFake, live: Any, moto_server_url: str, signum: int
) -> None:
    clients, plan, clock = live
    measure = measure_gate(clients("sagemaker-runtime", REGION), plan, clock=fake.clock)

    def signalled(old: str, new: str) -> Any:
        os.kill(os.getpid(), signum)  # delivered to the main thread: the update's handler raises there
        return measure(old, new)

    with pytest.raises(DeployInterrupted, match=signal.Signals(signum).name):
        execute_update(plan, deps(clients, plan, clock, fake, gate=signalled))
    assert alarms(moto_server_url, plan)[plan.gate_alarm] == "ALARM"
    assert serving(clients) == f"{NAME}-config"


def test_a_cancel_during_the_measurement_stops_it_and_rolls_back(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    token = CancelToken()
    measure = measure_gate(clients("sagemaker-runtime", REGION), plan, clock=fake.clock, cancel=token)

    def cancelled_midway(old: str, new: str) -> Any:
        token.cancel()
        return measure(old, new)

    with pytest.raises(Cancelled, match="SageMaker rolls the update back"):
        execute_update(plan, deps(clients, plan, clock, fake, gate=cancelled_midway, cancel=token))
    assert fake.invocations == []  # not one request after the cancel
    assert serving(clients) == f"{NAME}-config"


def test_an_update_that_ends_before_the_gate_measured_goes_back(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    fake.scenario.bake_reads = 0  # the first read already shows the update done: never seen baking
    with pytest.raises(UpdateRolledBack, match="not measured"):
        execute_update(plan, deps(clients, plan, clock, fake))
    assert fake.invocations == []
    assert serving(clients) == f"{NAME}-config"


def test_a_ctrl_c_while_create_model_is_in_flight_says_it_may_exist(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    sm = clients("sagemaker", REGION)

    def interrupt(**_kwargs: Any) -> None:
        raise KeyboardInterrupt  # the request went out; its answer never came

    sm.meta.events.register("before-send.sagemaker.CreateModel", interrupt)
    try:
        with pytest.raises(DeployInterrupted, match="nothing was changed on the endpoint") as caught:
            execute_update(plan, deps(clients, plan, clock, fake))
    finally:
        sm.meta.events.unregister("before-send.sagemaker.CreateModel", interrupt)
    assert f"model:{plan.model_name} (sent when the run stopped: it may exist)" in caught.value.message
    assert "cleanup --journal" in (caught.value.hint or "")
    [entry] = [e for e in Journal().entries() if e.name == plan.model_name]
    assert entry.state is EntryState.UNCONFIRMED


def test_a_refused_create_leaves_nothing_and_says_why(fake: UpdateFake, live: Any) -> None:
    clients, plan, clock = live
    fake.refuse["CreateEndpointConfig"] = "The instance type ml.g4dn.xlarge is not supported in this account."
    with pytest.raises(AwsError, match="nothing was changed on the endpoint") as caught:
        execute_update(plan, deps(clients, plan, clock, fake))
    assert f"model:{plan.model_name}" in caught.value.fields["update"]["deleted"]
    assert not [op for op, _ in fake.calls if op == "UpdateEndpoint"]
