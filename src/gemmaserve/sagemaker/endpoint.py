"""Deploy: Model → EndpointConfig → Endpoint, planned first (pure), then created with teardown on interrupt.

``plan_deploy`` turns a :class:`DeploySpec` into the exact API calls, the ``vllm serve``
flags the container will derive, and $/hour — that is what ``--dry-run`` prints.
``execute_deploy`` makes the calls; a Ctrl-C or any exception before the endpoint is
InService deletes what this run created, unless ``keep``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from gemmaserve.errors import UsageError
from gemmaserve.sagemaker.aws import call
from gemmaserve.sagemaker.container import DEFAULT_AMI, image_for_region
from gemmaserve.sagemaker.cost import PriceLookup, PriceQuote, catalog_price
from gemmaserve.sagemaker.delete import DeleteReport, delete_resources
from gemmaserve.sagemaker.env_mapping import env_to_serve_args, validate_environment
from gemmaserve.sagemaker.names import (
    VARIANT_NAME,
    config_name_for,
    model_name_for,
    validate_endpoint_name,
)
from gemmaserve.sagemaker.status import (
    EndpointState,
    EndpointStatus,
    describe_endpoint_state,
)
from gemmaserve.sagemaker.tags import build_tags
from gemmaserve.sagemaker.watch import Progress, _quiet

MAX_POOL_TYPES = 5
MAX_TIMEOUT_S = 3600


class DeploySpec(BaseModel):
    """Everything a deploy needs; region-independent (the image may carry ``{region}``)."""

    endpoint_name: str
    instance_types: list[str] = Field(min_length=1, max_length=MAX_POOL_TYPES)  # priority order, same GPU
    instance_count: int = Field(default=1, ge=1)
    image_uri: str | None = None  # None: the pinned AWS vLLM image of the region
    role_arn: str
    environment: dict[str, str]
    model_label: str | None = None
    inference_ami_version: str | None = DEFAULT_AMI
    startup_health_check_timeout_s: int = Field(default=1800, ge=60, le=MAX_TIMEOUT_S)
    model_download_timeout_s: int = Field(default=1800, ge=60, le=MAX_TIMEOUT_S)
    owner: str = "unknown"
    ttl_s: float | None = 4 * 3600.0  # None: keep (no expiry)
    extra_tags: dict[str, str] = {}

    @field_validator("endpoint_name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return validate_endpoint_name(value)


class PlannedCall(BaseModel):
    service: str
    operation: str
    params: dict[str, Any]


class DeployPlan(BaseModel):
    endpoint_name: str
    region: str
    model_name: str
    config_name: str
    image_uri: str
    instance_types: list[str]
    serve_args: list[str]  # what the container will run: vllm serve <serve_args>
    calls: list[PlannedCall]
    price: PriceQuote | None
    usd_per_hour: float | None


class DeployResult(BaseModel):
    plan: DeployPlan
    created: list[str]
    state: EndpointState | None
    kept_on_failure: bool = False


def plan_deploy(
    spec: DeploySpec, *, region: str, now: datetime, price_lookup: PriceLookup = catalog_price
) -> DeployPlan:
    """The calls a deploy will make in ``region`` (no AWS call; ``price_lookup`` may read the catalog)."""
    validate_environment(spec.environment)
    if len(set(spec.instance_types)) != len(spec.instance_types):
        raise UsageError(f"Instance types repeat: {spec.instance_types}", hint="List each type once.")
    name = spec.endpoint_name
    model_name, config_name = model_name_for(name), config_name_for(name)
    image = image_for_region(spec.image_uri, region)
    tags = build_tags(owner=spec.owner, now=now, ttl_s=spec.ttl_s, model=spec.model_label, extra=spec.extra_tags)
    variant: dict[str, Any] = {
        "VariantName": VARIANT_NAME,
        "ModelName": model_name,
        "InitialInstanceCount": spec.instance_count,
        "ContainerStartupHealthCheckTimeoutInSeconds": spec.startup_health_check_timeout_s,
        "ModelDataDownloadTimeoutInSeconds": spec.model_download_timeout_s,
    }
    if len(spec.instance_types) == 1:
        variant["InstanceType"] = spec.instance_types[0]
    else:
        # InstancePools: SageMaker places the first type with capacity, in priority order (1 = first).
        variant["InstancePools"] = [
            {"InstanceType": instance_type, "Priority": priority}
            for priority, instance_type in enumerate(spec.instance_types, start=1)
        ]
    if spec.inference_ami_version:
        variant["InferenceAmiVersion"] = spec.inference_ami_version
    calls = [
        PlannedCall(service="sagemaker", operation="CreateModel", params={
            "ModelName": model_name,
            "ExecutionRoleArn": spec.role_arn,
            "PrimaryContainer": {"Image": image, "Environment": dict(spec.environment)},
            "Tags": tags,
        }),
        PlannedCall(service="sagemaker", operation="CreateEndpointConfig", params={
            "EndpointConfigName": config_name, "ProductionVariants": [variant], "Tags": tags,
        }),
        PlannedCall(service="sagemaker", operation="CreateEndpoint", params={
            "EndpointName": name, "EndpointConfigName": config_name, "Tags": tags,
        }),
    ]
    price = price_lookup(spec.instance_types[0], region)
    return DeployPlan(
        endpoint_name=name, region=region, model_name=model_name, config_name=config_name, image_uri=image,
        instance_types=list(spec.instance_types), serve_args=env_to_serve_args(spec.environment), calls=calls,
        price=price, usd_per_hour=price.usd_per_hour * spec.instance_count if price else None,
    )


def execute_deploy(
    sm: Any,
    plan: DeployPlan,
    *,
    now: Callable[[], datetime],
    keep: bool = False,
    wait: Callable[[], EndpointState] | None = None,
    progress: Progress = _quiet,
    teardown_timeout_s: float = 1800.0,
    sleep: Callable[[float], None] | None = None,
) -> DeployResult:
    """Make the planned calls; on any exception or Ctrl-C tear down what was created (unless ``keep``)."""
    region = plan.region
    existing = describe_endpoint_state(sm, plan.endpoint_name, region=region, now=now())
    if existing.status is not EndpointStatus.NOT_FOUND:
        raise UsageError(
            f"Endpoint {plan.endpoint_name!r} already exists in {region} ({existing.status.value}).",
            hint=f"Delete it first (gemmaserve sagemaker delete {plan.endpoint_name} --region {region}) "
                 "or pick another --name.",
            endpoint_name=plan.endpoint_name, region=region,
        )
    created: list[str] = []
    methods = {"CreateModel": sm.create_model, "CreateEndpointConfig": sm.create_endpoint_config,
               "CreateEndpoint": sm.create_endpoint}
    labels = {"CreateModel": "model", "CreateEndpointConfig": "endpoint-config", "CreateEndpoint": "endpoint"}
    try:
        for planned in plan.calls:
            call(region, methods[planned.operation], **planned.params)
            created.append(labels[planned.operation])
            progress(f"Created {labels[planned.operation]} for {plan.endpoint_name} in {region}")
        state = wait() if wait is not None else None
    except BaseException:
        if keep:
            progress(f"Keeping what was created ({', '.join(created) or 'nothing'}) because --keep was given.")
        elif created:
            progress(f"Deploy interrupted: deleting what this run created in {region}: {', '.join(reversed(created))}")
            try:
                teardown(sm, plan, created, timeout_s=teardown_timeout_s, now=now, sleep=sleep, progress=progress)
            except Exception as teardown_error:  # noqa: BLE001 - the original failure is the one to raise
                progress(f"Teardown incomplete ({teardown_error}); finish it with: gemmaserve sagemaker delete "
                         f"{plan.endpoint_name} --region {region} --yes")
        raise
    return DeployResult(plan=plan, created=created, state=state)


def teardown(
    sm: Any, plan: DeployPlan, created: list[str], *, timeout_s: float, now: Callable[[], datetime],
    sleep: Callable[[float], None] | None, progress: Progress,
) -> DeleteReport:
    """Delete only what this run created, endpoint first (waiting while it is Creating)."""
    report = DeleteReport(endpoint_name=plan.endpoint_name, region=plan.region)
    extra: dict[str, Any] = {"sleep": sleep} if sleep is not None else {}
    return delete_resources(
        sm, region=plan.region,
        endpoint=plan.endpoint_name if "endpoint" in created else None,
        configs=[plan.config_name] if "endpoint-config" in created else [],
        models=[plan.model_name] if "model" in created else [],
        report=report, busy_timeout_s=timeout_s, now=now, progress=progress, **extra,
    )
