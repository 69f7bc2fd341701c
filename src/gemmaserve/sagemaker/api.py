"""The SageMaker library API the CLI and the MCP server both call: one function per action, typed results.

Each takes plain arguments plus an optional ``factory`` (boto3 clients; tests pass
moto's) and ``progress`` callback (stderr in the CLI); none prints. Region lists
are tried in order where an action can fall back.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel

from gemmaserve.errors import InterlockRefused, UsageError
from gemmaserve.sagemaker.autoscale import AutoscaleResult
from gemmaserve.sagemaker.clients import Boto3ClientFactory, ClientFactory
from gemmaserve.sagemaker.codebuild import ImageBuildPlan, ImageBuildResult
from gemmaserve.sagemaker.container import DEFAULT_AMI
from gemmaserve.sagemaker.delete import DeleteReport, delete_deployment
from gemmaserve.sagemaker.diagnosis import DEFAULT_THRESHOLDS, WatchThresholds
from gemmaserve.sagemaker.endpoint import DeployPlan, DeployResult, plan_deploy
from gemmaserve.sagemaker.fallback import (
    RegionAttempt,
    deploy_across_regions,
    quota_checker_for,
)
from gemmaserve.sagemaker.iam import RoleResult
from gemmaserve.sagemaker.inputs import (
    parse_regions,
    tag_safe,
    validate_ami,
    validate_environment_limits,
    validate_instance_types,
    validate_tag_value,
)
from gemmaserve.sagemaker.inventory import (
    CleanupReport,
    Inventory,
    cleanup_expired,
    list_deployments,
)
from gemmaserve.sagemaker.jumpstart import JumpStartListing
from gemmaserve.sagemaker.logs import EndpointLogs, read_endpoint_logs
from gemmaserve.sagemaker.preflight import (
    ModelChecker,
    PreflightReport,
    hub_reachability,
    run_offline_preflight,
    run_preflight,
)
from gemmaserve.sagemaker.pricing import make_price_lookup
from gemmaserve.sagemaker.quota import QuotaCheck
from gemmaserve.sagemaker.runtime import (
    InvokeResult,
    chat_body,
    invoke,
    invoke_stream,
    iter_stream_text,
)
from gemmaserve.sagemaker.status import EndpointState, EndpointStatus, describe_endpoint_state
from gemmaserve.sagemaker.watch import Progress, _quiet, wait_for_endpoint

Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


_DEFAULT_FACTORIES: dict[str | None, Boto3ClientFactory] = {}


def _factory(factory: ClientFactory | None) -> ClientFactory:
    """The caller's factory, or one per process (per endpoint override) so connections are reused, not leaked."""
    if factory is not None:
        return factory
    import os

    from gemmaserve.sagemaker.clients import ENDPOINT_URL_ENV

    key = os.environ.get(ENDPOINT_URL_ENV) or None
    if key not in _DEFAULT_FACTORIES:
        _DEFAULT_FACTORIES[key] = Boto3ClientFactory(endpoint_url=key)
    return _DEFAULT_FACTORIES[key]


class DeployOutcome(BaseModel):
    dry_run: bool
    plan: DeployPlan
    preflight: PreflightReport | None = None
    result: DeployResult | None = None
    attempts: list[RegionAttempt] = []


def preflight(
    model: str,
    encoding: str,
    instance_types: list[str],
    *,
    regions: list[str],
    image_uri: str | None = None,
    role_arn: str | None = None,
    inference_ami_version: str | None = DEFAULT_AMI,
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.9,
    check_model: ModelChecker | None = hub_reachability,
    language_model_only: bool = False,
    factory: ClientFactory | None = None,
) -> PreflightReport:
    instance_types, regions = validate_instance_types(instance_types), _checked_regions(regions)
    return run_preflight(
        _factory(factory),
        model=model,
        encoding=encoding,
        instance_types=instance_types,
        regions=regions,
        image_uri=image_uri,
        role_arn=role_arn,
        inference_ami_version=validate_ami(inference_ami_version),
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        check_model=check_model,
        language_model_only=language_model_only,
    )


def _checked_regions(regions: list[str]) -> list[str]:
    chosen = parse_regions(regions)
    if not chosen:
        raise UsageError("No region given.", hint="Pass --region or --regions.")
    return chosen


