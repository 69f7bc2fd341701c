"""The CLI front end against moto's HTTP server: exit codes, --json parsed, confirmation refused off a terminal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from gemmaserve.cli import app
from tests.support.sagemaker.helpers import deploy_argv, make_role, run

REGION = "us-east-1"


def test_deploy_dry_run_prints_calls_and_price_without_aws(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(deploy_argv(["ml.g6.xlarge", "ml.g6.2xlarge"], "--dry-run", "--json"), capsys)
    assert code == 0
    outcome = json.loads(out)
    plan = outcome["plan"]
    assert [c["operation"] for c in plan["calls"]] == ["CreateModel", "CreateEndpointConfig", "CreateEndpoint"]
    assert plan["endpoint_name"] == "gemma-4-e2b-l4"
    assert "--served-model-name" in plan["serve_args"] and plan["usd_per_hour"] > 0
    variant = plan["calls"][1]["params"]["ProductionVariants"][0]
    assert [p["InstanceType"] for p in variant["InstancePools"]] == ["ml.g6.xlarge", "ml.g6.2xlarge"]


def test_deploy_status_list_delete_through_the_cli(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    role = make_role(aws_env("iam", REGION))
    flags = ["--role-arn", role, "--name", "cli-e2b", "--region", REGION, "--skip-preflight", "--list-prices"]
    code, out, err = run(deploy_argv(["ml.g4dn.xlarge"], *flags, "--yes", "--json"), capsys)
    assert code == 0, err
    assert json.loads(out)["result"]["state"]["status"] == "InService"
    code, out, _ = run(["sagemaker", "status", "cli-e2b", "--region", REGION, "--json"], capsys)
    assert code == 0 and json.loads(out)["instance_type"] == "ml.g4dn.xlarge"
    code, out, _ = run(["sagemaker", "list", "--region", REGION, "--list-prices", "--json"], capsys)
    assert [e["endpoint_name"] for e in json.loads(out)["endpoints"]] == ["cli-e2b"]
    code, out, err = run(["sagemaker", "delete", "cli-e2b", "--region", REGION], capsys)
    assert code == 2 and "--yes" in err  # stdin is not a terminal: refuse to prompt
    code, out, _ = run(["sagemaker", "delete", "cli-e2b", "--region", REGION, "--yes", "--json"], capsys)
    assert code == 0 and "endpoint:cli-e2b" in json.loads(out)["deleted"]
    code, out, _ = run(["sagemaker", "status", "cli-e2b", "--region", REGION, "--json"], capsys)
    assert json.loads(out)["status"] == "NotFound"


def test_preflight_refusal_blocks_deploy_with_exit_1(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    missing = "arn:aws:iam::123456789012:role/missing"
    code, _out, err = run(deploy_argv(["ml.g4dn.xlarge"], "--role-arn", missing, "--region", REGION, "--yes"), capsys)
    assert code == 1 and "Preflight found problems" in err
    assert aws_env("sagemaker", REGION).list_models()["Models"] == []


def test_unknown_model_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(deploy_argv(["ml.g4dn.xlarge"], "--dry-run", model="gemma-9"), capsys)
    assert code == 2 and "Unknown model" in err


def test_bad_endpoint_name_is_refused_before_any_call(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["sagemaker", "status", "bad_name", "--region", REGION], capsys)
    assert code == 2 and "not valid" in err


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["sagemaker", "--help"])
    for name in ["preflight", "deploy", "status", "wait", "logs", "invoke", "delete", "list", "cleanup"]:
        assert name in result.output


def test_role_create_prints_the_policy_and_is_idempotent(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["sagemaker", "role", "create", "--yes", "--region", REGION, "--json"], capsys)
    first = json.loads(out)
    assert code == 0 and first["created"] and first["role_arn"].endswith(":role/gemmaserve-endpoint")
    code, out, _ = run(["sagemaker", "role", "create", "--yes", "--region", REGION], capsys)
    assert code == 0 and out.startswith("Updated role gemmaserve-endpoint") and '"ecr:BatchGetImage"' in out


def test_image_render_is_offline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["sagemaker", "image", "render", "--region", "eu-west-1"], capsys)
    assert code == 0 and out.startswith("FROM 763104351884.dkr.ecr.eu-west-1.amazonaws.com/vllm:")
    code, out, _ = run(["sagemaker", "image", "render", "--region", "eu-west-1", "--buildspec"], capsys)
    assert code == 0 and out.startswith("version: 0.2")


def test_autoscale_through_the_cli(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    autoscale = ["sagemaker", "autoscale", "e2b", "--yes", "--region", REGION]
    code, out, _ = run([*autoscale, "--max", "3", "--target-invocations", "60", "--json"], capsys)
    assert code == 0 and json.loads(out)["resource_id"] == "endpoint/e2b/variant/AllTraffic"
    code, _, err = run([*autoscale, "--min", "4", "--max", "3", "--target-invocations", "60"], capsys)
    assert code == 2 and "--min" in err


def test_invoke_stream_through_the_cli(
    fake_runtime: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.sagemaker.eventstream_fake import Script, payload_part, sse_chunk

    monkeypatch.setenv("GEMMASERVE_AWS_ENDPOINT_URL", fake_runtime.url)
    fake_runtime.script = lambda name, body: Script(
        pieces=[payload_part(sse_chunk("Paris")), payload_part(b"data: [DONE]\n\n")]
    )
    code, out, _ = run(["sagemaker", "invoke", "e2b", "Capital of France?", "--region", REGION, "--stream"], capsys)
    assert code == 0 and out == "Paris\n"
    assert fake_runtime.requests[0]["body"]["messages"][0]["content"] == "Capital of France?"


def test_logs_and_wait_through_the_cli(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    role = make_role(aws_env("iam", REGION))
    sm = aws_env("sagemaker", REGION)
    sm.create_model(ModelName="w-model", ExecutionRoleArn=role, PrimaryContainer={"Image": "x"})
    sm.create_endpoint_config(
        EndpointConfigName="w-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "w-model",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
    )
    sm.create_endpoint(EndpointName="w", EndpointConfigName="w-config")
    logs = aws_env("logs", REGION)
    logs.create_log_group(logGroupName="/aws/sagemaker/Endpoints/w")
    logs.create_log_stream(logGroupName="/aws/sagemaker/Endpoints/w", logStreamName="AllTraffic/i-1")
    logs.put_log_events(
        logGroupName="/aws/sagemaker/Endpoints/w",
        logStreamName="AllTraffic/i-1",
        logEvents=[{"timestamp": int(time.time() * 1000), "message": "GPU KV cache size: 146,525 tokens"}],
    )
    code, out, _ = run(["sagemaker", "wait", "w", "--region", REGION, "--json"], capsys)
    assert code == 0 and json.loads(out)["status"] == "InService"
    code, out, _ = run(["sagemaker", "logs", "w", "--region", REGION, "--json"], capsys)
    result = json.loads(out)
    assert code == 0 and result["facts"]["kv_cache_tokens"] == 146525 and len(result["lines"]) == 1
