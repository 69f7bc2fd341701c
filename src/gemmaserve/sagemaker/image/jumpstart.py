"""JumpStart: the public hub's Gemma 4 entries and the instance types each supports (adapter).

Reads ``SageMakerPublicHub`` with ListHubContents / DescribeHubContent; the instance
lists come from the hub document's ``SupportedInferenceInstanceTypes``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import call

PUBLIC_HUB = "SageMakerPublicHub"
_GEMMA4 = re.compile(r"gemma[-_]?4", re.IGNORECASE)


class JumpStartModel(BaseModel):
    hub_content_name: str
    display_name: str | None
    version: str | None
    default_instance_type: str | None
    supported_instance_types: list[str]
    gated: bool | None


class JumpStartListing(ActionResult):
    region: str
    hub: str
    models: list[JumpStartModel]


def list_gemma4_models(sm: Any, *, region: str, name_filter: str = "gemma") -> JumpStartListing:
    models = []
    for summary in _hub_summaries(sm, region, name_filter):
        name = summary["HubContentName"]
        if not (_GEMMA4.search(name) or _GEMMA4.search(summary.get("HubContentDisplayName") or "")):
            continue
        described = call(
            region, sm.describe_hub_content, HubName=PUBLIC_HUB, HubContentType="Model", HubContentName=name
        )
        document = _document(described.get("HubContentDocument"))
        models.append(
            JumpStartModel(
                hub_content_name=name,
                display_name=described.get("HubContentDisplayName"),
                version=described.get("HubContentVersion"),
                default_instance_type=document.get("DefaultInferenceInstanceType"),
                supported_instance_types=list(document.get("SupportedInferenceInstanceTypes") or []),
                gated=document.get("GatedBucket") if isinstance(document.get("GatedBucket"), bool) else None,
            )
        )
    return JumpStartListing(region=region, hub=PUBLIC_HUB, models=models)


def _hub_summaries(sm: Any, region: str, name_filter: str) -> list[dict[str, Any]]:
    """ListHubContents pages (botocore has no paginator for it)."""
    params: dict[str, Any] = {"HubName": PUBLIC_HUB, "HubContentType": "Model", "NameContains": name_filter}
    summaries: list[dict[str, Any]] = []
    while True:
        page = call(region, sm.list_hub_contents, **params)
        summaries.extend(page.get("HubContentSummaries", []))
        if not page.get("NextToken"):
            return summaries
        params["NextToken"] = page["NextToken"]


def _document(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
