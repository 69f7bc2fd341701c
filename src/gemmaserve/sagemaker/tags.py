"""The tags gemmaserve puts on everything it creates, and reading them back (pure).

A resource is ours when it carries ``gemmaserve:tool=gemmaserve``; its owner and
expiry (an absolute UTC time, so no clock of ours has to be trusted later) let
``list`` and ``cleanup --expired`` find what is leaking money.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from gemmaserve.errors import UsageError

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
