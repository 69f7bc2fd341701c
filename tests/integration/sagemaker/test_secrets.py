"""Secret container variables are sent to SageMaker as given but never shown: text, --json, errors, MCP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gemmaserve.sagemaker.spec.container import is_secret_name, mask_serve_args
from tests.support.sagemaker.helpers import deploy_argv, make_role, run

REGION = "us-east-1"
TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123"
API_KEY = "sk-live-0123456789abcdef"
SECRETS = [
    "--env",
    f"HF_TOKEN={TOKEN}",
    "--env",
    "DB_PASSWORD=pa55word!",
    "--env",
    "MY_SECRET=s3cr3t-value",
    "--vllm-arg=--api-key",
    f"--vllm-arg={API_KEY}",
]


def assert_hidden(text: str) -> None:
    for value in (TOKEN, API_KEY, "pa55word!", "s3cr3t-value"):
        assert value not in text


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "SM_VLLM_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "hf_token", "GITHUB_TOKEN", "MY_PASSWD"],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["SM_VLLM_MAX_NUM_BATCHED_TOKENS", "SM_VLLM_MAX_MODEL_LEN", "SM_VLLM_MODEL"])
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_serve_args_mask_the_value_of_a_secret_flag() -> None:
    assert mask_serve_args(["--api-key", "abc", "--max-num-batched-tokens", "2048", "--hf-token=x"]) == [
        "--api-key",
        "***",
        "--max-num-batched-tokens",
        "2048",
        "--hf-token=***",
    ]


@pytest.mark.parametrize("as_json", [False, True])
def test_dry_run_masks_secrets_in_text_and_json(capsys: pytest.CaptureFixture[str], as_json: bool) -> None:
    flags = ["--region", REGION, "--dry-run", *SECRETS, *(["--json"] if as_json else [])]
    code, out, err = run(deploy_argv(["ml.g6.xlarge"], *flags), capsys)
    assert code == 0, err
    assert_hidden(out + err)
    assert "***" in out
    if as_json:
        env = json.loads(out)["plan"]["calls"][0]["params"]["PrimaryContainer"]["Environment"]
        assert env["HF_TOKEN"] == "***" and env["SM_VLLM_API_KEY"] == "***"
        assert env["SM_VLLM_MAX_MODEL_LEN"] == "8192"


def test_the_real_value_reaches_create_model_but_not_the_output(
    moto_factory: Any, moto_server_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GEMMASERVE_AWS_ENDPOINT_URL", moto_server_url)
    role = make_role(moto_factory("iam", REGION))
    flags = ["--role-arn", role, "--name", "sec-e2b", "--region", REGION, "--skip-preflight", "--list-prices"]
    code, out, err = run(deploy_argv(["ml.g4dn.xlarge"], *flags, "--yes", "--json", *SECRETS), capsys)
    assert code == 0, err
    assert_hidden(out + err)
    sent = moto_factory("sagemaker", REGION).describe_model(ModelName="sec-e2b-model")
    assert sent["PrimaryContainer"]["Environment"]["HF_TOKEN"] == TOKEN  # DescribeModel shows it: see the docs


def test_mcp_deploy_dry_run_masks_secrets() -> None:
    import anyio
    from mcp import Client

    from gemmaserve.mcp_server import build_server

    async def main() -> Any:
        async with Client(build_server()) as client:
            return await client.call_tool(
                "sagemaker_deploy",
                {
                    "model": "gemma-4-e2b",
                    "instance": ["ml.g6.xlarge"],
                    "region": REGION,
                    "dry_run": True,
                    "confirm": False,
                    "env": {"HF_TOKEN": TOKEN},
                    "vllm_arg": ["--api-key", API_KEY],
                },
            )

    result = anyio.run(main)
    assert not result.is_error
    assert_hidden(json.dumps(result.structured_content) + json.dumps([c.model_dump() for c in result.content]))
