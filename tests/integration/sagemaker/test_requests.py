"""The SageMaker request models: each input rule declared once, and both front ends applying it the same way."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gemmaserve.errors import UsageError
from gemmaserve.sagemaker.spec.requests import (
    DRY_RUN_ROLE_ARN,
    AutoscaleRequest,
    CleanupRequest,
    DeployRequest,
    PreflightRequest,
    RoleCreateRequest,
)
from tests.support.sagemaker.helpers import run

PREFLIGHT = {"model": "gemma-4-e2b", "instance": ["ml.g6.xlarge"]}
DEPLOY = {**PREFLIGHT, "dry_run": True}
E2B_DRY_RUN = ["sagemaker", "deploy", "--model", "e2b", "--region", "us-east-1", "--dry-run", "--json"]


def test_regions_are_normalised_split_and_deduplicated() -> None:
    assert PreflightRequest.parse({**PREFLIGHT, "region": " US-East-1 "}).region == "us-east-1"
    request = PreflightRequest.parse({**PREFLIGHT, "regions": ["us-east-1,US-WEST-2", "us-east-1"]})
    assert request.regions == ["us-east-1", "us-west-2"]
    assert request.chosen_regions() == ["us-east-1", "us-west-2"]
    with pytest.raises(UsageError, match="not an AWS region name"):
        PreflightRequest.parse({**PREFLIGHT, "region": "useast1"})


def test_one_way_to_choose_regions() -> None:
    with pytest.raises(UsageError, match="--region, --regions"):
        DeployRequest.parse({**DEPLOY, "region": "us-east-1", "regions": ["us-west-2"]})
    with pytest.raises(UsageError, match="--regions, --all-regions"):
        CleanupRequest.parse({"expired": True, "regions": ["us-west-2"], "all_regions": True})


def test_instance_types_are_hosting_types_at_most_five() -> None:
    with pytest.raises(UsageError) as caught:
        DeployRequest.parse({**DEPLOY, "instance": ["g6.xlarge"]})
    assert "ml.g6.xlarge" in caught.value.message
    six = ["ml.g6.xlarge", "ml.g6.2xlarge", "ml.g6.4xlarge", "ml.g6.8xlarge", "ml.g6.12xlarge", "ml.g6.16xlarge"]
    with pytest.raises(UsageError, match="at most 5"):
        DeployRequest.parse({**DEPLOY, "instance": six})


def test_env_is_a_mapping_or_key_value_strings_within_sagemaker_limits() -> None:
    as_dict = DeployRequest.parse({**DEPLOY, "env": {"HF_TOKEN": "hf_x", "A": "b=c"}})
    as_list = DeployRequest.parse({**DEPLOY, "env": ["HF_TOKEN=hf_x", "A=b=c"]})
    assert as_dict == as_list and as_list.environment() == {"HF_TOKEN": "hf_x", "A": "b=c"}
    with pytest.raises(UsageError, match="is not KEY=VALUE"):
        DeployRequest.parse({**DEPLOY, "env": ["HF_TOKEN"]})
    with pytest.raises(UsageError, match="not allowed by SageMaker"):
        DeployRequest.parse({**DEPLOY, "env": ["1BAD=x"]})
    with pytest.raises(UsageError, match="at most"):
        DeployRequest.parse({**DEPLOY, "env": [f"K{i}=v" for i in range(101)]})


def test_a_real_deploy_needs_a_role_and_a_dry_run_shows_a_placeholder() -> None:
    assert DeployRequest.parse(DEPLOY).execution_role() == DRY_RUN_ROLE_ARN
    with pytest.raises(UsageError, match="--role-arn") as caught:
        DeployRequest.parse({**DEPLOY, "dry_run": False})
    assert "gemmaserve sagemaker role create" in caught.value.message


def test_vllm_describes_a_custom_image_and_cannot_change_the_pinned_one() -> None:
    from gemmaserve.vllm_releases import sagemaker_image_series

    pinned = sagemaker_image_series()
    other = "0.26" if pinned != "0.26" else "0.27"
    assert DeployRequest.parse({**DEPLOY, "vllm": pinned}).vllm == pinned
    with pytest.raises(UsageError, match="cannot change the vLLM inside an image"):
        DeployRequest.parse({**DEPLOY, "vllm": other})
    assert DeployRequest.parse(
        {**DEPLOY, "vllm": other, "image": "123456789012.dkr.ecr.{region}.amazonaws.com/v:1"}
    ).vllm


def test_max_num_batched_tokens_reaches_the_container(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        [*E2B_DRY_RUN, "--instance", "ml.g6.xlarge", "--max-num-batched-tokens", "4096", "--max-num-seqs", "32"],
        capsys,
    )
    assert code == 0, err
    env = json.loads(out)["plan"]["calls"][0]["params"]["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_MAX_NUM_BATCHED_TOKENS"] == "4096" and env["SM_VLLM_MAX_NUM_SEQS"] == "32"


def test_the_plan_is_computed_once_per_instance_type(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import gemmaserve.plan

    planned: list[Any] = []
    real = gemmaserve.plan.plan_for

    def counting(target: Any, *args: Any, **kwargs: Any) -> Any:
        planned.append(target.instance)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(gemmaserve.plan, "plan_for", counting)
    code, _, err = run(
        [*E2B_DRY_RUN, "--instance", "ml.g6.xlarge", "--instance", "ml.g6.2xlarge"],
        capsys,
    )
    assert code == 0, err
    assert [instance.key for instance in planned] == ["ml.g6.xlarge", "ml.g6.2xlarge"]


def test_cross_field_rules_of_cleanup_autoscale_and_role() -> None:
    with pytest.raises(UsageError, match="--expired, --orphans, --journal or several"):
        CleanupRequest.parse({})
    with pytest.raises(UsageError, match="--min-instances 4 is above --max-instances 3"):
        AutoscaleRequest.parse(
            {"endpoint_name": "e2b", "min_instances": 4, "max_instances": 3, "target_invocations": 1}
        )
    with pytest.raises(UsageError, match="not an S3 location"):
        RoleCreateRequest.parse({"model_s3": "bucket/prefix"})


def test_old_option_spellings_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        [*E2B_DRY_RUN, "--instance", "ml.g6.xlarge", "--name", "old-spelling"],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["plan"]["endpoint_name"] == "old-spelling"
    code, out, err = run(
        ["sagemaker", "role", "create", "--region", "us-east-1", "--name", "old-role", "--help"], capsys
    )
    assert code == 0 and "--role-name, --name" in out


@pytest.mark.parametrize(
    "args",
    [
        [
            "deploy",
            "--model",
            "e2b",
            "--instance",
            "ml.g6.xlarge",
            "--role-arn",
            "arn:aws:iam::1:role/r",
            "--list-prices",
        ],
        ["delete", "gemma-4-e2b-l4"],
        ["cleanup", "--expired"],
        ["autoscale", "gemma-4-e2b-l4", "--max-instances", "2", "--target-invocations", "60"],
        ["role", "create"],
        ["image", "build"],
    ],
)
def test_changes_need_yes_off_a_terminal_and_dry_runs_do_not(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["sagemaker", *args, "--region", "us-east-1"], capsys)
    assert code == 2 and "Refused to" in err and "--yes" in err, err


def test_mcp_rejects_an_unknown_argument_naming_the_right_one() -> None:
    from gemmaserve.mcp_server import build_server
    from tests.support.mcp.fixtures import call_tool, error_text

    result = call_tool(
        build_server(),
        "sagemaker_deploy",
        {"model": "gemma-4-e2b", "instance_types": ["ml.g6.xlarge"], "dry_run": True, "confirm": False},
    )
    assert result.is_error and "'instance'" in error_text(result)


def TOOL_ARGUMENTS(name: str) -> set[str]:
    from gemmaserve.mcp_server import build_server

    return {tool.name: set(tool.parameters["properties"]) for tool in build_server()._tool_manager.list_tools()}[name]


def test_mcp_deploy_refuses_to_skip_preflight() -> None:
    from gemmaserve.mcp_server import build_server
    from tests.support.mcp.fixtures import call_tool, error_text

    result = call_tool(
        build_server(),
        "sagemaker_deploy",
        {**DEPLOY, "region": "us-east-1", "skip_preflight": True, "confirm": False},
    )
    assert result.is_error and "unknown argument 'skip_preflight'" in error_text(result)
    assert "skip_preflight" not in TOOL_ARGUMENTS("sagemaker_deploy")
    assert "accept_unknown" not in TOOL_ARGUMENTS("sagemaker_deploy")
    assert "stream" not in TOOL_ARGUMENTS("sagemaker_invoke")


def test_a_dry_run_needs_no_yes(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sagemaker", "autoscale", "gemma-4-e2b-l4", "--max-instances", "2", "--target-invocations", "60"]
    code, out, err = run([*args, "--region", "us-east-1", "--dry-run", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["dry_run"] is True


def test_the_package_exports_its_actions_without_loading_boto3() -> None:
    import subprocess
    import sys

    code = (
        "import sys, gemmaserve.sagemaker as s; "
        "assert not {'boto3', 'botocore'} & set(sys.modules), 'loaded at import'; "
        "assert s.api.deploy is s.deploy and s.DeployRequest.action == 'sagemaker deploy'; "
        "assert not {'boto3'} & set(sys.modules), 'loaded by the exports'; "
        # A submodule named like an action (a ``wait.py``) would replace the action once imported.
        "import gemmaserve.sagemaker.api, types; "
        "shadowed = [n for n in s.__all__ if n != 'api' and isinstance(getattr(s, n), types.ModuleType)]; "
        "assert not shadowed, shadowed"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- every input checked where it is parsed: one line, exit 2, no traceback --------------------------------

DEPLOY_CLI = ["sagemaker", "deploy", "--model", "gemma-4-e2b", "--instance", "ml.g4dn.xlarge", "--dry-run"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([*DEPLOY_CLI, "--ttl-hours", "inf"], "--ttl-hours"),
        ([*DEPLOY_CLI, "--ttl-hours", "nan"], "--ttl-hours"),
        ([*DEPLOY_CLI, "--ttl-hours", "1e9"], "--ttl-hours"),
        ([*DEPLOY_CLI, "--ttl-hours", "1e300"], "--ttl-hours"),
        (["sagemaker", "logs", "x", "--region", "us-east-1", "--since-min", "inf"], "--since-min"),
        (["sagemaker", "logs", "x", "--region", "us-east-1", "--since-min", "1e300"], "--since-min"),
        ([*DEPLOY_CLI, "--image", "not a uri"], "--image"),
        ([*DEPLOY_CLI, "--image", "vllm/vllm-openai:v0.26.0"], "ECR"),
        (["sagemaker", "preflight", "--model", "gemma-4-e2b", "--instance", "ml.g4dn.xlarge", "--image", "x"], "ECR"),
        (["sagemaker", "image", "render", "--base-image", "junk"], "--base-image"),
        (["sagemaker", "image", "render", "--base-image", "UPPER/case:tag"], "--base-image"),
        (["sagemaker", "image", "build", "--base-image", "junk", "--dry-run"], "--base-image"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(args, capsys)
    assert code == 2, err
    assert says in err and "Traceback" not in err, err


def test_a_wheel_must_be_a_gemmaserve_wheel(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import zipfile

    text = tmp_path / "notes.txt"
    text.write_text("not a wheel")
    named = tmp_path / "gemmaserve-0.1.0-py3-none-any.whl"
    named.write_text("not a zip")
    other = tmp_path / "requests-2.0-py3-none-any.whl"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("requests-2.0.dist-info/METADATA", "Name: requests\n")
    good = tmp_path / "gemmaserve-0.1.0-py3-none-any.whl.ok" / "gemmaserve-0.1.0-py3-none-any.whl"
    good.parent.mkdir()
    with zipfile.ZipFile(good, "w") as archive:
        archive.writestr("gemmaserve-0.1.0.dist-info/METADATA", "Name: gemmaserve\n")
    for wheel, says in ((text, "not a wheel"), (named, "not a wheel"), (other, "not a gemmaserve wheel")):
        code, _, err = run(["sagemaker", "image", "build", "--wheel", str(wheel), "--dry-run"], capsys)
        assert code == 2 and says in err, err
    from gemmaserve.sagemaker.spec.requests import ImageBuildRequest

    assert ImageBuildRequest(wheel=good, dry_run=True).wheel == good


def test_real_image_references_pass() -> None:
    from gemmaserve.sagemaker.spec.requests import DeployRequest, ImageRenderRequest

    ecr = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v2.3"
    digest = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/gemma@sha256:" + "a" * 64
    for image in (ecr, digest):
        DeployRequest(model="gemma-4-e2b", instance=["ml.g4dn.xlarge"], image=image, dry_run=True)
    for base in (ecr, "public.ecr.aws/deep-learning-containers/vllm:0.11-gpu", "docker.io/vllm/vllm-openai:v0.26.0"):
        assert ImageRenderRequest(base_image=base).base_image == base
    assert DeployRequest(model="gemma-4-e2b", instance=["ml.g4dn.xlarge"], ttl_hours=24 * 365, dry_run=True)
