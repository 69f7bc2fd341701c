"""Ctrl-C, SIGTERM and SIGHUP during a deploy, against moto's HTTP server: nothing is left, and the report says so.

The interrupt is delivered from botocore's own event hooks on the real client, so it lands
exactly where a user's would: after the request reached the service but before its answer
was returned (``after-call``), or before the request was sent (``before-send``). Signals are
real: the hook sends them to this process with ``os.kill``.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from gemmaserve.errors import DeployInterrupted, EndpointFailed
from gemmaserve.progress import Cancelled, CancelToken, ProgressEvent
from gemmaserve.sagemaker import api
from gemmaserve.sagemaker.api import SageMakerSession
from gemmaserve.sagemaker.spec.requests import DeployRequest
from tests.support.sagemaker.helpers import Lines, ScriptedClock, make_role

REGION = "us-east-1"
NAME = "intr-e2b"


def _leftovers(sm: Any) -> dict[str, list[str]]:
    return {
        "endpoints": [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]],
        "configs": [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]],
        "models": [m["ModelName"] for m in sm.list_models()["Models"]],
    }


def _deploy(
    factory: Any,
    progress: Lines,
    *,
    cancel: CancelToken | None = None,
    on_progress: Any = None,
    **overrides: Any,
) -> api.DeployOutcome:
    clock = ScriptedClock()
    values: dict[str, Any] = {
        "model": "gemma-4-e2b",
        "encoding": "qat-w4a16",
        "instance": ["ml.g4dn.xlarge"],
        "regions": [REGION],
        "role_arn": make_role(factory("iam", REGION)),
        "endpoint_name": NAME,
        "skip_preflight": True,
        "list_prices": True,
    }
    values.update(overrides)
    request = DeployRequest(**values)
    session = SageMakerSession(
        factory=factory, progress=on_progress or progress, cancel=cancel, clock=clock.now, sleep=clock.sleep
    )
    return api.deploy(request, session)


def _interrupt_at(sm: Any, event: str, deliver: Any, times: int = 1, skip: int = 0) -> list[str]:
    fired: list[str] = []
    seen: list[str] = []

    def hook(**_: Any) -> None:
        seen.append(event)
        if len(seen) > skip and len(fired) < times:
            fired.append(event)
            deliver()

    sm.meta.events.register(event, hook)
    return fired


def _ctrl_c() -> None:
    raise KeyboardInterrupt


def _send(signum: int) -> Any:
    return lambda: os.kill(os.getpid(), signum)


@pytest.mark.parametrize("operation", ["CreateModel", "CreateEndpointConfig", "CreateEndpoint"])
@pytest.mark.parametrize("phase", ["after-call", "before-send"])
def test_ctrl_c_during_each_create_call_leaves_nothing(moto_factory: Any, operation: str, phase: str) -> None:
    sm = moto_factory("sagemaker", REGION)
    fired = _interrupt_at(sm, f"{phase}.sagemaker.{operation}", _ctrl_c)
    progress = Lines()
    with pytest.raises(DeployInterrupted) as caught:
        _deploy(moto_factory, progress)
    assert fired
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}
    error = caught.value
    assert error.exit_code == 130 and error.fields["remaining"] == [] and error.fields["region"] == REGION
    assert f"Teardown in {REGION}" in error.message and "still there: nothing" in error.message
    if phase == "after-call":  # the service made it before the interrupt landed: it is named as deleted
        label = {
            "CreateModel": "model:intr-e2b-model",
            "CreateEndpointConfig": "endpoint-config:intr-e2b-config",
            "CreateEndpoint": "endpoint:intr-e2b",
        }[operation]
        assert label in error.fields["deleted"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("operation", ["CreateEndpointConfig", "CreateEndpoint"])
def test_sigterm_and_sighup_tear_down_like_ctrl_c(moto_factory: Any, signum: int, operation: str) -> None:
    sm = moto_factory("sagemaker", REGION)
    _interrupt_at(sm, f"after-call.sagemaker.{operation}", _send(signum))
    progress = Lines()
    before = signal.getsignal(signum)
    with pytest.raises(DeployInterrupted) as caught:
        _deploy(moto_factory, progress)
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}
    assert caught.value.fields["signal"] == signal.Signals(signum).name
    assert signal.getsignal(signum) is before  # the handler is put back


def test_sighup_ignored_at_start_as_under_nohup_leaves_the_deploy_alone(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    fired = _interrupt_at(sm, "after-call.sagemaker.CreateEndpoint", _send(signal.SIGHUP))
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does before it starts the program
    try:
        outcome = _deploy(moto_factory, Lines())
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert fired and outcome.result is not None and outcome.result.created[-1] == "endpoint"
    assert _leftovers(sm)["endpoints"] == [NAME]


def test_signal_while_waiting_for_in_service_deletes_the_endpoint(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    _interrupt_at(sm, "after-call.sagemaker.DescribeEndpoint", _send(signal.SIGTERM), skip=1)
    with pytest.raises(DeployInterrupted) as caught:
        _deploy(moto_factory, Lines(), wait=True)
    assert _leftovers(sm)["endpoints"] == []
    assert "endpoint:intr-e2b" in caught.value.fields["deleted"]


def test_second_ctrl_c_during_teardown_is_reported_and_teardown_continues(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    _interrupt_at(sm, "after-call.sagemaker.CreateEndpoint", _ctrl_c)
    _interrupt_at(sm, "before-call.sagemaker.DeleteEndpoint", _send(signal.SIGINT))
    progress = Lines()
    with pytest.raises(DeployInterrupted):
        _deploy(moto_factory, progress)
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}
    assert any("the teardown continues" in line for line in progress)


def test_third_ctrl_c_abandons_teardown_and_names_what_is_left(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    _interrupt_at(sm, "after-call.sagemaker.CreateEndpoint", _ctrl_c)
    _interrupt_at(sm, "after-call.sagemaker.DeleteEndpoint", _send(signal.SIGINT))
    _interrupt_at(sm, "before-call.sagemaker.DeleteEndpointConfig", _send(signal.SIGINT))
    progress = Lines()
    with pytest.raises(DeployInterrupted) as caught:
        _deploy(moto_factory, progress)
    left = _leftovers(sm)
    assert left["endpoints"] == [] and left["configs"] == ["intr-e2b-config"] and left["models"] == ["intr-e2b-model"]
    error = caught.value
    assert error.fields["remaining"] == ["endpoint-config:intr-e2b-config", "model:intr-e2b-model"]
    assert error.fields["commands"] == [f"gemmaserve sagemaker delete {NAME} --region {REGION} --yes"]
    assert error.hint and "gemmaserve sagemaker delete intr-e2b" in error.hint
    # the command it prints finishes the job
    report = SageMakerSession(factory=moto_factory).endpoint(NAME, region=REGION).delete()
    assert set(report.deleted) == {"endpoint-config:intr-e2b-config", "model:intr-e2b-model"}
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}


def test_a_refused_create_does_not_delete_someone_elses_resource(moto_factory: Any) -> None:
    """CreateEndpointConfig refused because the name is taken: that config is not ours to delete."""
    sm = moto_factory("sagemaker", REGION)
    role = make_role(moto_factory("iam", REGION))
    sm.create_model(ModelName="other-model", ExecutionRoleArn=role, PrimaryContainer={"Image": "x"})
    sm.create_endpoint_config(
        EndpointConfigName=f"{NAME}-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "other-model",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    with pytest.raises(Exception, match="already exist"):
        _deploy(moto_factory, Lines(), role_arn=role)
    assert _leftovers(sm)["configs"] == [f"{NAME}-config"] and _leftovers(sm)["models"] == ["other-model"]


def test_failed_wait_carries_the_teardown_report(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)

    def failing_wait(**_: Any) -> None:
        raise EndpointFailed("boom", region=REGION)

    _interrupt_at(sm, "after-call.sagemaker.DescribeEndpoint", lambda: failing_wait(), skip=1)
    with pytest.raises(EndpointFailed) as caught:
        _deploy(moto_factory, Lines(), wait=True)
    assert caught.value.fields["teardown"]["remaining"] == []
    assert "endpoint:intr-e2b" in caught.value.fields["teardown"]["deleted"]
    assert _leftovers(sm)["endpoints"] == []


def _cancel_on(token: CancelToken, prefix: str, progress: Lines) -> Any:
    """A progress callback that keeps the lines and sets ``token`` on the first line starting with ``prefix``."""

    def callback(event: ProgressEvent) -> None:
        progress(event)
        if event.message.startswith(prefix):
            token.cancel()

    return callback


@pytest.mark.parametrize("after", ["Created model", "Created endpoint-config"])
def test_cancel_tears_down_like_ctrl_c(moto_factory: Any, after: str) -> None:
    """The cancel token (MCP's cancellation, a Python caller's) cleans up exactly as Ctrl-C does, then propagates."""
    sm = moto_factory("sagemaker", REGION)
    token, progress = CancelToken(), Lines()
    with pytest.raises(Cancelled) as caught:
        _deploy(moto_factory, progress, cancel=token, on_progress=_cancel_on(token, after, progress))
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}
    message = str(caught.value)
    assert f"Teardown in {REGION}" in message and "still there: nothing" in message
    assert any(line.startswith("Deploy stopped (cancelled): deleting what this run created") for line in progress)
    # The teardown's own lines still reach the caller after the cancellation.
    assert progress[-1].startswith(f"Teardown in {REGION}: deleted ")
    assert not any(line.startswith("Created endpoint for") for line in progress)  # nothing after the cancel point


def test_cancel_while_waiting_for_in_service_deletes_the_endpoint(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    token = CancelToken()
    # Set once the last Create call answered: the wait's first poll is where the deploy sees it.
    _interrupt_at(sm, "after-call.sagemaker.CreateEndpoint", token.cancel)
    with pytest.raises(Cancelled) as caught:
        _deploy(moto_factory, Lines(), wait=True, cancel=token)
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}
    assert "endpoint:intr-e2b" in str(caught.value)


def test_a_cancel_during_the_last_status_read_still_tears_down(moto_factory: Any) -> None:
    """The read that found InService was in flight when the cancel came: the caller no longer takes the endpoint."""
    sm = moto_factory("sagemaker", REGION)
    token = CancelToken()
    fired = _interrupt_at(sm, "before-send.sagemaker.DescribeEndpoint", token.cancel, skip=1)  # skip _refuse_existing
    with pytest.raises(Cancelled) as caught:
        _deploy(moto_factory, Lines(), wait=True, cancel=token)
    assert fired
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}
    assert "endpoint:intr-e2b" in str(caught.value)


def test_cancel_during_a_failures_teardown_does_not_cut_it_short(moto_factory: Any) -> None:
    """A cancellation that arrives while the library cleans up after its own failure lets the teardown finish,
    and the failure keeps its type and its teardown report."""
    sm = moto_factory("sagemaker", REGION)
    token, progress = CancelToken(), Lines()

    def failing_wait(**_: Any) -> None:
        raise EndpointFailed("boom", region=REGION)

    _interrupt_at(sm, "after-call.sagemaker.DescribeEndpoint", lambda: failing_wait(), skip=1)
    with pytest.raises(EndpointFailed) as caught:
        _deploy(
            moto_factory,
            progress,
            wait=True,
            cancel=token,
            on_progress=_cancel_on(token, "Deploy stopped", progress),
        )
    assert token.cancelled
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}
    assert caught.value.fields["teardown"]["remaining"] == []
    assert progress[-1].startswith(f"Teardown in {REGION}: deleted ")


# -- The Create race: SageMaker accepts a Create after the client gave up on its answer ----------------------------


@pytest.fixture
def proxied(moto_server_url: str, moto_factory: Any) -> Any:
    """moto behind :class:`SageMakerProxy`, and a client factory that goes through the proxy."""
    from gemmaserve.sagemaker.aws import Boto3ClientFactory
    from tests.support.sagemaker.moto_proxy import sagemaker_proxy

    with sagemaker_proxy(moto_server_url) as proxy:
        factory = Boto3ClientFactory(endpoint_url=proxy.url)
        try:
            yield proxy, factory
        finally:
            factory.close()


def _ctrl_c_once_held(held: Any) -> None:
    """Send SIGINT to this process once the held request reached the proxy (the client is then blocked on it)."""
    import threading

    def deliver() -> None:
        if held.arrived.wait(timeout=30):
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=deliver, daemon=True).start()


def _release_on_describe(proxy: Any, held: Any, operation: str, describe: str, nth: int) -> None:
    """Let the held Create reach moto just before the ``nth`` Describe of its resource (it becomes visible late)."""

    def hook(name: str, _payload: dict[str, Any]) -> None:
        if name == describe and proxy.count(describe) == nth and not held.release.is_set():
            held.release.set()
            held.forwarded.wait(timeout=30)

    proxy.hooks.append(hook)
    _ = operation


@pytest.mark.parametrize(
    ("operation", "describe", "label"),
    [
        ("CreateEndpoint", "DescribeEndpoint", "endpoint:intr-e2b"),
        ("CreateEndpointConfig", "DescribeEndpointConfig", "endpoint-config:intr-e2b-config"),
        ("CreateModel", "DescribeModel", "model:intr-e2b-model"),
    ],
)
def test_a_create_the_service_accepts_after_the_interrupt_is_found_and_deleted(
    proxied: Any, moto_factory: Any, operation: str, describe: str, label: str
) -> None:
    proxy, factory = proxied
    held = proxy.hold(operation)
    _ctrl_c_once_held(held)
    # not visible at the first two looks after the interrupt; then it is there, billing
    before = proxy.count(describe)
    _release_on_describe(proxy, held, operation, describe, before + 3)
    progress = Lines()
    with pytest.raises(DeployInterrupted) as caught:
        _deploy(factory, progress)
    assert _leftovers(moto_factory("sagemaker", REGION)) == {"endpoints": [], "configs": [], "models": []}
    assert label in caught.value.fields["deleted"]
    assert caught.value.fields["remaining"] == []
    from gemmaserve.sagemaker.operations.teardown import Journal

    assert Journal().open_entries() == []  # journaled before it was sent, closed as deleted
    assert {e.key: e.state.value for e in Journal().entries()}[label] == "deleted"


def test_a_create_that_never_shows_within_the_window_is_reported_unconfirmed_not_absent(
    proxied: Any, moto_factory: Any
) -> None:
    proxy, factory = proxied
    held = proxy.hold("CreateEndpoint")
    _ctrl_c_once_held(held)
    progress = Lines()
    with pytest.raises(DeployInterrupted) as caught:
        _deploy(factory, progress)
    error = caught.value
    assert "endpoint:intr-e2b" not in error.fields["deleted"]
    assert any("endpoint:intr-e2b" in item for item in error.fields["unconfirmed"])
    assert "still there: nothing seen." in error.message and "not seen within 90 s" in error.message
    assert error.fields["commands"] == [
        f"gemmaserve sagemaker list --region {REGION}",
        f"gemmaserve sagemaker delete {NAME} --region {REGION} --yes",
    ]
    from gemmaserve.sagemaker.operations.teardown import Journal

    # the journal keeps it open: `list` shows it and `cleanup --journal` settles it once it shows (or never does)
    assert [(e.key, e.state.value) for e in Journal().open_entries()] == [(f"endpoint:{NAME}", "unconfirmed")]
    # when it shows after all, the command it names finishes the job
    held.release.set()
    held.forwarded.wait(timeout=30)
    sm = moto_factory("sagemaker", REGION)
    if _leftovers(sm)["endpoints"]:
        SageMakerSession(factory=moto_factory).endpoint(NAME, region=REGION).delete()
    assert _leftovers(sm) == {"endpoints": [], "configs": [], "models": []}