def deploy(
    model: str,
    encoding: str,
    instance_types: list[str],
    *,
    regions: list[str],
    role_arn: str,
    endpoint_name: str | None = None,
    image_uri: str | None = None,
    owner: str | None = None,
    ttl_hours: float | None = 4.0,
    keep: bool = False,
    dry_run: bool = False,
    wait: bool = True,
    timeout_s: float = 3600.0,
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    vllm_args: list[str] | None = None,
    env: dict[str, str] | None = None,
    inference_ami_version: str | None = DEFAULT_AMI,
    language_model_only: bool = False,
    startup_timeout_s: int = 1800,
    download_timeout_s: int = 1800,
    skip_preflight: bool = False,
    accept_unknown: bool = False,
    live_prices: bool = True,
    check_model: ModelChecker | None = hub_reachability,
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS,
    factory: ClientFactory | None = None,
    progress: Progress = _quiet,
    now: Clock = _now,
    sleep: Callable[[float], None] = time.sleep,
) -> DeployOutcome:
    """Plan, preflight, then deploy in the first region with quota and capacity; wait for InService.

    ``dry_run`` makes no AWS call: it returns the planned calls and $/hour (catalog price).
    Raises InterlockRefused when preflight finds a failure (or an unknown, unless ``accept_unknown``).
    """
    from gemmaserve.catalog import resolve_instance, resolve_model
    from gemmaserve.plan import plan_deployment
    from gemmaserve.sagemaker.names import default_endpoint_name, validate_endpoint_name
    from gemmaserve.sagemaker.spec_builder import spec_for_plan

    # Every input is checked before any client is built or any call is made, dry run or not.
    instance_types, regions = validate_instance_types(instance_types), _checked_regions(regions)
    inference_ami_version = validate_ami(inference_ami_version)
    if endpoint_name is not None:
        validate_endpoint_name(endpoint_name)
    owner = validate_tag_value(owner, what="The owner") if owner else tag_safe(_user())
    validate_environment_limits(env or {})
    clients = _factory(factory) if not dry_run else factory
    instance = resolve_instance(instance_types[0])
    row = plan_deployment(
        model,
        encoding,
        instance=instance,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
        language_model_only=language_model_only,
    )
    name = endpoint_name or default_endpoint_name(resolve_model(model).key, instance.gpu)
    spec = spec_for_plan(
        row,
        endpoint_name=name,
        instance_types=instance_types,
        role_arn=role_arn,
        image_uri=image_uri,
        owner=owner,
        ttl_s=None if ttl_hours is None else ttl_hours * 3600.0,
        vllm_overrides=vllm_args,
        extra_env=env,
        inference_ami_version=inference_ami_version,
        startup_health_check_timeout_s=startup_timeout_s,
        model_download_timeout_s=download_timeout_s,
    )
    price_lookup = make_price_lookup(clients if live_prices else None, today=date.today())
    first_plan = plan_deploy(spec, region=regions[0], now=now(), price_lookup=price_lookup)
    if dry_run:
        offline = run_offline_preflight(
            model=model,
            encoding=encoding,
            instance_types=instance_types,
            regions=regions,
            image_uri=image_uri,
            inference_ami_version=inference_ami_version,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            language_model_only=language_model_only,
        )
        return DeployOutcome(dry_run=True, plan=first_plan, preflight=offline)
    assert clients is not None
    report = None
    if not skip_preflight:
        report = run_preflight(
            clients,
            model=model,
            encoding=encoding,
            instance_types=instance_types,
            regions=regions,
            image_uri=image_uri,
            role_arn=role_arn,
            inference_ami_version=inference_ami_version,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            check_model=check_model,
            language_model_only=language_model_only,
        )
        region_blind = [f for f in report.failures(accept_unknown=accept_unknown) if f.region is None]
        if region_blind or all(_region_blocked(report, region, accept_unknown) for region in regions):
            failures = report.failures(accept_unknown=accept_unknown)
            raise InterlockRefused(
                "Preflight found problems; nothing was created: "
                + "; ".join(f"{f.check}: {f.detail}" for f in failures),
                hint=" ".join(f.fix for f in failures if f.fix) or "Run: gemmaserve sagemaker preflight …",
                reasons=[f.model_dump(mode="json") for f in failures],
            )

    def waiter(region: str) -> EndpointState:
        return wait_for_endpoint(
            clients("sagemaker", region),
            clients("logs", region),
            name,
            region=region,
            timeout_s=timeout_s,
            thresholds=thresholds,
            now=now,
            sleep=sleep,
            progress=progress,
        )

    checker = quota_checker_for(clients, spec)

    def known_quota(region: str) -> list[QuotaCheck]:
        try:
            return checker(region)
        except Exception:
            return []

    outcome = deploy_across_regions(
        clients,
        spec,
        regions,
        now=now,
        wait=waiter if wait else None,
        quota_checker=known_quota,
        keep=keep,
        progress=progress,
        price_lookup=price_lookup,
    )
    return DeployOutcome(
        dry_run=False, plan=outcome.result.plan, preflight=report, result=outcome.result, attempts=outcome.attempts
    )


