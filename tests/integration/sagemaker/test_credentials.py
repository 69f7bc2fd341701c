"""A missing or broken AWS profile is one paragraph with the fix, never a traceback — dry runs included."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.sagemaker.helpers import run

DEPLOY = ["sagemaker", "deploy", "--model", "gemma-4-e2b", "--instance", "ml.g6.xlarge"]


@pytest.mark.parametrize(
    "args",
    [
        [*DEPLOY, "--dry-run"],
        [*DEPLOY, "--dry-run", "--region", "us-east-1"],
        ["sagemaker", "preflight", "--model", "gemma-4-e2b", "--instance", "ml.g6.xlarge", "--region", "us-east-1"],
        ["sagemaker", "status", "gemma-4-e2b-l4", "--region", "us-east-1"],
        ["sagemaker", "list", "--region", "us-east-1"],
        ["sagemaker", "image", "render", "--region", "us-east-1"],
    ],
)
def test_a_profile_that_does_not_exist_is_one_paragraph_with_the_fix(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gemmaserve.sagemaker import aws

    monkeypatch.setenv("AWS_PROFILE", "nonexistent")
    # A fresh process: no clients cached by an earlier test under other credentials.
    monkeypatch.setattr(aws, "_DEFAULT_FACTORIES", {})
    code, _, err = run(args, capsys)
    assert "Traceback" not in err and "botocore" not in err
    if code == 0:  # offline commands need no profile at all
        return
    assert code == 1
    assert "'nonexistent'" in err and "aws configure --profile nonexistent" in err
    assert len(err.strip().splitlines()) <= 3


def test_offline_dry_run_needs_no_profile(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A dry run with the region given reads only botocore's bundled data: a stale AWS_PROFILE does not matter."""
    monkeypatch.setenv("AWS_PROFILE", "nonexistent")
    code, out, err = run([*DEPLOY, "--dry-run", "--region", "us-east-1", "--json"], capsys)
    assert code == 0, err
    assert '"CreateEndpoint"' in out


def test_credentials_that_cannot_be_loaded_name_the_fix() -> None:
    from botocore.exceptions import CredentialRetrievalError, TokenRetrievalError

    from gemmaserve.errors import CredentialsMissing
    from gemmaserve.sagemaker.aws import translate_botocore_error

    for exc in (
        CredentialRetrievalError(provider="custom-process", error_msg="boom"),
        TokenRetrievalError(provider="sso", error_msg="The SSO session has expired"),
    ):
        error = translate_botocore_error(exc, region="us-east-1")
        assert isinstance(error, CredentialsMissing)
        assert "aws sso login" in (error.hint or "")


def test_list_without_credentials_names_each_region_and_the_fix(
    aws_env: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gemmaserve.sagemaker import aws

    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(aws, "_DEFAULT_FACTORIES", {})
    code, _, err = run(["sagemaker", "list", "--list-prices", "--regions", "us-east-1,eu-west-1"], capsys)
    assert code == 1 and "Traceback" not in err
    assert "could not check us-east-1" in err and "Hint: Configure credentials (aws configure)" in err
