"""Scale an endpoint's variant with Application Auto Scaling: target tracking on invocations per instance.

Users who outgrow one instance use SageMaker's own fleet: register the variant as
a scalable target (min..max instances) and track ``SageMakerVariantInvocationsPerInstance``.
"""

from __future__ import annotations

from typing import Any

from gemmaserve.errors import UsageError
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import call
from gemmaserve.sagemaker.spec.container import VARIANT_NAME, validate_name
from gemmaserve.sagemaker.spec.requests import AutoscaleRequest

SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
METRIC = "SageMakerVariantInvocationsPerInstance"


class AutoscaleResult(ActionResult):
    endpoint_name: str
    region: str
    resource_id: str
    min_instances: int
    max_instances: int
    target_invocations_per_instance: float
    policy_name: str
    policy_arn: str | None
    dry_run: bool
    calls: list[dict[str, Any]]


def autoscale_calls(request: AutoscaleRequest, variant: str = VARIANT_NAME) -> list[dict[str, Any]]:
    """Pure: the RegisterScalableTarget and PutScalingPolicy parameters."""
    endpoint_name = validate_name(request.endpoint_name)
    min_instances, max_instances, target = request.min_instances, request.max_instances, request.target_invocations
    if not 1 <= min_instances <= max_instances:
        raise UsageError(
            f"Need 1 ≤ --min ≤ --max, got {min_instances}..{max_instances}.",
            hint="SageMaker real-time endpoints cannot scale to zero instances.",
        )
    if target <= 0:
        raise UsageError(f"--target-invocations must be positive, got {target}.")
    resource_id = f"endpoint/{endpoint_name}/variant/{variant}"
    return [
        {
            "operation": "RegisterScalableTarget",
            "params": {
                "ServiceNamespace": "sagemaker",
                "ResourceId": resource_id,
                "ScalableDimension": SCALABLE_DIMENSION,
                "MinCapacity": min_instances,
                "MaxCapacity": max_instances,
            },
        },
        {
            "operation": "PutScalingPolicy",
            "params": {
                "PolicyName": f"gemmaserve-{endpoint_name}-invocations",
                "ServiceNamespace": "sagemaker",
                "ResourceId": resource_id,
                "ScalableDimension": SCALABLE_DIMENSION,
                "PolicyType": "TargetTrackingScaling",
                "TargetTrackingScalingPolicyConfiguration": {
                    "TargetValue": float(target),
                    "PredefinedMetricSpecification": {"PredefinedMetricType": METRIC},
                    "ScaleInCooldown": request.scale_in_cooldown_s,
                    "ScaleOutCooldown": request.scale_out_cooldown_s,
                },
            },
        },
    ]


def configure_autoscaling(aas: Any, request: AutoscaleRequest) -> AutoscaleResult:
    """Register the variant and its target-tracking policy (``aas`` is unused, may be None, on a dry run)."""
    calls = autoscale_calls(request)
    region = request.chosen_region()
    policy_arn = None
    if not request.dry_run:
        call(region, aas.register_scalable_target, **calls[0]["params"])
        policy_arn = call(region, aas.put_scaling_policy, **calls[1]["params"]).get("PolicyARN")
    return AutoscaleResult(
        endpoint_name=request.endpoint_name,
        region=region,
        resource_id=calls[0]["params"]["ResourceId"],
        min_instances=request.min_instances,
        max_instances=request.max_instances,
        target_invocations_per_instance=request.target_invocations,
        policy_name=calls[1]["params"]["PolicyName"],
        policy_arn=policy_arn,
        dry_run=request.dry_run,
        calls=calls,
    )