def _region_blocked(report: PreflightReport, region: str, accept_unknown: bool) -> bool:
    return any(f.region == region for f in report.failures(accept_unknown=accept_unknown))


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def status(
    endpoint_name: str,
    *,
    region: str,
    live_prices: bool = False,
    factory: ClientFactory | None = None,
    now: Clock = _now,
) -> EndpointState:
    """The endpoint's state with $/hour (the catalog's dated prices unless ``live_prices``)."""
    from gemmaserve.sagemaker.status import with_prices

    clients = _factory(factory)
    state = describe_endpoint_state(clients("sagemaker", region), endpoint_name, region=region, now=now())
    if state.status is EndpointStatus.NOT_FOUND:
        return state
    return with_prices(state, make_price_lookup(clients if live_prices else None, today=date.today()))


def wait(
    endpoint_name: str,
    *,
    region: str,
    timeout_s: float = 3600.0,
    poll_s: float = 30.0,
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS,
    factory: ClientFactory | None = None,
    progress: Progress = _quiet,
    now: Clock = _now,
    sleep: Callable[[float], None] = time.sleep,
) -> EndpointState:
    clients = _factory(factory)
    return wait_for_endpoint(
        clients("sagemaker", region),
        clients("logs", region),
        endpoint_name,
        region=region,
        timeout_s=timeout_s,
        poll_s=poll_s,
        thresholds=thresholds,
        now=now,
        sleep=sleep,
        progress=progress,
    )


def logs(
    endpoint_name: str,
    *,
    region: str,
    since_s: float | None = 3 * 3600,
    contains: str | None = None,
    pattern: str | None = None,
    tail: int | None = 200,
    factory: ClientFactory | None = None,
    now: Clock = _now,
) -> EndpointLogs:
    return read_endpoint_logs(
        _factory(factory)("logs", region),
        endpoint_name,
        region=region,
        now=now(),
        since_s=since_s,
        contains=contains,
        pattern=pattern,
        tail=tail,
    )


def invoke_chat(
    endpoint_name: str,
    prompt: str,
    *,
    region: str,
    max_tokens: int = 256,
    temperature: float = 0.0,
    body: dict[str, Any] | None = None,
    factory: ClientFactory | None = None,
) -> InvokeResult:
    request = body or chat_body(prompt, max_tokens=max_tokens, temperature=temperature)
    return invoke(_factory(factory)("sagemaker-runtime", region), endpoint_name, request, region=region)


def invoke_chat_stream(
    endpoint_name: str,
    prompt: str,
    *,
    region: str,
    max_tokens: int = 256,
    temperature: float = 0.0,
    body: dict[str, Any] | None = None,
    factory: ClientFactory | None = None,
) -> Iterator[str]:
    """Text deltas as the endpoint streams them."""
    request = body or chat_body(prompt, max_tokens=max_tokens, temperature=temperature, stream=True)
    parts = invoke_stream(_factory(factory)("sagemaker-runtime", region), endpoint_name, request, region=region)
    return iter_stream_text(parts)


