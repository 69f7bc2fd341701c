"""Bad input gets one clear error (exit 2, no traceback) before anything is sent or billed; dry run checks offline.

Every case runs the real CLI entry point (the error mapping included). None of these
may reach AWS: the tests' network guard refuses anything but loopback, and no
endpoint URL is set, so a call would fail loudly rather than pass.
"""

from __future__ import annotations

import json

import pytest

from tests.support.sagemaker.helpers import deploy_argv, run

DRY = ["sagemaker", "deploy", "--model", "gemma-4-e2b", "--region", "us-east-1", "--dry-run"]


def refused(args: list[str], capsys: pytest.CaptureFixture[str], needle: str, code: int = 2) -> str:
    got, out, err = run(args, capsys)
    assert got == code, (got, out, err)
    assert "Traceback" not in err and err.startswith("Error: "), err
    assert needle in err, err
    return err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--name", "e" * 57], "at most 56"),
        (["--name", "gemma_e2b"], "not valid"),
        (
            [x for size in ("", "2", "4", "8", "12", "16") for x in ("--instance", f"ml.g6.{size}xlarge")],
            "at most 5",
        ),
        (["--instance", "g6.xlarge"], "ml.g6.xlarge"),
        (["--instance", "ml.g6.xlarge", "--ami", "bogus"], "not an InferenceAmiVersion"),
        (["--instance", "ml.g6.xlarge", "--env", "NOTE=" + "x" * 1025], "SageMaker allows 1,024"),
        (["--instance", "ml.g6.xlarge", "--owner", "CORP\\jdoe"], "cannot be a SageMaker tag value"),
    ],
)
def test_deploy_refuses_bad_input_before_anything(
    capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    if "--instance" not in extra:
        extra = [*extra, "--instance", "ml.g6.xlarge"]
    refused([*DRY, *extra], capsys, needle)


@pytest.mark.parametrize(
    ("region", "needle"),
    [
        ("us-east-1,us-west-2", "--regions us-east-1,us-west-2"),
        ("us east 1", "not an AWS region"),
        ("zz-north-9", "not available"),
    ],
)
def test_bad_regions_are_usage_errors(capsys: pytest.CaptureFixture[str], region: str, needle: str) -> None:
    refused(deploy_argv(["ml.g6.xlarge"], "--region", region, "--dry-run"), capsys, needle)
    refused(["sagemaker", "status", "x", "--region", region], capsys, needle)


def test_upper_case_region_is_normalised(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(deploy_argv(["ml.g6.xlarge"], "--region", "US-EAST-1", "--dry-run", "--json"), capsys)
    assert code == 0 and json.loads(out)["plan"]["region"] == "us-east-1"


def test_an_owner_with_rejected_characters_from_the_login_is_made_tag_safe(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGNAME", "CORP\\jdoe")
    monkeypatch.setenv("USER", "CORP\\jdoe")
    code, out, _ = run([*DRY, "--instance", "ml.g6.xlarge", "--json"], capsys)
    tags = {t["Key"]: t["Value"] for t in json.loads(out)["plan"]["calls"][0]["params"]["Tags"]}
    assert code == 0 and tags["gemmaserve:owner"] == "CORP-jdoe"


@pytest.mark.parametrize(
    "args",
    [
        ["sagemaker", "deploy", "--model", "gemma-4-e2b", "--instance", "ml.g6.xlarge", "--dry-run"],
        ["sagemaker", "status", "x"],
        ["sagemaker", "list"],
    ],
)
def test_a_missing_aws_profile_is_one_paragraph(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    err = refused(args, capsys, "'no-such-profile'", code=1)
    assert "AWS_PROFILE" in err and len([line for line in err.splitlines() if line.strip()]) == 2  # Error + Hint


def test_invoke_stream_with_json_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    refused(
        ["sagemaker", "invoke", "x", "hi", "--region", "us-east-1", "--stream", "--json"], capsys, "--stream and --json"
    )


def test_dry_run_runs_the_offline_preflight_and_shows_tags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*DRY, "--instance", "ml.g4dn.xlarge"], capsys)
    assert code == 1 and "would be refused" in err  # a T4 with the stock image: no Turing clamp
    assert "fail    turing-clamp" in out and "memory-fit:ml.g4dn.xlarge" in out
    assert "gemmaserve:tool=gemmaserve" in out and "gemmaserve:expires-at=" in out
    code, out, _ = run([*DRY, "--instance", "ml.g4dn.xlarge", "--instance", "ml.g6.xlarge", "--json"], capsys)
    findings = {f["check"]: f["status"] for f in json.loads(out)["preflight"]["findings"]}
    assert code == 1 and findings["one-gpu"] == "fail"
    code, out, _ = run([*DRY, "--instance", "ml.g6.xlarge", "--json"], capsys)
    assert code == 0 and all(f["status"] in ("ok", "warn") for f in json.loads(out)["preflight"]["findings"])


def test_memory_misfit_fails_the_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--encoding", "bf16", "--region", "us-east-1", "--dry-run", "--json"]
    code, out, _ = run(deploy_argv(["ml.g6.xlarge"], *flags, model="gemma-4-31b"), capsys)
    findings = {f["check"]: f["status"] for f in json.loads(out)["preflight"]["findings"]}
    assert code == 1 and findings["memory-fit:ml.g6.xlarge"] == "fail"


def test_language_model_only_reaches_the_container(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*DRY, "--instance", "ml.g6.xlarge", "--language-model-only", "--json"], capsys)
    plan = json.loads(out)["plan"]
    env = plan["calls"][0]["params"]["PrimaryContainer"]["Environment"]
    assert code == 0 and env["SM_VLLM_LANGUAGE_MODEL_ONLY"] == "true" and "--language-model-only" in plan["serve_args"]
