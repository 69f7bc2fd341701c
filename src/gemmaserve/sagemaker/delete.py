"""Delete an endpoint, then its config, then its model(s); wait (bounded) while it is Creating; idempotent.

Missing pieces are fine: deleting twice, or after a partial deploy, succeeds.
A ``Creating`` endpoint cannot be deleted, so we wait for it instead of giving up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from gemmaserve.errors import AwsError, SageMakerTimedOut, UsageError
from gemmaserve.progress import ProgressCallback, ProgressEvent, utc_now
from gemmaserve.sagemaker.aws import call, is_not_found, paginate
from gemmaserve.sagemaker.names import config_name_for, model_name_for, validate_name
from gemmaserve.sagemaker.status import EndpointStatus, describe_endpoint_state
from gemmaserve.sagemaker.tags import TOOL_KEY, is_ours, tags_to_dict


class DeleteReport(BaseModel):
    endpoint_name: str
    region: str
    dry_run: bool = False
    deleted: list[str] = []  # "endpoint:NAME", "endpoint-config:NAME", "model:NAME"
    absent: list[str] = []
    remaining: list[str] = []  # still there after this run (abandoned, refused, or a failed call)
    skipped: list[str] = []  # left alone on purpose: not ours, or used by another endpoint
    # A Create sent when the run stopped whose resource did not show within the in-flight window: neither
    # deleted nor known absent (SageMaker may still have made it): the report's commands look again and delete it.
    unconfirmed: list[str] = []
    commands: list[str] = []  # what finishes the job when ``remaining`` is not empty
    waited_s: float = 0.0


def delete_deployment(
    sm: Any,
    endpoint_name: str,
    *,
    region: str,
    busy_timeout_s: float = 1800.0,
    poll_s: float = 15.0,
    dry_run: bool = False,
    force: bool = False,
    now: Callable[[], datetime] = utc_now,
    sleep: Callable[[float], None] = time.sleep,
    progress: ProgressCallback | None = None,
) -> DeleteReport:
    """Delete the endpoint and every config and model it uses (plus the ones a deploy derives from its name).

    Refuses (UsageError) when any of them exists without gemmaserve's tags, unless ``force``.
    A config or model that another endpoint uses is never deleted, ``force`` or not: it is
    listed in ``skipped``.
    """
    validate_name(endpoint_name)
    report = DeleteReport(endpoint_name=endpoint_name, region=region, dry_run=dry_run)
    state = describe_endpoint_state(sm, endpoint_name, region=region, now=now())
    configs = [config_name_for(endpoint_name)] if len(endpoint_name) <= 56 else []
    if state.config_name and state.config_name not in configs:
        configs.insert(0, state.config_name)
    models: list[str] = []
    for config in configs:
        models.extend(model for model in _models_of_config(sm, config, region) if model not in models)
    if len(endpoint_name) <= 56 and model_name_for(endpoint_name) not in models:
        models.append(model_name_for(endpoint_name))
    endpoint = endpoint_name if state.status is not EndpointStatus.NOT_FOUND else None
    arns = {
        "endpoint": {endpoint_name: state.arn} if endpoint and state.arn else {},
        "endpoint-config": _arns(sm, region, "endpoint-config", configs),
        "model": _arns(sm, region, "model", models),
    }
    foreign = [
        f"{kind}:{name}"
        for kind, found in arns.items()
        for name, arn in found.items()
        if not is_ours(tags_to_dict(call(region, sm.list_tags, ResourceArn=arn).get("Tags", [])))
    ]
    if foreign and not force:
        raise UsageError(
            f"Refusing to delete {', '.join(foreign)} in {region}: gemmaserve did not create "
            f"{'it' if len(foreign) == 1 else 'them'} (no {TOOL_KEY} tag).",
            hint=f"Check with: aws sagemaker list-tags --region {region} --resource-arn <arn>; delete anyway "
            f"with: gemmaserve sagemaker delete {endpoint_name} --region {region} --force",
            endpoint_name=endpoint_name,
            region=region,
            not_ours=foreign,
        )
    used_configs, used_models = usage_by_other_endpoints(sm, region, exclude=endpoint_name)
    for config in [c for c in configs if c in used_configs]:
        configs.remove(config)
        report.skipped.append(f"endpoint-config:{config} (used by endpoint {used_configs[config]})")
    for model in [m for m in models if m in used_models]:
        models.remove(model)
        report.skipped.append(f"model:{model} (used by endpoint {used_models[model]})")
    if dry_run:  # a preview names only what is there; the rest is already absent
        for kind, names in (("endpoint-config", configs), ("model", models)):
            for name in [name for name in names if name not in arns[kind]]:
                names.remove(name)
                report.absent.append(f"{kind}:{name}")
    delete_resources(
        sm,
        region=region,
        endpoint=endpoint,
        configs=configs,
        models=models,
        report=report,
        busy_timeout_s=busy_timeout_s,
        poll_s=poll_s,
        dry_run=dry_run,
        now=now,
        sleep=sleep,
        progress=progress,
    )
    if state.status is EndpointStatus.NOT_FOUND:
        report.absent.insert(0, f"endpoint:{endpoint_name}")
    return report


def arn_of(sm: Any, region: str, kind: str, name: str) -> str | None:
    """The ARN of the model / endpoint-config / endpoint of this name, None when SageMaker says it does not
    exist (a Describe call; any other error is raised)."""
    method, param, key = {
        "model": (sm.describe_model, "ModelName", "ModelArn"),
        "endpoint-config": (sm.describe_endpoint_config, "EndpointConfigName", "EndpointConfigArn"),
        "endpoint": (sm.describe_endpoint, "EndpointName", "EndpointArn"),
    }[kind]
    try:
        return str(call(region, method, **{param: name})[key])
    except AwsError as error:
        if is_not_found(error):
            return None
        raise


def _arns(sm: Any, region: str, kind: str, names: list[str]) -> dict[str, str]:
    """The ARN of each of ``names`` that exists; the missing are left out."""
    found = {name: arn_of(sm, region, kind, name) for name in names}
    return {name: arn for name, arn in found.items() if arn is not None}


def usage_by_other_endpoints(
    sm: Any, region: str, *, exclude: str | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """Config name → an endpoint using it, and model name → an endpoint using it (endpoints other than ``exclude``)."""
    configs: dict[str, str] = {}
    models: dict[str, str] = {}
    for page in paginate(region, sm, "list_endpoints"):
        for summary in page.get("Endpoints", []):
            name = summary["EndpointName"]
            if name == exclude:
                continue
            try:
                config = call(region, sm.describe_endpoint, EndpointName=name).get("EndpointConfigName")
            except AwsError as error:
                if is_not_found(error):
                    continue  # deleted meanwhile
                raise
            if not config:
                continue
            configs.setdefault(config, name)
            for model in _models_of_config(sm, config, region):
                models.setdefault(model, name)
    return configs, models


def delete_resources(
    sm: Any,
    *,
    region: str,
    endpoint: str | None,
    configs: list[str],
    models: list[str],
    report: DeleteReport,
    busy_timeout_s: float = 1800.0,
    poll_s: float = 15.0,
    dry_run: bool = False,
    now: Callable[[], datetime] = utc_now,
    sleep: Callable[[float], None] = time.sleep,
    progress: ProgressCallback | None = None,
) -> DeleteReport:
    """Delete exactly these resources, endpoint first; used by delete and by a deploy's teardown."""
    if endpoint is not None:
        if dry_run:
            report.deleted.append(f"endpoint:{endpoint}")
        else:
            _wait_until_deletable(sm, endpoint, region, report, busy_timeout_s, poll_s, now, sleep, progress)
            _delete_one(report, f"endpoint:{endpoint}", region, sm.delete_endpoint, EndpointName=endpoint)
    for config in configs:
        if dry_run:
            report.deleted.append(f"endpoint-config:{config}")
        else:
            _delete_one(
                report, f"endpoint-config:{config}", region, sm.delete_endpoint_config, EndpointConfigName=config
            )
    for model in models:
        if dry_run:
            report.deleted.append(f"model:{model}")
        else:
            _delete_one(report, f"model:{model}", region, sm.delete_model, ModelName=model)
    return report


