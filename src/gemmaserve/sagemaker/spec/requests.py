"""What each ``gemmaserve sagemaker …`` action is asked: one request model per action, both front ends built from it.

The input rules of SageMaker live here once: endpoint and role names, regions (normalised, one of
``--region``/``--regions``/``--all-regions``), ``ml.`` instance types (at most five in a pool), the
container environment's limits, the default AMI and the placeholder role of a dry run. Checks read
botocore's bundled service data only, never a profile. No boto3 client is built here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Self, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from gemmaserve.errors import UsageError
from gemmaserve.request_model import (
    ASKS_REMOTE,
    CONVERGES_REMOTE,
    CREATES_REMOTE,
    DELETES_REMOTE,
    PRUNES_REMOTE,
    READS,
    READS_REMOTE,
    ActionRequest,
    Cli,
    DryRun,
    ServingSettings,
    TensorParallelSize,
    exclusive,
    token_count,
)
from gemmaserve.sagemaker.spec.container import DEFAULT_AMI

# A dry run plans the calls without a role; this ARN only fills the CreateModel it shows.
DRY_RUN_ROLE_ARN = "arn:aws:iam::000000000000:role/DRY-RUN"

T = TypeVar("T")


def refuse(message: str, hint: str | None = None) -> ValueError:
    """A broken rule, fix included: pydantic keeps a ValueError's text (one line per problem), not its fields."""
    return ValueError(f"{message} {hint}" if hint else message)


def _rule(check: Callable[[T], T]) -> Callable[[T], T]:
    """A field check of the library (which raises UsageError) as a pydantic validator that keeps the fix."""

    @functools.wraps(check)
    def validate(value: T) -> T:
        try:
            return check(value)
        except UsageError as exc:
            raise refuse(exc.message, exc.hint) from None

    return validate


@_rule
def _region(value: str | None) -> str | None:
    from gemmaserve.sagemaker.aws import normalise_region

    return None if value is None else normalise_region(value)


