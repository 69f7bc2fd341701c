"""The pinned AWS vLLM SageMaker image's URIs, the host AMIs' CUDA levels, and the rule between them (pure).

The pinned image itself (tag, vLLM, CUDA, source) is recorded once, in :mod:`gemmaserve.pinned_image`.
It is both the stock serving image and the base of the derived T4 image, so its vLLM must lie
inside the Turing clamp's supported range (``gemmaserve.turing.versions``); a test holds that.
AMI driver/CUDA levels: the ``InferenceAmiVersion`` documentation of CreateEndpointConfig.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel

from gemmaserve.errors import UsageError
from gemmaserve.pinned_image import PINNED_IMAGE
from gemmaserve.redact import MASK, is_secret_name

DLC_ACCOUNT = "763104351884"
DEFAULT_IMAGE_REPOSITORY = PINNED_IMAGE.repository
DEFAULT_IMAGE_TAG = PINNED_IMAGE.tag
DEFAULT_IMAGE_CUDA = (13, 0)
DEFAULT_IMAGE_SOURCE = PINNED_IMAGE.source
# Regions where the DLC account is not 763104351884 (opt-in and China regions).
_DLC_ACCOUNT_BY_REGION = {"cn-north-1": "727897471807", "cn-northwest-1": "727897471807"}

# Labels the derived T4 image carries (see image.py) so preflight can tell it from the stock one.
TURING_CLAMP_LABEL = "io.gemmaserve.turing-clamp"
TURING_TAG_MARK = "turing"  # for people reading tags only: no check trusts a tag's text

DEFAULT_AMI = "al2023-ami-sagemaker-inference-gpu-4-1"


class AmiLevel(BaseModel):
    name: str
    driver_major: int
    cuda: tuple[int, int]


AMI_LEVELS: dict[str, AmiLevel] = {
    level.name: level
    for level in (
        AmiLevel(name="al2-ami-sagemaker-inference-gpu-2", driver_major=535, cuda=(12, 2)),
        AmiLevel(name="al2-ami-sagemaker-inference-gpu-2-1", driver_major=535, cuda=(12, 2)),
        AmiLevel(name="al2-ami-sagemaker-inference-gpu-3-1", driver_major=550, cuda=(12, 4)),
        AmiLevel(name="al2023-ami-sagemaker-inference-gpu-4-1", driver_major=580, cuda=(13, 0)),
    )
}
# Without InferenceAmiVersion SageMaker picks by family (same documentation page):
# ml.g4dn / ml.g5 / ml.p4d get driver 470 (CUDA 11.4); ml.g6 / ml.p5 get 535 (CUDA 12.2).
_DEFAULT_HOST_CUDA_BY_FAMILY = {
    "g4dn": (11, 4),
    "g5": (11, 4),
    "p4d": (11, 4),
    "g6": (12, 2),
    "g6e": (12, 2),
    "p5": (12, 2),
}


class CudaVerdict(StrEnum):
    OK = "ok"
    MINOR_NEWER = "minor-newer"  # same major: runs through CUDA minor-version compatibility, PTX JIT excepted
    TOO_NEW = "too-new"
    UNKNOWN = "unknown"


def default_image_uri(region: str) -> str:
    account = _DLC_ACCOUNT_BY_REGION.get(region, DLC_ACCOUNT)
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"{account}.dkr.ecr.{region}{suffix}/{DEFAULT_IMAGE_REPOSITORY}:{DEFAULT_IMAGE_TAG}"


def image_for_region(image_uri: str | None, region: str) -> str:
    """The image to use in ``region``: the default, or the user's with ``{region}`` filled in."""
    if image_uri is None:
        return default_image_uri(region)
    return image_uri.replace("{region}", region)


def image_region(image_uri: str) -> str | None:
    match = re.match(r"^\d{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com", image_uri)
    return match.group(1) if match else None


