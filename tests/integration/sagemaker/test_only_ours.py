"""Only ours, and every leftover found: delete's ownership and sharing rules, orphans, the region sweep,
fail-closed listing, unknown prices and InstancePools (moto's HTTP server; Stubber where moto lacks pools)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from gemmaserve.errors import UsageError
from gemmaserve.sagemaker import api
from gemmaserve.sagemaker.api import SageMakerSession
from gemmaserve.sagemaker.aws import Deps
from gemmaserve.sagemaker.deployment.endpoint import execute_deploy, plan_deploy
from gemmaserve.sagemaker.spec.container import build_tags
from gemmaserve.sagemaker.spec.requests import CleanupRequest, ListRequest
from tests.support.sagemaker.helpers import START, deploy_argv, make_role, make_spec, pool_config, run

REGION = "us-east-1"


def deploy(factory: Any, name: str, region: str = REGION, **spec: Any) -> None:
    iam = factory("iam", region)
    role = make_role(iam, name=f"role-{name}-{len(iam.list_roles()['Roles'])}")
    plan = plan_deploy(make_spec(role, endpoint_name=name, **spec), region=region, now=START)
    execute_deploy(factory("sagemaker", region), plan, Deps(clock=lambda: START))


def untagged_endpoint(sm: Any, role: str, name: str, config: str | None = None) -> None:
    if config is None:
        sm.create_model(ModelName=f"{name}-model", ExecutionRoleArn=role, PrimaryContainer={"Image": "x"})
        config = f"{name}-config"
        sm.create_endpoint_config(
            EndpointConfigName=config,
            ProductionVariants=[
                {
                    "VariantName": "AllTraffic",
                    "ModelName": f"{name}-model",
                    "InitialInstanceCount": 1,
                    "InstanceType": "ml.g4dn.xlarge",
                }
            ],
        )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=config)


def names(sm: Any) -> dict[str, set[str]]:
    return {
        "endpoints": {e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]},
        "configs": {c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]},
        "models": {m["ModelName"] for m in sm.list_models()["Models"]},
    }


def test_delete_refuses_what_gemmaserve_did_not_create_unless_forced(
    aws_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sm = aws_env("sagemaker", REGION)
    untagged_endpoint(sm, make_role(aws_env("iam", REGION)), "theirs")
    code, _, err = run(["sagemaker", "delete", "theirs", "--region", REGION, "--yes"], capsys)
    assert code == 2 and "gemmaserve did not create" in err and "--force" in err
    assert "theirs" in names(sm)["endpoints"] and "theirs-model" in names(sm)["models"]
    code, _out, _ = run(["sagemaker", "delete", "theirs", "--region", REGION, "--yes", "--force", "--json"], capsys)
    assert code == 0 and names(sm) == {"endpoints": set(), "configs": set(), "models": set()}


def test_delete_never_removes_a_config_or_model_another_endpoint_uses(
    aws_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sm = aws_env("sagemaker", REGION)
    deploy(aws_env, "first")
    sm.create_endpoint(
        EndpointName="second", EndpointConfigName="first-config", Tags=build_tags(owner="bo", now=START, ttl_s=3600)
    )
    code, out, err = run(["sagemaker", "delete", "first", "--region", REGION, "--yes", "--force", "--json"], capsys)
    report = json.loads(out)
    assert code == 0, err
    assert report["deleted"] == ["endpoint:first"]
    assert report["skipped"] == [
        "endpoint-config:first-config (used by endpoint second)",
        "model:first-model (used by endpoint second)",
    ]
    assert names(sm) == {"endpoints": {"second"}, "configs": {"first-config"}, "models": {"first-model"}}


def test_orphans_are_listed_block_a_redeploy_with_a_hint_and_cleanup_removes_them(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    deploy(moto_factory, "debris")
    sm.delete_endpoint(EndpointName="debris")  # what an interrupted or failed deploy used to leave
    later = datetime.now(UTC) + timedelta(hours=1)
    inventory = api.list_endpoints(
        ListRequest(regions=[REGION], list_prices=True), SageMakerSession(factory=moto_factory, clock=lambda: later)
    )
    assert {(o.kind, o.name) for o in inventory.orphans} == {
        ("endpoint-config", "debris-config"),
        ("model", "debris-model"),
    }
    with pytest.raises(UsageError, match="debris of an earlier deploy") as caught:
        deploy(moto_factory, "debris")
    assert "gemmaserve sagemaker delete debris" in (caught.value.hint or "")
    dry = api.cleanup(
        CleanupRequest(regions=[REGION], expired=False, orphans=True, dry_run=True, list_prices=True, owner="ana"),
        SageMakerSession(factory=moto_factory, clock=lambda: later),
    )
    assert len(dry.orphans) == 2 and names(sm)["models"] == {"debris-model"}
    api.cleanup(
        CleanupRequest(regions=[REGION], expired=False, orphans=True, list_prices=True, owner="ana"),
        SageMakerSession(factory=moto_factory, clock=lambda: later),
    )
    assert names(sm) == {"endpoints": set(), "configs": set(), "models": set()}
    deploy(moto_factory, "debris")  # the name is free again


def test_an_untagged_unused_model_is_not_an_orphan_of_ours(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    sm.create_model(
        ModelName="someone-elses",
        ExecutionRoleArn=make_role(moto_factory("iam", REGION)),
        PrimaryContainer={"Image": "x"},
    )
    later = datetime.now(UTC) + timedelta(hours=1)
    inventory = api.list_endpoints(
        ListRequest(regions=[REGION], list_prices=True), SageMakerSession(factory=moto_factory, clock=lambda: later)
    )
    assert inventory.orphans == []


def test_all_regions_sweeps_every_region_botocore_lists(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    expected = boto3.session.Session().get_available_regions("sagemaker")
    assert "ap-southeast-5" in expected
    deploy(aws_env, "far-away", region="ap-southeast-5")
    code, out, err = run(["sagemaker", "list", "--all-regions", "--list-prices", "--json"], capsys)
    inventory = json.loads(out)
    assert code == 0, err
    assert inventory["regions"] == expected and inventory["complete"] is True
    assert [(e["endpoint_name"], e["region"]) for e in inventory["endpoints"]] == [("far-away", "ap-southeast-5")]


@pytest.mark.parametrize("command", [["list", "--list-prices"], ["cleanup", "--expired", "--yes"]])
def test_list_and_cleanup_fail_closed_without_credentials(
    aws_env: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable)
    from gemmaserve.sagemaker import aws

    monkeypatch.setattr(aws, "_DEFAULT_FACTORIES", {})  # credentials are read when a session is built
    code, out, err = run(["sagemaker", *command, "--regions", "us-east-1,eu-west-1"], capsys)
    assert code == 1
    assert "could not check us-east-1" in err and "could not check eu-west-1" in err
    assert "Incomplete" in err and "$0.000/hour" not in out


def test_list_fails_closed_when_the_api_is_unreachable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GEMMASERVE_AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard port: connection refused
    code, out, err = run(["sagemaker", "list", "--region", REGION, "--list-prices", "--json"], capsys)
    assert code == 1 and json.loads(out)["complete"] is False and "could not check us-east-1" in err


def test_unknown_price_is_shown_and_makes_the_total_a_lower_bound(
    aws_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    deploy(aws_env, "priced")
    deploy(aws_env, "unpriced", instance_types=["ml.m5.large"])  # not in the catalog: no price
    code, out, _ = run(["sagemaker", "list", "--region", REGION, "--list-prices"], capsys)
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("unpriced"))
    assert "unknown" in row
    total = next(line for line in out.splitlines() if line.startswith("Total:"))
    assert total.startswith("Total: at least $") and "price unknown for unpriced (us-east-1)" in total
    code, out, _ = run(["sagemaker", "list", "--region", REGION, "--list-prices", "--json"], capsys)
    inventory = json.loads(out)
    assert inventory["total_is_lower_bound"] and inventory["unpriced"] == ["unpriced (us-east-1)"]


POOL_NAME = "pool-e2b"
POOL_ARN = f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/{POOL_NAME}"


def _pool_described() -> dict[str, Any]:
    return {
        "EndpointName": POOL_NAME,
        "EndpointArn": POOL_ARN,
        "EndpointConfigName": f"{POOL_NAME}-config",
        "EndpointStatus": "Creating",
        "CreationTime": START,
        "LastModifiedTime": START,
        "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": 0}],
    }


class StubbedFactory:
    def __init__(self, client: Any) -> None:
        self.client = client

    def __call__(self, service: str, region: str) -> Any:
        return self.client


def test_instance_pool_shows_its_types_and_price_range_in_status_and_list(capsys: pytest.CaptureFixture[str]) -> None:
    sm = boto3.client("sagemaker", region_name=REGION)
    with Stubber(sm) as stub:
        stub.add_response("describe_endpoint", _pool_described(), {"EndpointName": POOL_NAME})
        stub.add_response("describe_endpoint_config", pool_config(POOL_NAME), {"EndpointConfigName": ANY})
        session = SageMakerSession(factory=StubbedFactory(sm), clock=lambda: START)
        state = session.endpoint(POOL_NAME, region=REGION).status()
    assert state.instance_type is None and state.pool_types == ["ml.g6.xlarge", "ml.g6.2xlarge"]
    assert state.price_range is not None
    assert state.price_range.low_usd_per_hour < state.price_range.high_usd_per_hour
    with Stubber(sm) as stub:
        stub.add_response(
            "list_endpoints",
            {
                "Endpoints": [
                    {
                        "EndpointName": POOL_NAME,
                        "EndpointArn": POOL_ARN,
                        "CreationTime": START,
                        "LastModifiedTime": START,
                        "EndpointStatus": "Creating",
                    }
                ]
            },
        )
        stub.add_response(
            "list_tags", {"Tags": build_tags(owner="ana", now=START, ttl_s=3600)}, {"ResourceArn": POOL_ARN}
        )
        stub.add_response("describe_endpoint", _pool_described(), {"EndpointName": POOL_NAME})
        stub.add_response("describe_endpoint_config", pool_config(POOL_NAME), {"EndpointConfigName": ANY})
        inventory = api.list_endpoints(ListRequest(regions=[REGION], list_prices=True), session, orphans=False)
    item = inventory.endpoints[0]
    assert item.pool_types == ["ml.g6.xlarge", "ml.g6.2xlarge"] and item.price_range is not None
    assert inventory.total_usd_per_hour == pytest.approx(item.price_range.low_usd_per_hour)
    assert inventory.total_is_lower_bound


def test_deploy_dry_run_shows_the_pool_and_its_price_range(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--region", REGION, "--dry-run", "--list-prices"]
    code, out, _ = run(deploy_argv(["ml.g6.xlarge", "ml.g6.2xlarge"], *flags), capsys)
    head = out.splitlines()[0]
    assert code == 0 and "an instance pool of ml.g6.xlarge > ml.g6.2xlarge" in head
    assert "–" in head and "depending on the type SageMaker places" in head


def test_cleanup_goes_on_past_a_refusal_reports_each_verdict_and_exits_1(
    aws_env: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sm = aws_env("sagemaker", REGION)
    for name in ("exp-a", "exp-b", "exp-c"):
        deploy(aws_env, name)  # owner ana, one-hour TTL, created at START
    deploy(aws_env, "exp-bo", owner="bo")
    # exp-a's model lost gemmaserve's tag: delete refuses the whole endpoint (it may not be ours)
    arn = sm.describe_model(ModelName="exp-a-model")["ModelArn"]
    sm.delete_tags(ResourceArn=arn, TagKeys=["gemmaserve:tool"])
    monkeypatch.setattr("gemmaserve.sagemaker.aws._now", lambda: START + timedelta(hours=2))
    code, out, err = run(
        ["sagemaker", "cleanup", "--expired", "--region", REGION, "--owner", "ana", "--yes", "--list-prices", "--json"],
        capsys,
    )
    report = json.loads(out)
    verdicts = {(item["name"], item["verdict"]) for item in report["items"]}
    assert verdicts == {
        ("exp-a", "refused"),
        ("exp-b", "deleted"),
        ("exp-c", "deleted"),
        ("exp-bo", "other owner"),
    }
    assert code == 1 and report["ok"] is False and "endpoint:exp-a (refused)" in err
    assert names(sm)["endpoints"] == {"exp-a", "exp-bo"}
    refused = next(item for item in report["items"] if item["verdict"] == "refused")
    assert "gemmaserve did not create" in refused["detail"]


def test_cleanup_takes_only_your_owner_unless_any_owner(
    aws_env: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sm = aws_env("sagemaker", REGION)
    deploy(aws_env, "mine", owner="ana")
    deploy(aws_env, "theirs", owner="bo")
    monkeypatch.setattr("gemmaserve.sagemaker.aws._now", lambda: START + timedelta(hours=2))
    monkeypatch.setattr("gemmaserve.sagemaker.api._user", lambda: "ana")
    code, out, _ = run(["sagemaker", "cleanup", "--expired", "--region", REGION, "--yes", "--list-prices"], capsys)
    assert code == 0, out
    assert "deleted       endpoint:mine (us-east-1, ana)" in out
    assert "other owner   endpoint:theirs (us-east-1, bo) (left alone: add --any-owner to include it)" in out
    assert names(sm)["endpoints"] == {"theirs"}
    code, out, _ = run(["sagemaker", "list", "--region", REGION, "--list-prices"], capsys)
    assert code == 0 and out.splitlines()[0].split()[:4] == ["ENDPOINT", "REGION", "OWNER", "STATUS"]
    assert out.splitlines()[1].split()[:3] == ["theirs", REGION, "bo"]
    code, out, _ = run(
        ["sagemaker", "cleanup", "--expired", "--region", REGION, "--any-owner", "--yes", "--list-prices"], capsys
    )
    assert code == 0 and "deleted       endpoint:theirs (us-east-1, bo)" in out
    assert names(sm) == {"endpoints": set(), "configs": set(), "models": set()}


def test_delete_dry_run_names_what_does_not_exist(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    deploy(aws_env, "half")
    sm = aws_env("sagemaker", REGION)
    sm.delete_endpoint(EndpointName="half")
    sm.delete_endpoint_config(EndpointConfigName="half-config")  # only the model is left
    code, out, err = run(["sagemaker", "delete", "half", "--region", REGION, "--dry-run", "--json"], capsys)
    report = json.loads(out)
    assert code == 0, err
    assert report["deleted"] == ["model:half-model"]
    assert sorted(report["absent"]) == ["endpoint-config:half-config", "endpoint:half"]
    code, out, _ = run(["sagemaker", "delete", "nothing-here", "--region", REGION, "--dry-run", "--json"], capsys)
    report = json.loads(out)
    assert report["deleted"] == [] and len(report["absent"]) == 3