def _split_regions(value: Any) -> Any:
    """``--regions a,b`` and ``--regions a --regions b`` (and MCP's list) mean the same."""
    if isinstance(value, str):
        return [part for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return [part for item in value for part in (item.split(",") if isinstance(item, str) else [item])]
    return value


@_rule
def _regions(value: list[str] | None) -> list[str] | None:
    from gemmaserve.sagemaker.spec.inputs import parse_regions

    return parse_regions(value) or None if value is not None else None


@_rule
def _instance_types(value: list[str]) -> list[str]:
    from gemmaserve.sagemaker.spec.inputs import validate_instance_types

    return validate_instance_types(value)


@_rule
def _ami(value: str) -> str:
    from gemmaserve.sagemaker.spec.inputs import validate_ami

    return validate_ami(value) or DEFAULT_AMI


@_rule
def _endpoint_name(value: str | None) -> str | None:
    from gemmaserve.sagemaker.spec.container import validate_endpoint_name

    return None if value is None else validate_endpoint_name(value)


@_rule
def _role_name(value: str) -> str:
    from gemmaserve.sagemaker.spec.container import validate_name

    return validate_name(value, kind="role", max_length=64)


@_rule
def _owner(value: str | None) -> str | None:
    from gemmaserve.sagemaker.spec.inputs import validate_tag_value

    return None if value is None else validate_tag_value(value, what="The owner")


@_rule
def _image(value: str | list[str] | None) -> str | list[str] | None:
    from gemmaserve.sagemaker.spec.inputs import validate_ecr_image

    if isinstance(value, list):
        return [validate_ecr_image(item, option="--image") for item in value]
    return None if value is None else validate_ecr_image(value, option="--image")


@_rule
def _base_image(value: str | None) -> str | None:
    from gemmaserve.sagemaker.spec.inputs import validate_image_reference

    return None if value is None else validate_image_reference(value, option="--base-image")


@_rule
def _wheel(value: Path | None) -> Path | None:
    """A file named as a wheel, a zip inside, with gemmaserve's own .dist-info."""
    import zipfile

    if value is None:
        return None
    hint = "Build one from the checkout: python -m pip wheel --no-deps -w dist ."
    if not value.is_file():
        raise UsageError(f"--wheel {value} is not a file.", hint=hint)
    if value.suffix != ".whl" or not zipfile.is_zipfile(value):
        raise UsageError(f"--wheel {value} is not a wheel (a .whl zip archive).", hint=hint)
    with zipfile.ZipFile(value) as archive:
        names = archive.namelist()
    if not any(re.fullmatch(r"gemmaserve-[^/]+\.dist-info/METADATA", name) for name in names):
        raise UsageError(f"--wheel {value} is not a gemmaserve wheel (no gemmaserve-*.dist-info inside).", hint=hint)
    return value


def _env_pairs(value: Any) -> Any:
    """A mapping (MCP, Python) or ``KEY=VALUE`` strings (the CLI's ``--env``) → ``KEY=VALUE`` strings."""
    if isinstance(value, dict):
        return [f"{key}={item}" for key, item in value.items()]
    return value


@_rule
def _env_checked(value: list[str] | None) -> list[str] | None:
    from gemmaserve.sagemaker.spec.inputs import validate_environment_limits

    if value is None:
        return None
    from gemmaserve.redact import remember_secret_settings

    env: dict[str, str] = {}
    for number, pair in enumerate(value, start=1):
        key, sep, item = pair.partition("=")
        if not sep or not key:
            # Never echo the pair: `HF_TOKEN hf_…` holds the token. Its first word names it well enough.
            first = pair.split(maxsplit=1)[0][:40] if pair.strip() else ""
            shown = f"{first!r}, …" if first and first != pair else "(empty)" if not first else repr(first)
            raise refuse(f"item {number} ({shown}) is not KEY=VALUE.", hint="For example: --env HF_TOKEN=hf_…")
        env[key] = item
    remember_secret_settings(env)
    validate_environment_limits(env)
    return [f"{key}={item}" for key, item in env.items()] or None


@_rule
def _s3_uri(value: str | None) -> str | None:
    if value is not None and not value.startswith("s3://"):
        raise refuse(f"{value!r} is not an S3 location.", hint="Give it as s3://bucket/prefix.")
    return value


# An expiry tag must be a date (and 10 years is no expiry in practice: --keep says that); CloudWatch keeps
# nothing older than its longest retention, 10 years either.
MAX_TTL_HOURS = 24 * 365 * 10
MAX_SINCE_MIN = 60 * 24 * 365 * 10


# The field checks of every request, by field name. They run as the model's own validators (not in the
# field types), so both front ends report them the same way: a UsageError naming the option.
FIELD_RULES: dict[str, Callable[[Any], Any]] = {
    "region": _region,
    "regions": _regions,
    "instance": _instance_types,
    "ami": _ami,
    "endpoint_name": _endpoint_name,
    "owner": _owner,
    "env": _env_checked,
    "role_name": _role_name,
    "model_s3": _s3_uri,
    "image": _image,
    "base_image": _base_image,
    "wheel": _wheel,
}


# A person may override preflight at their own terminal; an agent's deploy always passes it.
AGENT_MAY_NOT = "a person's override of preflight; an agent's deploy always passes preflight"


class InputRules(BaseModel):
    """Applies :data:`FIELD_RULES` to whichever of those fields a request has."""

    @field_validator("*")
    @classmethod
    def _input_rules(cls, value: Any, info: ValidationInfo) -> Any:
        rule = FIELD_RULES.get(info.field_name or "")
        return value if rule is None else rule(value)


class OneRegion(InputRules):
    """A request that acts in one region: its ``region`` field, else the AWS profile's default."""

    def chosen_region(self) -> str:
        from gemmaserve.sagemaker.aws import default_region

        region: str | None = getattr(self, "region", None)
        return default_region(region)


EndpointName = Annotated[str, Cli(argument=True), Field(description="The SageMaker endpoint name.")]
Region = Annotated[
    str | None,
    Field(description="AWS region (default: the AWS profile's, else us-east-1)."),
]
Regions = Annotated[
    list[str] | None,
    BeforeValidator(_split_regions),
    Field(description="Regions to try in order (comma-separated or repeated); give this or --region."),
]
AllRegions = Annotated[bool, Field(description="Sweep every region botocore lists for SageMaker.")]
Owner = Annotated[
    str | None,
    Field(
        description="The gemmaserve:owner tag (default: your user name, made tag-safe): deploy writes it, "
        "cleanup takes only what carries it."
    ),
]
BaseImage = Annotated[
    str | None, Field(description="Base image (default: the pinned AWS vLLM SageMaker image of the region).")
]
ListPrices = Annotated[bool, Field(description="Use the catalog's dated list prices, not the Pricing API.")]


class RegionChoice(InputRules):
    """One region, a list of regions, or (where offered) every region: which ones an action works in."""

    def region_choice(self) -> tuple[str | None, list[str] | None, bool]:
        return getattr(self, "region", None), getattr(self, "regions", None), bool(getattr(self, "all_regions", False))

    @model_validator(mode="after")
    def _one_way_to_choose(self) -> Self:
        region, regions, sweep = self.region_choice()
        given = [label for label, on in (("--region", region), ("--regions", regions), ("--all-regions", sweep)) if on]
        if len(given) > 1:
            raise refuse(
                f"Give one of {', '.join(given)}, not several.",
                hint="--regions a,b tries a first, then b; --region names one.",
            )
        return self

    def chosen_regions(self) -> list[str]:
        """The regions to act in: the sweep, the list, the one given, or the profile's default region.

        Raises:
            CredentialsMissing: when none was given and the AWS profile named by the environment does not exist.
        """
        from gemmaserve.sagemaker.aws import commercial_regions, default_region

        region, regions, sweep = self.region_choice()
        if sweep:
            return list(commercial_regions())
        return list(regions) if regions else [default_region(region)]


class DeploymentSettings(ServingSettings, RegionChoice):
    """What preflight checks and deploy creates: model, encoding, instance pool, image, role and AMI."""

    # The container's SM_VLLM_TENSOR_PARALLEL_SIZE carries a split over the instance's GPUs to vLLM.

    model: Annotated[str, Field(description="Catalog model, e.g. gemma-4-e2b (see gemmaserve plan).")]
    encoding: Annotated[str, Field(description="bf16, qat-w4a16, qat-q4_0-unquantized or gguf-q4_0.")] = "qat-w4a16"
    instance: Annotated[
        list[str],
        Field(
            min_length=1,
            description="SageMaker instance type (ml.…); repeat (at most 5, same GPU) for an InstancePools "
            "fallback in priority order.",
        ),
    ]
    image: Annotated[
        str | None,
        Field(description="Container image URI ({region} is filled in). Default: the pinned AWS vLLM image."),
    ] = None
    role_arn: Annotated[
        str | None, Field(description="Execution role (create one: gemmaserve sagemaker role create).")
    ] = None
    ami: Annotated[str, Field(description="InferenceAmiVersion of the instance.")] = DEFAULT_AMI
    regions: Regions = None
    region: Region = None
    tensor_parallel_size: Annotated[
        TensorParallelSize,
        Field(
            description="vLLM's --tensor-parallel-size (SM_VLLM_TENSOR_PARALLEL_SIZE in the container): the "
            "instance's GPUs the model is split over; it must equal the instance type's GPU count (the default)."
        ),
    ] = None

    def execution_role(self) -> str:
        """The role the Model is created with; a dry run shows a placeholder when none was given."""
        return self.role_arn or DRY_RUN_ROLE_ARN

    def tensor_parallel(self) -> int:
        """The split the container runs: the size given, or the GPU count of the pool's instance type."""
        from gemmaserve.sagemaker.spec.inputs import tensor_parallel_for_pool

        return tensor_parallel_for_pool(self.instance, self.tensor_parallel_size)

    @model_validator(mode="after")
    def _split_over_every_gpu(self) -> Self:
        try:
            self.tensor_parallel()
        except UsageError as exc:
            raise refuse(exc.message, exc.hint) from None
        return self

    @model_validator(mode="after")
    def _vllm_is_the_image_s(self) -> Self:
        """The image decides the vLLM: --vllm can only describe a custom --image, never change the pinned one."""
        if self.vllm is None:
            return self
        from gemmaserve.vllm_releases import resolve_release, sagemaker_image_series

        series = resolve_release(self.vllm).series
        if self.image is None and series != sagemaker_image_series():
            raise refuse(
                f"The pinned SageMaker image runs vLLM {sagemaker_image_series()}, not {series}: --vllm cannot "
                "change the vLLM inside an image.",
                hint="Drop --vllm, or give --image with an image that carries that vLLM (then --vllm says which).",
            )
        return self

    def plan_rows(self) -> dict[str, Any]:
        """The capacity plan of each catalog instance type in the pool, computed once and handed down.

        Types not in the catalog are left out (preflight reports them). Raises UnknownName for an
        unknown model or encoding.
        """
        from gemmaserve.catalog import resolve_encoding, resolve_gpu, resolve_instance, resolve_model
        from gemmaserve.errors import UnknownName
        from gemmaserve.plan import PlanTarget, plan_for

        model = resolve_model(self.model)
        checkpoint = resolve_encoding(model, self.encoding)
        rows = {}
        for name in self.instance:
            try:
                instance = resolve_instance(name)
            except UnknownName:
                continue
            split = self.tensor_parallel()
            target = PlanTarget(model, checkpoint, resolve_gpu(instance.gpu), instance, split)
            rows[name] = plan_for(target, self.serving())
        return rows


class PreflightRequest(DeploymentSettings, ActionRequest, action="sagemaker preflight", effect=READS_REMOTE):
    """``gemmaserve sagemaker preflight``: will this deploy work? Every check, each with its fix."""


class DeployOptions(InputRules):
    """What only a deploy takes: its name, lifetime, tags, extra flags and environment, and how to wait."""

    endpoint_name: Annotated[
        str | None,
        Cli(aliases=("--name",)),
        Field(description="Endpoint name (default: <model>-<gpu>)."),
    ] = None
    ttl_hours: Annotated[
        float,
        Field(
            gt=0,
            le=MAX_TTL_HOURS,
            allow_inf_nan=False,
            description="After this, `cleanup --expired` deletes it (at most 10 years: --keep never expires).",
        ),
    ] = 4.0
    keep: Annotated[
        bool, Field(description="Never expire, and keep what was created if the deploy is interrupted.")
    ] = False
    owner: Owner = None
    vllm_arg: Annotated[
        list[str] | None,
        Cli(metavar="FLAG"),
        Field(description="Extra vllm serve flag tokens, e.g. --vllm-arg=--enforce-eager."),
    ] = None
    env: Annotated[
        list[str] | None,
        BeforeValidator(_env_pairs),
        Cli(metavar="KEY=VALUE"),
        Field(description="Extra container environment KEY=VALUE (e.g. HF_TOKEN=…)."),
    ] = None
    startup_timeout_s: Annotated[
        int, Field(ge=60, le=3600, description="SageMaker's container startup health check timeout.")
    ] = 1800
    download_timeout_s: Annotated[
        int, Field(ge=60, le=3600, description="SageMaker's model data download timeout.")
    ] = 1800
    timeout_s: Annotated[float, Field(ge=60, description="How long to wait for InService.")] = 3600.0
    wait: Annotated[
        bool,
        Cli(flag_off="--no-wait"),
        Field(description="Wait for InService, with early failure diagnosis (--no-wait: return once creating)."),
    ] = True
    skip_preflight: Annotated[
        bool, Cli(cli_only=AGENT_MAY_NOT), Field(description="Deploy without running preflight first.")
    ] = False
    accept_unknown: Annotated[
        bool, Cli(cli_only=AGENT_MAY_NOT), Field(description="Deploy even when preflight could not check something.")
    ] = False
    list_prices: ListPrices = False
    dry_run: Annotated[bool, Field(description="Print the planned AWS calls and $/hour; create nothing.")] = False

    def environment(self) -> dict[str, str]:
        return dict(pair.partition("=")[::2] for pair in self.env or [])

    def ttl_s(self) -> float | None:
        return None if self.keep else self.ttl_hours * 3600.0


class DeployRequest(
    DeploymentSettings,
    DeployOptions,
    ActionRequest,
    action="sagemaker deploy",
    effect=CREATES_REMOTE,
    confirmation=True,
):
    """``gemmaserve sagemaker deploy``: Model → EndpointConfig → Endpoint, tagged with a TTL, after preflight.

    Options in ``--help`` order: what to deploy and where, then the deploy's own, then vLLM's settings.
    """

    @model_validator(mode="after")
    def _needs_a_role(self) -> Self:
        if self.role_arn is None and not self.dry_run:
            raise refuse(
                "deploy needs --role-arn (role_arn).",
                hint="Create one: gemmaserve sagemaker role create (or look first with --dry-run).",
            )
        return self

    def describe_change(self) -> str:
        where = ", ".join(self.instance)
        return f"deploy {self.model} on {where} (billed by the hour until deleted)"


class UpdateRequest(
    DeploymentSettings,
    DeployOptions,
    ActionRequest,
    action="sagemaker update",
    effect=CREATES_REMOTE,
    confirmation=True,
):
    """``gemmaserve sagemaker update NAME``: a new variant blue/green, with alarms and the quality and speed gate.

    What to serve comes from the same models as a deploy; the rest is the traffic-shifting policy.
    """

    endpoint_name: EndpointName  # the live endpoint: required here
    canary: Annotated[
        int | None,
        Cli(metavar="PERCENT"),
        Field(ge=1, le=50, description="Canary: this % of the new fleet takes traffic first (the default, 50)."),
    ] = None
    linear: Annotated[
        int | None,
        Cli(metavar="STEP"),
        Field(ge=10, le=50, description="Linear: shift in steps of this % of the new fleet (10-50)."),
    ] = None
    all_at_once: Annotated[bool, Field(description="Shift all traffic at once, then bake.")] = False
    bake_min: Annotated[
        float, Field(ge=0, le=60, description="Minutes each step bakes (watched by the alarms and the gate).")
    ] = 10.0
    termination_wait_min: Annotated[
        float, Field(ge=0, le=60, description="Minutes the old fleet stays up after the last shift.")
    ] = 0.0
    max_slowdown: Annotated[
        float,
        Cli(metavar="PERCENT"),
        Field(ge=0, le=100, description="Roll back when the new variant decodes more than this % slower."),
    ] = 10.0
    gate: Annotated[
        bool,
        Cli(flag_off="--no-gate"),
        Field(description="Measure old and new during the bake and roll back on a regression."),
    ] = True

    @model_validator(mode="after")
    def _one_policy(self) -> Self:
        chosen = [
            flag
            for flag, on in (
                ("--canary", self.canary is not None),
                ("--linear", self.linear is not None),
                ("--all-at-once", self.all_at_once),
            )
            if on
        ]
        if len(chosen) > 1:
            raise refuse(
                f"Give one traffic policy, not {' and '.join(chosen)}.",
                hint="--canary (default), --linear or --all-at-once.",
            )
        if self.role_arn is None and not self.dry_run:
            raise refuse("update needs --role-arn (role_arn).", hint="The role the new model runs as (as for deploy).")
        if self.regions is not None and len(self.regions) > 1:
            raise refuse("An endpoint lives in one region: give --region, not several.", hint="--region REGION")
        if not self.wait:
            raise refuse(
                "update follows the update to its end (the gate measures during the bake and rolls back).",
                hint="Drop --no-wait; --no-gate leaves the rollback to SageMaker's alarms alone.",
            )
        return self

    def policy_mode(self) -> tuple[str, int | None]:
        if self.all_at_once:
            return "ALL_AT_ONCE", None
        if self.linear is not None:
            return "LINEAR", self.linear
        return "CANARY", self.canary if self.canary is not None else 50

    def describe_change(self) -> str:
        mode, percent = self.policy_mode()
        size = f" {percent}%" if percent else ""
        return (
            f"update {self.endpoint_name} to {self.model} on {', '.join(self.instance)} ({mode}{size}; "
            "both fleets bill while it bakes)"
        )


class StatusRequest(OneRegion, ActionRequest, action="sagemaker status", effect=READS_REMOTE):
    """``gemmaserve sagemaker status``: one endpoint's state, placed type, image and $/hour."""

    endpoint_name: EndpointName
    region: Region = None


class WaitRequest(StatusRequest, action="sagemaker wait", effect=READS_REMOTE):
    """``gemmaserve sagemaker wait``: until InService, failing early on what will not recover."""

    timeout_s: Annotated[float, Field(ge=1, description="How long to wait for InService.")] = 3600.0
    poll_s: Annotated[float, Field(ge=1, description="Seconds between status reads.")] = 30.0


class LogsRequest(StatusRequest, action="sagemaker logs", effect=READS_REMOTE):
    """``gemmaserve sagemaker logs``: the endpoint's CloudWatch lines, filtered, and the engine facts."""

    since_min: Annotated[
        float, Field(gt=0, le=MAX_SINCE_MIN, allow_inf_nan=False, description="How far back to read, in minutes.")
    ] = 180.0
    contains: Annotated[str | None, Field(description="Only lines containing this text.")] = None
    grep: Annotated[
        str | None,
        Cli(metavar="REGEX"),
        Field(description="Only lines matching this regular expression."),
    ] = None
    tail: Annotated[int, Field(ge=0, le=5000, description="The last this many lines.")] = 200

    @model_validator(mode="after")
    def _pattern_compiles(self) -> Self:
        import re

        if self.grep is not None:
            try:
                re.compile(self.grep)
            except re.error as exc:
                raise refuse(f"--grep {self.grep!r} is not a regular expression: {exc}.") from None
        return self


class InvokeRequest(StatusRequest, action="sagemaker invoke", effect=ASKS_REMOTE):
    """``gemmaserve sagemaker invoke``: one OpenAI-style chat request to an endpoint."""

    endpoint_name: EndpointName  # first: the positional arguments are ENDPOINT_NAME PROMPT
    prompt: Annotated[str, Cli(argument=True), Field(min_length=1, description="The user message.")]
    max_tokens: Annotated[int, *token_count(ge=1, le=32768, description="Most tokens to generate.")] = 256
    temperature: Annotated[float, Field(ge=0, description="Sampling temperature (0: greedy).")] = 0.0
    stream: Annotated[
        bool,
        Cli(cli_only="prints text on a terminal as it arrives; a tool's answer comes whole"),
        Field(description="Stream through invoke_endpoint_with_response_stream (text as it arrives)."),
    ] = False


class DeleteRequest(StatusRequest, action="sagemaker delete", effect=DELETES_REMOTE, confirmation=True):
    """``gemmaserve sagemaker delete``: the endpoint, then its config, then its model(s)."""

    busy_timeout_s: Annotated[
        float, Field(ge=0, description="How long to wait while the endpoint is Creating/Updating.")
    ] = 1800.0
    dry_run: DryRun = False
    force: Annotated[bool, Field(description="Also delete what gemmaserve did not create (no gemmaserve tags).")] = (
        False
    )

    def describe_change(self) -> str:
        return f"delete endpoint {self.endpoint_name} and its config and model"


class ListRequest(RegionChoice, ActionRequest, action="sagemaker list", effect=READS_REMOTE):
    """``gemmaserve sagemaker list``: our endpoints with age, status and $/hour, and our leftovers."""

    regions: Regions = None
    all_regions: AllRegions = False
    region: Region = None
    list_prices: ListPrices = False


class CleanupRequest(ListRequest, action="sagemaker cleanup", effect=PRUNES_REMOTE, confirmation=True):
    """``gemmaserve sagemaker cleanup``: delete our expired endpoints and/or our unused models and configs."""

    expired: Annotated[bool, Field(description="Delete our endpoints past their TTL (never those tagged keep).")] = (
        False
    )
    orphans: Annotated[bool, Field(description="Delete our models and endpoint configs that no endpoint uses.")] = False
    journal: Annotated[
        bool,
        Field(
            description="Settle the deploy journal: delete what runs that ended without cleaning up sent (matched "
            "by their tags), close what SageMaker says is gone."
        ),
    ] = False
    owner: Owner = None
    any_owner: Annotated[
        bool, Field(description="Delete every owner's, not only yours (others' are otherwise listed and left alone).")
    ] = False
    dry_run: DryRun = False

    @model_validator(mode="after")
    def _something_to_clean(self) -> Self:
        if not (self.expired or self.orphans or self.journal):
            raise refuse(
                "cleanup needs --expired, --orphans, --journal or several.",
                hint="gemmaserve sagemaker cleanup --expired",
            )
        exclusive(self, "owner", "any_owner", "--owner sweeps one owner's resources, --any-owner everyone's.")
        return self

    def describe_change(self) -> str:
        what = " and ".join(
            x
            for x, on in (
                ("expired endpoint", self.expired),
                ("orphaned model/config", self.orphans),
                ("resource left in the deploy journal", self.journal),
            )
            if on
        )
        where = (
            "every SageMaker region"
            if self.all_regions
            else ", ".join(self.regions or [self.region or "the default region"])
        )
        whose = "for any owner, not only you" if self.any_owner else f"for {self.owner}" if self.owner else "for you"
        return f"delete every {what} gemmaserve made {whose} in {where}"  # fmt: skip


class AutoscaleRequest(StatusRequest, action="sagemaker autoscale", effect=CONVERGES_REMOTE, confirmation=True):
    """``gemmaserve sagemaker autoscale``: target tracking on invocations per instance."""

    min_instances: Annotated[int, Cli(aliases=("--min",)), Field(ge=1, description="Fewest instances.")] = 1
    max_instances: Annotated[int, Cli(aliases=("--max",)), Field(ge=1, description="Most instances (each one billed).")]
    target_invocations: Annotated[
        float,
        Field(gt=0, description="Target invocations per instance per minute (SageMakerVariantInvocationsPerInstance)."),
    ]
    scale_in_cooldown_s: Annotated[int, Field(ge=0, description="Seconds between scale-in steps.")] = 300
    scale_out_cooldown_s: Annotated[int, Field(ge=0, description="Seconds between scale-out steps.")] = 60
    dry_run: DryRun = False

    @model_validator(mode="after")
    def _min_not_above_max(self) -> Self:
        if self.min_instances > self.max_instances:
            raise refuse(
                f"--min-instances {self.min_instances} is above --max-instances {self.max_instances}.",
                hint="The minimum must be at most the maximum.",
            )
        return self

    def describe_change(self) -> str:
        return f"autoscale {self.endpoint_name} between {self.min_instances} and {self.max_instances} instances"


class JumpstartRequest(OneRegion, ActionRequest, action="sagemaker jumpstart", effect=READS_REMOTE):
    """``gemmaserve sagemaker jumpstart``: the public hub's Gemma 4 entries and their instance types."""

    region: Region = None
    name_filter: Annotated[
        str, Cli(aliases=("--filter",)), Field(min_length=1, description="NameContains for the hub search.")
    ] = "gemma"


class RoleCreateRequest(
    RegionChoice, ActionRequest, action="sagemaker role create", effect=CONVERGES_REMOTE, confirmation=True
):
    """``gemmaserve sagemaker role create``: the least-privilege endpoint execution role."""

    region: Region = None
    regions: Annotated[
        list[str] | None,
        BeforeValidator(_split_regions),
        Field(
            description="Regions the role must work in (deploy --regions fallbacks); regions it already serves "
            "are kept."
        ),
    ] = None
    role_name: Annotated[str, Cli(aliases=("--name",)), Field(description="The IAM role's name.")] = (
        "gemmaserve-endpoint"
    )
    image: Annotated[
        list[str] | None, Field(description="Image URIs the role may pull (default: the pinned AWS image).")
    ] = None
    model_s3: Annotated[
        str | None,
        Field(description="s3://bucket/prefix the endpoint may read model files from."),
    ] = None
    dry_run: DryRun = False

    def describe_change(self) -> str:
        return f"create or update the IAM role {self.role_name}"


class ImageRenderRequest(OneRegion, ActionRequest, action="sagemaker image render", effect=READS):
    """``gemmaserve sagemaker image render``: the derived T4 image's Dockerfile and buildspec, offline."""

    region: Region = None
    account: Annotated[str, Field(min_length=1, description="Account of the target ECR repository.")] = "ACCOUNT"
    base_image: BaseImage = None
    requirement: Annotated[
        str | None,
        Field(
            description="pip requirement for gemmaserve (default: a wheel built from this checkout; gemmaserve "
            "is not on the package index)."
        ),
    ] = None
    buildspec: Annotated[bool, Field(description="Show the buildspec instead of the Dockerfile.")] = False


class ImageBuildRequest(
    OneRegion, ActionRequest, action="sagemaker image build", effect=CREATES_REMOTE, confirmation=True
):
    """``gemmaserve sagemaker image build``: ECR repository, CodeBuild project and role, then build and push."""

    region: Region = None
    base_image: BaseImage = None
    requirement: Annotated[
        str | None, Field(description="pip requirement for gemmaserve instead of a wheel of this checkout.")
    ] = None
    wheel: Annotated[
        Path | None, Field(description="A gemmaserve wheel to install (default: built now from this checkout).")
    ] = None
    follow: Annotated[
        bool,
        Cli(flag_off="--no-follow"),
        Field(description="Follow the build to its end, reporting its phases (--no-follow: return once started)."),
    ] = True
    timeout_s: Annotated[float, Field(ge=60, description="How long to follow the build.")] = 5400.0
    dry_run: Annotated[bool, Field(description="Show the role, policy and target image; create nothing.")] = False

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        exclusive(self, "wheel", "requirement", "each names the vLLM the image installs.")
        return self

    def describe_change(self) -> str:
        where = self.region or "the default region"
        return f"create/update the CodeBuild project and run a build in {where} (billed per build minute)"


REQUESTS = (
    PreflightRequest,
    DeployRequest,
    UpdateRequest,
    StatusRequest,
    WaitRequest,
    LogsRequest,
    InvokeRequest,
    DeleteRequest,
    ListRequest,
    CleanupRequest,
    AutoscaleRequest,
    JumpstartRequest,
    RoleCreateRequest,
    ImageRenderRequest,
    ImageBuildRequest,
)