def image_cuda_version(image_uri: str) -> tuple[int, int] | None:
    """The image's CUDA version from its tag (``cu130``, ``cu129``, ``cuda13.0``) or the pin; None if unknown."""
    tag = image_uri.rsplit(":", 1)[-1] if ":" in image_uri.rsplit("/", 1)[-1] else ""
    if image_uri.endswith(f"/{DEFAULT_IMAGE_REPOSITORY}:{DEFAULT_IMAGE_TAG}") or tag.startswith(
        DEFAULT_IMAGE_TAG + "-"
    ):
        return DEFAULT_IMAGE_CUDA  # the pin, or an image derived from it (image.py keeps the base tag as prefix)
    match = re.search(r"cu(\d{2})(\d)(?!\d)", tag) or re.search(r"cuda-?(\d{2})\.(\d)", tag)
    if match:
        return int(match.group(1)), int(match.group(2))
    return None


def host_cuda_version(instance_type: str, ami_version: str | None) -> tuple[int, int] | None:
    if ami_version:
        level = AMI_LEVELS.get(ami_version)
        return level.cuda if level else None
    family = instance_type.removeprefix("ml.").split(".")[0]
    return _DEFAULT_HOST_CUDA_BY_FAMILY.get(family)


def cuda_verdict(image_cuda: tuple[int, int] | None, host_cuda: tuple[int, int] | None) -> CudaVerdict:
    if image_cuda is None or host_cuda is None:
        return CudaVerdict.UNKNOWN
    if image_cuda <= host_cuda:
        return CudaVerdict.OK
    if image_cuda[0] == host_cuda[0]:
        return CudaVerdict.MINOR_NEWER
    return CudaVerdict.TOO_NEW


def ami_for_cuda(image_cuda: tuple[int, int] | None) -> str:
    """The lowest AMI whose CUDA covers the image (the newest when the image's CUDA is unknown)."""
    if image_cuda is not None:
        for level in sorted(AMI_LEVELS.values(), key=lambda item: item.cuda):
            if level.cuda >= image_cuda:
                return level.name
    return DEFAULT_AMI


def image_claims_turing_clamp(
    image_uri: str, labels: dict[str, str] | None = None, build_verified: bool | None = None
) -> bool | None:
    """Whether the image carries our Turing clamp, from what the build wrote, never from the tag's text.

    ``labels``: the image's labels, when read; ``build_verified``: the build record's verdict for
    this URI (``image build`` writes one after the in-image check passed), when there is one.
    The stock AWS image is known not to; anything else is unknown (None).
    """
    if labels is not None:
        return labels.get(TURING_CLAMP_LABEL) == "verified"
    if build_verified is not None:
        return build_verified
    if image_uri.rsplit("/", 1)[-1].startswith(f"{DEFAULT_IMAGE_REPOSITORY}:") and image_uri.split("/", 1)[0].split(
        "."
    )[0] in (DLC_ACCOUNT, *_DLC_ACCOUNT_BY_REGION.values()):
        return False  # an AWS vLLM image: stock vLLM fails on T4 with OutOfResources
    return None


# --- names ---
# SageMaker resource names: validation before any call, and the names a deploy derives (pure).
#
# Model, EndpointConfig and Endpoint names share one rule in the service model:
# ``^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`` (1–63 characters, letters, digits and
# hyphens, no leading/trailing hyphen). A deploy names its model and config after
# the endpoint so a partial deploy can be found and deleted by name alone.


MAX_NAME_LENGTH = 63
MODEL_SUFFIX = "-model"
CONFIG_SUFFIX = "-config"
MAX_ENDPOINT_NAME_LENGTH = MAX_NAME_LENGTH - max(len(MODEL_SUFFIX), len(CONFIG_SUFFIX))
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
VARIANT_NAME = "AllTraffic"


def validate_name(name: str, *, kind: str = "endpoint", max_length: int = MAX_NAME_LENGTH) -> str:
    """Return ``name`` if SageMaker accepts it for ``kind``; raise :class:`UsageError` saying why not."""
    if not name:
        raise UsageError(f"The {kind} name is empty.", hint="Give a name such as gemma4-e2b-t4.")
    if len(name) > max_length:
        raise UsageError(
            f"The {kind} name {name!r} is {len(name)} characters; at most {max_length} are allowed.",
            hint=f"Use a shorter name (≤ {max_length} characters).",
            name=name,
        )
    if not _NAME.match(name):
        raise UsageError(
            f"The {kind} name {name!r} is not valid: use letters, digits and hyphens, "
            "starting and ending with a letter or digit.",
            hint="For example: gemma4-e2b-t4",
            name=name,
        )
    return name


