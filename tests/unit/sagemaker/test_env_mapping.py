"""The SM_VLLM_* → vllm flag rule of the AWS vLLM container, and its reverse."""

from __future__ import annotations

import json

import pytest

from gemmaserve.errors import UsageError
from gemmaserve.sagemaker.spec.container import (
    env_to_serve_args,
    serve_args_to_env,
    validate_environment,
)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SM_VLLM_MAX_MODEL_LEN": "4096"}, ["--max-model-len", "4096"]),
        ({"SM_VLLM_ENFORCE_EAGER": "true"}, ["--enforce-eager"]),
        ({"SM_VLLM_ENFORCE_EAGER": "TRUE"}, ["--enforce-eager"]),
        ({"SM_VLLM_ENFORCE_EAGER": "false"}, []),
        ({"SM_VLLM_ENFORCE_EAGER": "False"}, []),
        ({"SM_VLLM_ENFORCE_EAGER": ""}, ["--enforce-eager"]),
        ({"SM_VLLM_ALLOWED_ORIGINS": '["a", "b c"]'}, ["--allowed-origins", "a", "b c"]),
        ({"SM_VLLM_CUDA_GRAPH_SIZES": "[1, 2, 4]"}, ["--cuda-graph-sizes", "1", "2", "4"]),
        ({"SM_VLLM_HF_OVERRIDES": '{"a": 1}'}, ["--hf-overrides", '{"a": 1}']),
        ({"SM_VLLM_NOT_JSON": "[oops"}, ["--not-json", "[oops"]),
        ({"SM_VLLM_MODEL": "google/gemma-4-E2B-it"}, ["--model", "google/gemma-4-E2B-it"]),
        ({"HF_TOKEN": "x", "VLLM_USE_V1": "1", "SM_VLLM_DTYPE": "float16"}, ["--dtype", "float16"]),
        ({}, []),
    ],
)
def test_env_to_serve_args_follows_the_container_rule(env: dict[str, str], expected: list[str]) -> None:
    assert env_to_serve_args(env) == expected


def test_env_order_is_kept() -> None:
    env = {"SM_VLLM_B": "1", "SM_VLLM_A": "2"}
    assert env_to_serve_args(env) == ["--b", "1", "--a", "2"]


def test_nested_json_elements_become_json_tokens() -> None:
    assert env_to_serve_args({"SM_VLLM_X": '[{"k": 1}, "s"]'}) == ["--x", '{"k": 1}', "s"]


@pytest.mark.parametrize(
    "args",
    [
        ["google/gemma-4-E2B-it", "--dtype", "float16", "--max-model-len", "8192", "--enforce-eager"],
        ["--model", "m", "--gpu-memory-utilization", "0.9", "--max-num-seqs", "64"],
        ["--allowed-origins", "a", "b"],
        ["--limit-mm-per-prompt", '{"image": 0}'],
        ["--seed", "-1"],
        [],
    ],
)
def test_reverse_round_trips_through_the_container_rule(args: list[str]) -> None:
    env = serve_args_to_env(args)
    derived = env_to_serve_args(env)
    expected = list(args)
    if expected and not expected[0].startswith("--"):
        expected = ["--model", expected[0], *expected[1:]]
    assert derived == expected


def test_reverse_builds_the_expected_environment() -> None:
    env = serve_args_to_env(["serve", "google/gemma-4-E2B-it", "--dtype=float16", "--enforce-eager", "--a", "x", "y"])
    assert env == {
        "SM_VLLM_MODEL": "google/gemma-4-E2B-it",
        "SM_VLLM_DTYPE": "float16",
        "SM_VLLM_ENFORCE_EAGER": "true",
        "SM_VLLM_A": json.dumps(["x", "y"]),
    }


@pytest.mark.parametrize(
    "args",
    [
        ["--trust-remote-code", "true"],
        ["--x", "false"],
        ["--x=", "--y"],
        ["-tp", "2"],
        ["--Bad", "1"],
        ["--x", '["a"]'],
        ["--dtype", "half", "--dtype", "float16"],
        ["m", "extra-positional-is-a-value-of-nothing"],
    ],
)
def test_reverse_refuses_what_the_rule_cannot_express(args: list[str]) -> None:
    with pytest.raises(UsageError):
        serve_args_to_env(args)


@pytest.mark.parametrize("key", ["SM_VLLM_lower", "SM_VLLM_A-B", "SM_VLLM_TRAILING_"])
def test_validate_environment_refuses_unmappable_names(key: str) -> None:
    with pytest.raises(UsageError):
        validate_environment({key: "1"})


def test_validate_environment_accepts_others() -> None:
    validate_environment({"SM_VLLM_MAX_NUM_SEQS": "8", "HF_TOKEN": "x", "lower": "ok"})