def _wait_until_deletable(
    sm: Any,
    endpoint: str,
    region: str,
    report: DeleteReport,
    busy_timeout_s: float,
    poll_s: float,
    now: Callable[[], datetime],
    sleep: Callable[[float], None],
    progress: ProgressCallback | None,
) -> None:
    started = now()
    while True:
        state = describe_endpoint_state(sm, endpoint, region=region, now=now())
        if not state.status.busy:
            return
        waited = (now() - started).total_seconds()
        report.waited_s = waited
        if waited >= busy_timeout_s:
            raise SageMakerTimedOut(
                f"Endpoint {endpoint!r} is still {state.status.value} after {waited / 60:.0f} min; "
                "SageMaker refuses to delete it until that ends.",
                hint=f"Run again later: gemmaserve sagemaker delete {endpoint} --region {region} --yes",
                endpoint_name=endpoint,
                region=region,
                status=state.status.value,
            )
        if progress is not None:
            progress(
                ProgressEvent(
                    state.status.value,
                    f"{endpoint} is {state.status.value}; SageMaker cannot delete it yet — "
                    f"waiting ({waited / 60:.1f} min)",
                    done=waited,
                    total=busy_timeout_s,
                )
            )
        sleep(poll_s)


def _delete_one(report: DeleteReport, label: str, region: str, method: Any, **params: Any) -> None:
    try:
        call(region, method, **params)
    except AwsError as error:
        if is_not_found(error):
            report.absent.append(label)
            return
        raise
    report.deleted.append(label)


def _models_of_config(sm: Any, config: str, region: str) -> list[str]:
    try:
        described = call(region, sm.describe_endpoint_config, EndpointConfigName=config)
    except AwsError as error:
        if is_not_found(error):
            return []
        raise
    models: list[str] = []
    for variant in described.get("ProductionVariants", []):
        names = [variant.get("ModelName")] + [
            pool.get("ModelNameOverride") for pool in variant.get("InstancePools") or []
        ]
        models.extend(name for name in names if name and name not in models)
    return models
