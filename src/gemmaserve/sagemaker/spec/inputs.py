"""What the user typed, checked against the service's own rules before anything is sent or billed (pure).

The rules come from botocore's SageMaker service model (instance-type and AMI enums,
environment and tag patterns and lengths) and its endpoint data (which regions have
SageMaker), not from hand-kept lists, so they move with the installed botocore.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from gemmaserve.errors import UsageError
from gemmaserve.sagemaker.aws import normalise_region, service_model

MAX_POOL_TYPES = 5  # InstancePools: 1-5 types (CreateEndpointConfig)
_TAG_PUNCTUATION = set("_.:/=+-@")


def _shape(name: str) -> Any:
    return service_model().shape_for(name)


def parse_regions(regions: str | Iterable[str] | None) -> list[str]:
    """A comma-separated string or a list → distinct normalised regions, order kept."""
    items = regions.split(",") if isinstance(regions, str) else list(regions or [])
    chosen: list[str] = []
    for item in items:
        if not item.strip():
            continue
        region = normalise_region(item)
        if region not in chosen:
            chosen.append(region)
    return chosen


def validate_instance_types(instance_types: Iterable[str]) -> list[str]:
    """SageMaker hosting types (``ml.`` prefix, in the service's enum), 1-5, each once."""
    types = list(instance_types)
    if not types:
        raise UsageError("No instance type given.", hint="For example: --instance ml.g6.xlarge")
    if len(types) > MAX_POOL_TYPES:
        raise UsageError(
            f"{len(types)} instance types given; an InstancePools fallback takes at most {MAX_POOL_TYPES}.",
            hint="Keep the five you prefer, in priority order.",
            instance_types=types,
        )
    if len(set(types)) != len(types):
        raise UsageError(f"Instance types repeat: {types}", hint="List each type once.", instance_types=types)
    known = set(_shape("ProductionVariantInstanceType").enum)
    for instance_type in types:
        if instance_type in known:
            continue
        guess = "ml." + instance_type.strip().lower().removeprefix("ml.")
        hint = (
            f"SageMaker names it {guess} (hosting types start with 'ml.' and are priced apart from EC2)."
            if guess in known
            else "See the ProductionVariantInstanceType list in the SageMaker API reference."
        )
        raise UsageError(
            f"{instance_type!r} is not a SageMaker hosting instance type.", hint=hint, instance_type=instance_type
        )
    return types


# vLLM starts ``--tensor-parallel-size N`` as N worker processes, rank i on the host's GPU i; a world larger than
# the host's GPUs is refused at start ("World size (N) is larger than the number of available GPUs", read in
# vllm 0.32.0 config/parallel.py:1047-1058), one smaller runs but leaves the other GPUs idle. A SageMaker
# real-time endpoint runs one container per instance and the AWS vLLM image one ``vllm serve`` in it
# (SM_VLLM_TENSOR_PARALLEL_SIZE, "Number of GPUs", default 1:
# https://aws.github.io/deep-learning-containers/vllm/configuration/), so nothing else would use them:
# the billed GPUs and N must match.
def tensor_parallel_for_pool(instance_types: Iterable[str], asked: int | None) -> int:
    """The ``--tensor-parallel-size`` a deploy on these types runs with: the one asked, which must equal
    the instance's GPU count, or (none asked) that count. Types outside the catalog are left to preflight.

    Raises:
        UsageError: when the pool's types differ in GPU count, or ``asked`` is not the instance's count.
    """
    from gemmaserve.catalog import load_catalog

    catalog = load_catalog().instances
    counts = {name: catalog[name].gpu_count for name in instance_types if name in catalog}
    if not counts:
        return asked or 1
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{name} ({count})" for name, count in counts.items())
        raise UsageError(
            f"The instance pool mixes GPU counts: {listed}; one container environment sets one "
            "--tensor-parallel-size for every type SageMaker may place.",
            hint="List only instance types with as many GPUs as each other.",
            instance_types=list(counts),
        )
    gpus = next(iter(counts.values()))
    if asked is None or asked == gpus:
        return gpus
    first = next(iter(counts))
    gpu = catalog[first].gpu
    same_gpu = sorted(
        (
            item
            for item in catalog.values()
            if item.platform == "sagemaker" and item.gpu == gpu and item.gpu_count == asked
        ),
        key=lambda item: item.memory_gib,
    )
    other = (
        f" or an instance type with {asked} {gpu.upper()} ({', '.join(i.key for i in same_gpu)})" if same_gpu else ""
    )
    idle = (
        f"vLLM would use {asked} and leave {gpus - asked} billed and idle"
        if asked < gpus
        else f"vLLM refuses to start {asked} ranks on {gpus}"
    )
    raise UsageError(
        f"--tensor-parallel-size {asked} does not match {first}'s {gpus} GPU(s): {idle}.",
        hint=f"Use --tensor-parallel-size {gpus} (or leave it out){other}.",
        instance_type=first,
        tensor_parallel_size=asked,
    )


def validate_ami(ami: str | None) -> str | None:
    """An ``InferenceAmiVersion`` the service knows, or None (the service's default)."""
    if ami is None:
        return None
    known = list(_shape("ProductionVariantInferenceAmiVersion").enum)
    if ami not in known:
        raise UsageError(f"{ami!r} is not an InferenceAmiVersion.", hint="One of: " + ", ".join(known), ami=ami)
    return ami


def validate_environment_limits(env: Mapping[str, str]) -> None:
    """The container environment's limits in CreateModel: entries, key pattern, key and value lengths."""
    map_shape, key_shape, value_shape = _shape("EnvironmentMap"), _shape("EnvironmentKey"), _shape("EnvironmentValue")
    if len(env) > map_shape.metadata["max"]:
        raise UsageError(
            f"The container environment has {len(env)} variables; at most {map_shape.metadata['max']} are allowed.",
            hint="Drop some --env/--vllm-arg settings.",
        )
    key_pattern = re.compile(key_shape.metadata["pattern"])
    for key, value in env.items():
        if not key_pattern.fullmatch(key) or len(key) > key_shape.metadata["max"]:
            raise UsageError(
                f"Environment variable name {key!r} is not allowed by SageMaker.",
                hint="Names are letters, digits and '_', not starting with a digit.",
                name=key,
            )
        if len(value) > value_shape.metadata["max"]:
            raise UsageError(
                f"The value of {key} is {len(value):,} characters; SageMaker allows {value_shape.metadata['max']:,}.",
                hint="Pass long values another way (a file in S3 the container reads).",
                name=key,
            )


def tag_value_ok(value: str) -> bool:
    """TagValue's pattern ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*`` and length (Python's re has no \\p classes)."""
    if len(value) > _shape("TagValue").metadata["max"]:
        return False
    return all(char in _TAG_PUNCTUATION or unicodedata.category(char)[0] in "LZN" for char in value)


def tag_safe(value: str) -> str:
    """``CORP\\jdoe`` → ``CORP-jdoe``: each character a tag value cannot hold becomes '-'."""
    cleaned = "".join(
        char if char in _TAG_PUNCTUATION or unicodedata.category(char)[0] in "LZN" else "-" for char in value
    )
    return cleaned[: _shape("TagValue").metadata["max"]] or "unknown"


def validate_tag_value(value: str, *, what: str) -> str:
    if not tag_value_ok(value):
        raise UsageError(
            f"{what} {value!r} cannot be a SageMaker tag value.",
            hint="Use letters, digits, spaces and _ . : / = + - @ (at most 256 characters), e.g. " + tag_safe(value),
            value=value,
        )
    return value


# SageMaker hosting pulls a model's image from a private ECR repository (CreateModel's
# PrimaryContainer.Image: "the Amazon EC2 Container Registry (Amazon ECR) path where inference code is
# stored"; a registry in your VPC needs RepositoryAccessMode=Vpc, which gemmaserve does not set).
# ``{region}`` stands for the region a deploy lands in (fallback regions).
_ECR_IMAGE = re.compile(
    r"[0-9]{12}\.dkr\.ecr(?:-fips)?\.(?:\{region\}|[a-z]{2}(?:-[a-z]+)+-[0-9])\.amazonaws\.com(?:\.cn)?"
    r"/[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})"
)
# A full Docker image reference with its registry (a host with a dot or a port) and a tag or digest:
# CodeBuild pulls the base by exactly this name.
_IMAGE_REFERENCE = re.compile(
    r"[a-z0-9-]+(?:\.[a-z0-9-]+)+(?::[0-9]+)?"
    r"/[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})"
)


def validate_ecr_image(uri: str, *, option: str) -> str:
    if not _ECR_IMAGE.fullmatch(uri):
        raise UsageError(
            f"{option} {uri!r} is not an ECR image URI: SageMaker pulls a model's image only from ECR.",
            hint="Give it as ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY:TAG (or @sha256:DIGEST); a derived "
            "T4 image comes from: gemmaserve sagemaker image build",
        )
    return uri


def validate_image_reference(reference: str, *, option: str) -> str:
    if not _IMAGE_REFERENCE.fullmatch(reference):
        raise UsageError(
            f"{option} {reference!r} is not a full image reference (REGISTRY/REPOSITORY:TAG or @sha256:DIGEST, "
            "lower case).",
            hint="For example the default: 763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:<tag>; leave it out "
            "for the pinned AWS vLLM image.",
        )
    return reference
