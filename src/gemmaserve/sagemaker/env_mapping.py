"""The ``SM_VLLM_*`` environment ↔ ``vllm serve`` flags rule of the AWS vLLM SageMaker container (pure).

The container's entrypoint turns each ``SM_VLLM_FOO_BAR=v`` into ``--foo-bar v``
(prefix stripped, lower-cased, ``_`` → ``-``; an empty value gives a bare flag):
aws/deep-learning-containers ``vllm/build_artifacts/sagemaker_entrypoint.sh`` and
vllm-project/vllm ``examples/online_serving/sagemaker-entrypoint.sh``. The AL2023
images document ``true`` → bare flag and ``false`` → flag omitted
(https://aws.github.io/deep-learning-containers/vllm/configuration/); a JSON array
gives one token per element. :func:`environment_for_plan` builds a deploy's environment from its plan
row (the plan's flags, the served name, the user's overrides). No I/O here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gemmaserve.errors import UsageError

if TYPE_CHECKING:
    from gemmaserve.plan import PlanRow

PREFIX = "SM_VLLM_"
# The image's tensor-parallel setting: "SM_VLLM_TENSOR_PARALLEL_SIZE | Number of GPUs | 1"
# (https://aws.github.io/deep-learning-containers/vllm/configuration/), i.e. vLLM's --tensor-parallel-size.
TENSOR_PARALLEL_ENV = PREFIX + "TENSOR_PARALLEL_SIZE"
_ENV_NAME = re.compile(r"^SM_VLLM_[A-Z0-9_]+$")
_FLAG = re.compile(r"^--([a-z0-9][a-z0-9_-]*)$")


def env_to_serve_args(env: Mapping[str, str]) -> list[str]:
    """The ``vllm serve`` arguments the container derives from ``env`` (other variables ignored).

    Order follows ``env``'s iteration order, as the container's ``env`` listing does;
    vLLM's parser does not depend on the order of named flags.
    """
    args: list[str] = []
    for key, value in env.items():
        if not key.startswith(PREFIX):
            continue
        flag = "--" + key[len(PREFIX) :].lower().replace("_", "-")
        lowered = value.strip().lower()
        if lowered == "false":
            continue
        if lowered in ("true", ""):
            args.append(flag)
            continue
        elements = _json_array(value)
        if elements is not None:
            args.append(flag)
            args.extend(elements)
            continue
        args.extend([flag, value])
    return args


def serve_args_to_env(args: Sequence[str]) -> dict[str, str]:
    """The ``SM_VLLM_*`` environment that makes the container run ``vllm serve *args``.

    A leading positional argument is the model (``SM_VLLM_MODEL``). A bare flag
    becomes ``true``; a flag with several values a JSON array. Raises
    :class:`UsageError` for arguments the container's rule cannot express.
    """
    env: dict[str, str] = {}
    tokens = list(args)
    if tokens and tokens[0] == "serve":
        tokens = tokens[1:]
    if tokens and not tokens[0].startswith("--"):
        env[PREFIX + "MODEL"] = tokens.pop(0)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        name, inline_value = _split_flag(token)
        values: list[str] = [] if inline_value is None else [inline_value]
        index += 1
        if inline_value is None:
            while index < len(tokens) and not _looks_like_flag(tokens[index]):
                values.append(tokens[index])
                index += 1
        key = PREFIX + name.replace("-", "_").upper()
        if key in env:
            raise UsageError(f"vllm flag --{name} is given twice.", hint="Give each flag once.")
        env[key] = _encode_values(name, values)
    return env


def _split_flag(token: str) -> tuple[str, str | None]:
    flag, sep, value = token.partition("=")
    match = _FLAG.match(flag)
    if not match:
        raise UsageError(
            f"{token!r} is not a long vllm flag; the SM_VLLM_* rule can only express '--name [value…]'.",
            hint="Write flags as --foo-bar VALUE (short flags like -tp have a long form).",
        )
    return match.group(1), (value if sep else None)


def _looks_like_flag(token: str) -> bool:
    return token.startswith("--")


def _encode_values(name: str, values: list[str]) -> str:
    if not values:
        return "true"
    if len(values) > 1:
        return json.dumps(values)
    value = values[0]
    if value.strip().lower() in ("true", "false", ""):
        raise UsageError(
            f"--{name} {value!r} cannot pass through the container: it reads 'true'/'false'/empty as a switch.",
            hint=f"Give --{name} alone to set it, or leave it out to unset it.",
        )
    if _json_array(value) is not None:
        raise UsageError(
            f"--{name} {value!r} would be split into one argument per element by the container.",
            hint="Pass the elements as separate values instead.",
        )
    return value


def _json_array(value: str) -> list[str] | None:
    text = value.strip()
    if not text.startswith("["):
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(parsed, list):
        return None
    return [item if isinstance(item, str) else json.dumps(item) for item in parsed]


def validate_environment(env: Mapping[str, str]) -> None:
    """Refuse ``SM_VLLM_*`` names the container would turn into a flag vLLM cannot have."""
    for key in env:
        if key.startswith(PREFIX) and not _ENV_NAME.match(key):
            raise UsageError(
                f"Environment variable {key!r} does not map to a vllm flag.",
                hint="Use upper-case letters, digits and underscores after SM_VLLM_.",
            )
        if key.startswith(PREFIX) and key.endswith("_"):
            raise UsageError(f"Environment variable {key!r} ends in '_' (a flag ending in '-').")


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
    planned = str(row.tensor_parallel_size)
    given = env.get(TENSOR_PARALLEL_ENV, "1")
    if given.strip().lower() in ("", "true", "false") or given != planned:
        # The plan's memory is one rank's of its own split: another size would start what was not checked.
        raise UsageError(
            f"The container environment sets {TENSOR_PARALLEL_ENV}={given!r}, but the plan splits the model "
            f"over {planned} GPU(s).",
            hint=f"Give --tensor-parallel-size instead of setting {TENSOR_PARALLEL_ENV} or --vllm-arg "
            "--tensor-parallel-size, so preflight checks the split the container runs.",
        )
    if row.tensor_parallel_size == 1:
        env.pop(TENSOR_PARALLEL_ENV, None)
    return env