def validate_endpoint_name(name: str) -> str:
    """An endpoint name short enough that its derived model and config names are valid too."""
    return validate_name(name, kind="endpoint", max_length=MAX_ENDPOINT_NAME_LENGTH)


def model_name_for(endpoint_name: str) -> str:
    return validate_name(endpoint_name + MODEL_SUFFIX, kind="model")


def config_name_for(endpoint_name: str) -> str:
    return validate_name(endpoint_name + CONFIG_SUFFIX, kind="endpoint config")


def default_endpoint_name(model_key: str, gpu_key: str) -> str:
    """A readable endpoint name from the catalog keys, e.g. ``gemma-4-e2b`` + ``t4`` → ``gemma-4-e2b-t4``."""
    cleaned = re.sub(r"[^a-zA-Z0-9]+", "-", f"{model_key}-{gpu_key}").strip("-")
    return validate_endpoint_name(cleaned[:MAX_ENDPOINT_NAME_LENGTH].strip("-"))


# --- env_mapping ---
# The ``SM_VLLM_*`` environment ↔ ``vllm serve`` flags rule of the AWS vLLM SageMaker container (pure).
#
# The container's entrypoint turns each ``SM_VLLM_FOO_BAR=v`` into ``--foo-bar v``
# (prefix stripped, lower-cased, ``_`` → ``-``; an empty value gives a bare flag):
# aws/deep-learning-containers ``vllm/build_artifacts/sagemaker_entrypoint.sh`` and
# vllm-project/vllm ``examples/online_serving/sagemaker-entrypoint.sh``. The AL2023
# images document ``true`` → bare flag and ``false`` → flag omitted
# (https://aws.github.io/deep-learning-containers/vllm/configuration/); a JSON array
# gives one token per element. :func:`environment_for_plan` builds a deploy's environment from its plan
# row (the plan's flags, the served name, the user's overrides). No I/O here.


class PlannedServe(Protocol):
    """What :func:`environment_for_plan` reads of a plan row (``gemmaserve.plan.PlanRow``)."""

    @property
    def model(self) -> str: ...
    @property
    def vllm_args(self) -> list[str]: ...
    @property
    def tensor_parallel_size(self) -> int: ...


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
    row: PlannedServe,
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


# --- tags ---
# The tags gemmaserve puts on everything it creates, and reading them back (pure).
#
# A resource is ours when it carries ``gemmaserve:tool=gemmaserve``; its owner and
# expiry (an absolute UTC time, so no clock of ours has to be trusted later) let
# ``list`` and ``cleanup --expired`` find what is leaking money.


TOOL_KEY = "gemmaserve:tool"
TOOL_VALUE = "gemmaserve"
OWNER_KEY = "gemmaserve:owner"
EXPIRES_KEY = "gemmaserve:expires-at"
CREATED_KEY = "gemmaserve:created-at"
MODEL_KEY = "gemmaserve:model"
KEEP_KEY = "gemmaserve:keep"
MAX_TAG_VALUE_LENGTH = 256


class ToolTags(BaseModel):
    """What our tags say about one resource."""

    owner: str | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
    model: str | None = None
    keep: bool = False


