"""SageMaker endpoint quotas: the limit from Service Quotas minus what existing endpoints hold.

A variant with InstancePools holds quota for every type it lists, so each listed type
counts the variant's desired instance count. Arithmetic pure; adapters receive clients.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gemmaserve.errors import AwsError
from gemmaserve.sagemaker.aws import call, is_not_found, paginate

_HOLDING_STATUSES = {"Creating", "Updating", "SystemUpdating", "RollingBack", "InService", "OutOfService"}


class QuotaCheck(BaseModel):
    region: str
    instance_type: str
    quota_name: str
    limit: float | None  # None: Service Quotas did not say (unknown, never ok)
    used: int | None
    needed: int
    ok: bool | None

    @property
    def free(self) -> float | None:
        return None if self.limit is None or self.used is None else self.limit - self.used


def endpoint_quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


def quota_verdict(limit: float | None, used: int | None, needed: int) -> bool | None:
    """Pure: True if ``needed`` more instances fit, False if not, None if unknown."""
    if limit is None or used is None:
        return None
    return limit - used >= needed


def endpoint_quota_limits(sq: Any, *, region: str) -> dict[str, float]:
    """Every ``… for endpoint usage`` quota value of the account in ``region``, by quota name."""
    limits: dict[str, float] = {}
    for page in paginate(region, sq, "list_service_quotas", ServiceCode="sagemaker"):
        for quota in page.get("Quotas", []):
            name = quota.get("QuotaName", "")
            if name.endswith(" for endpoint usage") and "Value" in quota:
                limits[name] = float(quota["Value"])
    return limits


def instances_held(sm: Any, *, region: str) -> dict[str, int]:
    """Instances held per type by this account's endpoints in ``region`` (pool types each count in full)."""
    held: dict[str, int] = {}
    for page in paginate(region, sm, "list_endpoints"):
        for summary in page.get("Endpoints", []):
            if summary.get("EndpointStatus") not in _HOLDING_STATUSES:
                continue
            try:
                endpoint = call(region, sm.describe_endpoint, EndpointName=summary["EndpointName"])
                config = call(region, sm.describe_endpoint_config, EndpointConfigName=endpoint["EndpointConfigName"])
            except AwsError as error:
                if is_not_found(error):
                    continue  # deleted between the list and the describe
                raise
            counts = {v.get("VariantName"): v for v in endpoint.get("ProductionVariants", [])}
            for variant in config.get("ProductionVariants", []):
                live = counts.get(variant.get("VariantName"), {})
                count = int(
                    live.get("DesiredInstanceCount")
                    or live.get("CurrentInstanceCount")
                    or variant.get("InitialInstanceCount")
                    or 0
                )
                types = [pool["InstanceType"] for pool in variant.get("InstancePools") or []]
                if not types and variant.get("InstanceType"):
                    types = [variant["InstanceType"]]
                for instance_type in types:
                    held[instance_type] = held.get(instance_type, 0) + count
    return held


def check_quotas(sq: Any, sm: Any, instance_types: list[str], needed: int, *, region: str) -> list[QuotaCheck]:
    """One check per type the deploy will list (a pool needs quota for each of its types)."""
    limits = endpoint_quota_limits(sq, region=region)
    held = instances_held(sm, region=region)
    checks = []
    for instance_type in instance_types:
        name = endpoint_quota_name(instance_type)
        limit = limits.get(name)
        used = held.get(instance_type, 0)
        checks.append(
            QuotaCheck(
                region=region,
                instance_type=instance_type,
                quota_name=name,
                limit=limit,
                used=used,
                needed=needed,
                ok=quota_verdict(limit, used, needed),
            )
        )
    return checks
