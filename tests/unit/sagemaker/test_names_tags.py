"""Name validation and our tags: pure rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gemmaserve.errors import UsageError
from gemmaserve.sagemaker.spec.container import (
    MAX_ENDPOINT_NAME_LENGTH,
    build_tags,
    config_name_for,
    default_endpoint_name,
    is_expired,
    is_ours,
    model_name_for,
    parse_tags,
    tags_to_dict,
    validate_endpoint_name,
    validate_name,
)

NOW = datetime(2026, 12, 2, 17, 0, tzinfo=UTC)


@pytest.mark.parametrize("name", ["a", "gemma4-t4", "A1", "a--b", "x" * 63])
def test_valid_names(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", "a-", "a_b", "a.b", "x" * 64, "a b", "é"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(UsageError):
        validate_name(name)


def test_endpoint_name_leaves_room_for_derived_names() -> None:
    name = "e" * MAX_ENDPOINT_NAME_LENGTH
    validate_endpoint_name(name)
    assert len(model_name_for(name)) <= 63 and len(config_name_for(name)) <= 63
    with pytest.raises(UsageError):
        validate_endpoint_name(name + "e")


def test_default_endpoint_name() -> None:
    assert default_endpoint_name("gemma-4-e2b", "t4") == "gemma-4-e2b-t4"
    assert default_endpoint_name("gemma_4.x", "l40s") == "gemma-4-x-l40s"


def test_tags_round_trip_and_expiry() -> None:
    tags = build_tags(owner="ana", now=NOW, ttl_s=3600, model="gemma-4-e2b", extra={"team": "x"})
    as_dict = tags_to_dict(tags)
    assert is_ours(as_dict) and as_dict["team"] == "x"
    parsed = parse_tags(as_dict)
    assert parsed is not None
    assert parsed.owner == "ana" and parsed.model == "gemma-4-e2b" and not parsed.keep
    assert parsed.created_at == NOW and parsed.expires_at == NOW + timedelta(hours=1)
    assert not is_expired(parsed, NOW + timedelta(minutes=59))
    assert is_expired(parsed, NOW + timedelta(hours=1))


def test_keep_never_expires() -> None:
    parsed = parse_tags(tags_to_dict(build_tags(owner="ana", now=NOW, ttl_s=None)))
    assert parsed is not None and parsed.keep and parsed.expires_at is None
    assert not is_expired(parsed, NOW + timedelta(days=365))


def test_foreign_and_unreadable_tags() -> None:
    assert parse_tags({"Name": "x"}) is None
    parsed = parse_tags({"gemmaserve:tool": "gemmaserve", "gemmaserve:expires-at": "soon"})
    assert parsed is not None and parsed.expires_at is None and not is_expired(parsed, NOW)


@pytest.mark.parametrize("ttl", [0, -5])
def test_ttl_must_be_positive(ttl: float) -> None:
    with pytest.raises(UsageError):
        build_tags(owner="a", now=NOW, ttl_s=ttl)


def test_naive_time_is_refused() -> None:
    with pytest.raises(ValueError):
        build_tags(owner="a", now=datetime(2026, 1, 1), ttl_s=1)
