"""Where an endpoint stands: status as the API spells it, placed instance type, image, elapsed time (adapter).

``describe_endpoint_state`` never raises for a missing endpoint: NotFound is a state.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from gemmaserve.cost import PriceLookup, PriceRange, price_range
from gemmaserve.errors import AwsError
from gemmaserve.sagemaker.aws import call, is_not_found
from gemmaserve.sagemaker.names import validate_name


class EndpointStatus(StrEnum):
    OUT_OF_SERVICE = "OutOfService"
    CREATING = "Creating"
    UPDATING = "Updating"
    SYSTEM_UPDATING = "SystemUpdating"
    ROLLING_BACK = "RollingBack"
    IN_SERVICE = "InService"
    DELETING = "Deleting"
    FAILED = "Failed"
    UPDATE_ROLLBACK_FAILED = "UpdateRollbackFailed"
    NOT_FOUND = "NotFound"  # ours: DescribeEndpoint says it does not exist

    @property
    def busy(self) -> bool:
        """States in which SageMaker refuses a delete."""
        return self in (
            EndpointStatus.CREATING,
            EndpointStatus.UPDATING,
            EndpointStatus.SYSTEM_UPDATING,
            EndpointStatus.ROLLING_BACK,
        )

    @property
    def billing(self) -> bool:
        return self not in (EndpointStatus.NOT_FOUND, EndpointStatus.FAILED, EndpointStatus.DELETING)


class EndpointState(BaseModel):
    endpoint_name: str
    region: str
    status: EndpointStatus
    failure_reason: str | None = None
    config_name: str | None = None
    instance_type: str | None = None  # placed type; with InstancePools the one that got capacity
    instance_count: int | None = None
    pool_types: list[str] = []
    image: str | None = None
    resolved_image: str | None = None  # digest-pinned URI SageMaker actually pulled
    created_at: datetime | None = None
    elapsed_s: float | None = None
    arn: str | None = None
    usd_per_hour: float | None = None  # of the placed type; None when not placed yet or no price is known
    price_range: PriceRange | None = None  # an InstancePools endpoint: cheapest to dearest type


def describe_endpoint_state(sm: Any, endpoint_name: str, *, region: str, now: datetime) -> EndpointState:
    validate_name(endpoint_name)
    try:
        described = call(region, sm.describe_endpoint, EndpointName=endpoint_name)
    except AwsError as error:
        if is_not_found(error):
            return EndpointState(endpoint_name=endpoint_name, region=region, status=EndpointStatus.NOT_FOUND)
        raise
    state = state_from_description(described, region=region, now=now)
    if state.config_name and (state.instance_type is None or not state.pool_types):
        # DescribeEndpoint's variant summary has no InstanceType; the config has what was asked for.
        try:
            config = call(region, sm.describe_endpoint_config, EndpointConfigName=state.config_name)
        except AwsError as error:
            if not is_not_found(error):
                raise
        else:
            state = with_config(state, config)
    return state


def with_config(state: EndpointState, config: dict[str, Any]) -> EndpointState:
    """Pure: fill the requested type(s) from a DescribeEndpointConfig response where the endpoint did not say."""
    variants = config.get("ProductionVariants") or []
    if not variants:
        return state
    variant = variants[0]
    pools = sorted(variant.get("InstancePools") or [], key=lambda pool: pool.get("Priority", 0))
    pool_types = state.pool_types or [pool["InstanceType"] for pool in pools]
    instance_type = state.instance_type
    if instance_type is None and not pools:
        instance_type = variant.get("InstanceType")
    return state.model_copy(update={"pool_types": pool_types, "instance_type": instance_type})


def state_from_description(described: dict[str, Any], *, region: str, now: datetime) -> EndpointState:
    """Pure: a DescribeEndpoint response → EndpointState."""
    variants = described.get("ProductionVariants") or []
    variant = variants[0] if variants else {}
    pools = variant.get("InstancePools") or []
    placed = [pool for pool in pools if (pool.get("CurrentInstanceCount") or 0) > 0]
    instance_type = (placed[0] if placed else {}).get("InstanceType") or variant.get("InstanceType")
    images = variant.get("DeployedImages") or []
    created_at = described.get("CreationTime")
    status_text = described.get("EndpointStatus", "OutOfService")
    try:
        status = EndpointStatus(status_text)
    except ValueError:
        status = EndpointStatus.OUT_OF_SERVICE
    return EndpointState(
        endpoint_name=described["EndpointName"],
        region=region,
        status=status,
        failure_reason=described.get("FailureReason"),
        config_name=described.get("EndpointConfigName"),
        instance_type=instance_type,
        instance_count=variant.get("CurrentInstanceCount"),
        pool_types=[pool["InstanceType"] for pool in pools if pool.get("InstanceType")],
        image=(images[0].get("SpecifiedImage") if images else None),
        resolved_image=(images[0].get("ResolvedImage") if images else None),
        created_at=created_at,
        elapsed_s=(now - created_at).total_seconds() if created_at else None,
        arn=described.get("EndpointArn"),
    )


def with_prices(state: EndpointState, lookup: PriceLookup) -> EndpointState:
    """The state with $/hour of the placed type and, for a pool, the range over its types."""
    count = state.instance_count or 1
    placed = lookup(state.instance_type, state.region) if state.instance_type else None
    pool = price_range(state.pool_types, state.region, lookup, count) if state.pool_types else None
    return state.model_copy(
        update={"usd_per_hour": placed.usd_per_hour * count if placed else None, "price_range": pool}
    )