def build_tags(
    *,
    owner: str,
    now: datetime,
    ttl_s: float | None,
    model: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """Tags in the API's ``[{"Key", "Value"}]`` form. ``ttl_s=None`` marks the resource to keep."""
    if ttl_s is not None and ttl_s <= 0:
        raise UsageError(f"TTL must be positive, got {ttl_s} s.", hint="Give --ttl-hours > 0, or --keep.")
    tags = {TOOL_KEY: TOOL_VALUE, OWNER_KEY: owner or "unknown", CREATED_KEY: _iso(now)}
    if ttl_s is None:
        tags[KEEP_KEY] = "true"
    else:
        tags[EXPIRES_KEY] = _iso(now + timedelta(seconds=ttl_s))
    if model:
        tags[MODEL_KEY] = model
    for key, value in (extra or {}).items():
        tags[key] = value
    return [{"Key": key, "Value": value[:MAX_TAG_VALUE_LENGTH]} for key, value in tags.items()]


def tags_to_dict(tags: Sequence[Mapping[str, str]]) -> dict[str, str]:
    return {str(tag["Key"]): str(tag.get("Value", "")) for tag in tags}


def is_ours(tags: Mapping[str, str]) -> bool:
    return tags.get(TOOL_KEY) == TOOL_VALUE


def made_by_run(tags: Mapping[str, str], created_tag: str | None) -> bool:
    """Whether a resource with these tags is the one a given run made: ours, with that run's created-at (a
    later run of the same name writes its own)."""
    return is_ours(tags) and tags.get(CREATED_KEY) == created_tag


def parse_tags(tags: Mapping[str, str]) -> ToolTags | None:
    """Our tags on a resource, or ``None`` when gemmaserve did not create it."""
    if not is_ours(tags):
        return None
    return ToolTags(
        owner=tags.get(OWNER_KEY),
        created_at=_parse_time(tags.get(CREATED_KEY)),
        expires_at=_parse_time(tags.get(EXPIRES_KEY)),
        model=tags.get(MODEL_KEY),
        keep=tags.get(KEEP_KEY) == "true",
    )


def is_expired(tool_tags: ToolTags, now: datetime) -> bool:
    """Past its TTL. A resource marked keep, or with no readable expiry, never expires on its own."""
    if tool_tags.keep or tool_tags.expires_at is None:
        return False
    return now >= tool_tags.expires_at


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("tag times must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC)


# --- secrets ---
# Which container variables hold secrets, and the masked copies that every output shows instead (pure).
#
# A name is secret when it contains TOKEN (not the plural TOKENS of counts such as
# ``SM_VLLM_MAX_NUM_BATCHED_TOKENS``, nor TOKENIZER), KEY, SECRET, PASSWORD/PASSWD or CREDENTIAL, in
# any case: ``HF_TOKEN``, ``SM_VLLM_API_KEY``, ``AWS_SECRET_ACCESS_KEY`` (the rule of
# :mod:`gemmaserve.redact`, which also hides these values from every other output). Values are still
# sent to CreateModel as given; only what is printed, returned as JSON or given to an MCP client is masked.


__all__ = [
    "MASK",
    "is_secret_name",
    "mask_call_params",
    "mask_environment",
    "mask_serve_args",
    "scrub",
    "secret_values",
]


def mask_environment(env: Mapping[str, str]) -> dict[str, str]:
    return {key: MASK if is_secret_name(key) and value else value for key, value in env.items()}


def mask_serve_args(args: Sequence[str]) -> list[str]:
    """``--api-key abc`` → ``--api-key ***`` (and ``--hf-token=abc`` → ``--hf-token=***``)."""
    masked: list[str] = []
    hide_next = False
    for token in args:
        if token.startswith("--"):
            name, sep, _ = token.partition("=")
            secret = is_secret_name(name.replace("-", "_"))
            masked.append(f"{name}={MASK}" if sep and secret else token)
            hide_next = secret and not sep
            continue
        masked.append(MASK if hide_next else token)
    return masked


def mask_call_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A CreateModel request with its containers' secret variables masked (other requests unchanged)."""
    masked = dict(params)
    for key in ("PrimaryContainer",):
        if isinstance(masked.get(key), Mapping):
            container = dict(masked[key])
            if isinstance(container.get("Environment"), Mapping):
                container["Environment"] = mask_environment(container["Environment"])
            masked[key] = container
    if isinstance(masked.get("Containers"), list):
        masked["Containers"] = [
            mask_call_params({"PrimaryContainer": c})["PrimaryContainer"] for c in masked["Containers"]
        ]
    return masked


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values to scrub from any text shown (longest first, so a value inside another goes too)."""
    return sorted(
        {value for key, value in env.items() if is_secret_name(key) and len(value) >= 4}, key=len, reverse=True
    )


def scrub(text: str, values: Sequence[str]) -> str:
    """``text`` with each secret value replaced by ``***`` (AWS echoes request values in validation errors)."""
    for value in values:
        text = text.replace(value, MASK)
    return text