def delete(
    endpoint_name: str,
    *,
    region: str,
    dry_run: bool = False,
    force: bool = False,
    busy_timeout_s: float = 1800.0,
    factory: ClientFactory | None = None,
    progress: Progress = _quiet,
    now: Clock = _now,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteReport:
    """Delete the endpoint, its config and model(s); refuses what gemmaserve did not create unless ``force``."""
    return delete_deployment(
        _factory(factory)("sagemaker", region),
        endpoint_name,
        region=region,
        busy_timeout_s=busy_timeout_s,
        dry_run=dry_run,
        force=force,
        now=now,
        sleep=sleep,
        progress=progress,
    )


def list_endpoints(
    *,
    regions: list[str],
    live_prices: bool = True,
    orphans: bool = True,
    factory: ClientFactory | None = None,
    now: Clock = _now,
) -> Inventory:
    """Our endpoints and (``orphans``) our unused models/configs; check ``complete`` before trusting an absence."""
    regions = _checked_regions(regions)
    clients = _factory(factory)
    lookup = make_price_lookup(clients if live_prices else None, today=date.today())
    return list_deployments(clients, regions, now=now(), price_lookup=lookup, orphans=orphans)


def cleanup(
    *,
    regions: list[str],
    dry_run: bool = False,
    expired: bool = True,
    orphans: bool = False,
    live_prices: bool = True,
    factory: ClientFactory | None = None,
    now: Clock = _now,
) -> CleanupReport:
    """Delete our expired endpoints and (``orphans``) our unused models/configs; ``complete`` says all was read."""
    if not expired and not orphans:
        raise UsageError(
            "Nothing to clean up: choose expired endpoints, orphans, or both.",
            hint="gemmaserve sagemaker cleanup --expired --orphans",
        )
    regions = _checked_regions(regions)
    clients = _factory(factory)
    lookup = make_price_lookup(clients if live_prices else None, today=date.today())
    return cleanup_expired(
        clients, regions, now=now(), dry_run=dry_run, price_lookup=lookup, expired=expired, orphans=orphans
    )


def autoscale(
    endpoint_name: str,
    *,
    region: str,
    min_instances: int,
    max_instances: int,
    target_invocations_per_instance: float,
    scale_in_cooldown_s: int = 300,
    scale_out_cooldown_s: int = 60,
    dry_run: bool = False,
    factory: ClientFactory | None = None,
) -> AutoscaleResult:
    from gemmaserve.sagemaker.autoscale import configure_autoscaling

    aas = _factory(factory)("application-autoscaling", region) if not dry_run else None
    return configure_autoscaling(
        aas,
        endpoint_name,
        region=region,
        min_instances=min_instances,
        max_instances=max_instances,
        target_invocations_per_instance=target_invocations_per_instance,
        scale_in_cooldown_s=scale_in_cooldown_s,
        scale_out_cooldown_s=scale_out_cooldown_s,
        dry_run=dry_run,
    )


def jumpstart(*, region: str, name_filter: str = "gemma", factory: ClientFactory | None = None) -> JumpStartListing:
    from gemmaserve.sagemaker.jumpstart import list_gemma4_models

    return list_gemma4_models(_factory(factory)("sagemaker", region), region=region, name_filter=name_filter)


def image_render(
    *, region: str, account: str = "ACCOUNT", base_image: str | None = None, requirement: str | None = None
) -> ImageBuildPlan:
    """The Dockerfile and buildspec, offline (``account`` only names the target repository)."""
    from gemmaserve.sagemaker.codebuild import plan_image_build

    return plan_image_build(region=region, account=account, base_image=base_image, requirement=requirement)


def image_build(
    *,
    region: str,
    base_image: str | None = None,
    requirement: str | None = None,
    wheel_path: str | None = None,
    dry_run: bool = False,
    follow: bool = True,
    timeout_s: float = 5400.0,
    factory: ClientFactory | None = None,
    progress: Progress = _quiet,
    now: Clock = _now,
    sleep: Callable[[float], None] = time.sleep,
) -> ImageBuildResult:
    from pathlib import Path

    from gemmaserve.sagemaker.codebuild import build_image

    return build_image(
        _factory(factory),
        region=region,
        base_image=base_image,
        requirement=requirement,
        wheel_path=Path(wheel_path) if wheel_path else None,
        dry_run=dry_run,
        follow=follow,
        timeout_s=timeout_s,
        now=now,
        sleep=sleep,
        progress=progress,
    )


def create_execution_role(
    *,
    region: str,
    regions: list[str] | None = None,
    role_name: str = "gemmaserve-endpoint",
    image_uris: list[str] | None = None,
    s3_model_uri: str | None = None,
    dry_run: bool = False,
    factory: ClientFactory | None = None,
) -> RoleResult:
    """The least-privilege execution role, usable in ``regions`` (default ``region``) and those it already served.

    Pull of the pinned image (each region's) and any given ones, endpoint logs per region, the S3 prefix.
    """
    from gemmaserve.sagemaker.container import default_image_uri, image_for_region
    from gemmaserve.sagemaker.iam import ensure_execution_role

    chosen = _checked_regions(regions or [region])
    clients = _factory(factory)
    images = (
        [image_for_region(uri, r) for uri in image_uris for r in chosen]
        if image_uris
        else [default_image_uri(r) for r in chosen]
    )
    return ensure_execution_role(
        clients("iam", region),
        clients("sts", region),
        region=region,
        regions=chosen,
        role_name=role_name,
        image_uris=list(dict.fromkeys(images)),
        s3_model_uri=s3_model_uri,
        dry_run=dry_run,
    )
