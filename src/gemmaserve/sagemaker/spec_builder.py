"""From a capacity plan row to a DeploySpec: the ``SM_VLLM_*`` environment the container turns into flags (pure).

The plan's ``vllm_args`` (model, dtype float16 on Turing, max model len, memory
utilisation, max num seqs) go through the reverse of the container's rule, then the
served name and the user's overrides; the result is shown as the flags it derives.
"""

from __future__ import annotations

from collections.abc import Mapping

from gemmaserve.errors import UsageError
from gemmaserve.plan import PlanRow
from gemmaserve.sagemaker.container import DEFAULT_AMI
from gemmaserve.sagemaker.endpoint import DeploySpec
from gemmaserve.sagemaker.env_mapping import (
    PREFIX,
    serve_args_to_env,
    validate_environment,
)


def environment_for_plan(
    row: PlanRow,
    *,
    served_model_name: str | None = None,
    vllm_overrides: list[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``SM_VLLM_*`` from the plan, then ``--served-model-name``, then ``vllm_overrides`` (flags) and ``extra_env``."""
    env = serve_args_to_env(row.vllm_args)
    env[PREFIX + "SERVED_MODEL_NAME"] = served_model_name or row.model
    if vllm_overrides:
        override_env = serve_args_to_env(vllm_overrides)
        if PREFIX + "MODEL" in override_env and not any(flag.startswith("--model") for flag in vllm_overrides):
            raise UsageError("A vllm override starts with a positional value.", hint="Give overrides as --flag value.")
        env.update(override_env)
    for key, value in (extra_env or {}).items():
        if value.strip().lower() == "false" and key.startswith(PREFIX):
            env.pop(key, None)
        else:
            env[key] = value
    validate_environment(env)
    return env


def spec_for_plan(
    row: PlanRow,
    *,
    endpoint_name: str,
    instance_types: list[str],
    role_arn: str,
    image_uri: str | None,
    owner: str,
    ttl_s: float | None,
    served_model_name: str | None = None,
    vllm_overrides: list[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    inference_ami_version: str | None = DEFAULT_AMI,
    startup_health_check_timeout_s: int = 1800,
    model_download_timeout_s: int = 1800,
    instance_count: int = 1,
) -> DeploySpec:
    return DeploySpec(
        endpoint_name=endpoint_name,
        instance_types=instance_types,
        instance_count=instance_count,
        image_uri=image_uri,
        role_arn=role_arn,
        environment=environment_for_plan(
            row, served_model_name=served_model_name, vllm_overrides=vllm_overrides, extra_env=extra_env
        ),
        model_label=f"{row.model}/{row.encoding}",
        inference_ami_version=inference_ami_version,
        startup_health_check_timeout_s=startup_health_check_timeout_s,
        model_download_timeout_s=model_download_timeout_s,
        owner=owner,
        ttl_s=ttl_s,
    )
