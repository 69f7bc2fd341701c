"""The SageMaker results' views and ``ok``: what the CLI prints and its exit status, from the result alone.

The awkward cases each view must survive: an empty inventory (read, or not read at all), a pool with no
placed type, a log group not made yet, a reply over several lines, a dry run that preflight would refuse.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from gemmaserve.cli.errors import EXIT_FAILED, EXIT_OK, exit_code_for
from gemmaserve.cost import PriceRange
from gemmaserve.engine_log import EngineFacts
from gemmaserve.sagemaker.deployment.update import UpdateOutcome, UpdateResult
from gemmaserve.sagemaker.operations.inventory import (
    CleanupItem,
    CleanupReport,
    CleanupVerdict,
    DeploymentSummary,
    Inventory,
    RegionError,
)
from gemmaserve.sagemaker.operations.logs import EndpointLogs, LogLine
from gemmaserve.sagemaker.operations.runtime import InvokeResult
from gemmaserve.sagemaker.operations.status import EndpointState, EndpointStatus
from gemmaserve.views import page_for, summary_for
from gemmaserve.views.page import plain_lines
from tests.support.sagemaker.helpers import run
from tests.unit.test_result_models import _instance

WHEN = datetime(2026, 12, 4, 14, 31, tzinfo=UTC)


def _plain(result: Any) -> list[str]:
    return plain_lines(page_for(result))


def _endpoint(name: str, **changes: Any) -> DeploymentSummary:
    base = {
        "endpoint_name": name,
        "region": "us-east-1",
        "status": EndpointStatus.IN_SERVICE,
        "instance_type": "ml.g4dn.xlarge",
        "instance_count": 1,
        "created_at": WHEN,
        "age_s": 360.0,
        "owner": "ana",
        "model": "gemma-4-e2b/bf16",
        "expires_at": WHEN,
        "keep": False,
        "expired": False,
        "usd_per_hour": 0.736,
        "price_source": "catalog",
        "cost_so_far_usd": 0.07,
    }
    return DeploymentSummary.model_validate(base | changes)


def test_the_inventory_is_a_table_of_columns_with_the_total_under_it() -> None:
    pool = _endpoint(
        "pooled",
        instance_type=None,
        pool_types=["ml.g6.xlarge", "ml.g6.2xlarge"],
        usd_per_hour=None,
        price_range=PriceRange(low_usd_per_hour=0.805, high_usd_per_hour=0.978),
        age_s=None,
        expires_at=None,
        keep=True,
    )
    inventory = Inventory(
        regions=["us-east-1"],
        endpoints=[_endpoint("old", expired=True), pool],
        errors=[],
        total_usd_per_hour=1.541,
    )
    lines = _plain(inventory)
    assert lines[0].split() == ["ENDPOINT", "REGION", "OWNER", "STATUS", "INSTANCE", "AGE", "$/H", "EXPIRES"]
    old = "old us-east-1 ana InService ml.g4dn.xlarge 0.1h 0.736 2026-12-04 14:31Z EXPIRED"
    assert lines[1].split() == old.split()
    assert lines[2].split() == "pooled us-east-1 ana InService pool:ml.g6.xlarge|ml.g6.2xlarge ? 0.81-0.98 keep".split()
    assert lines[3] == "Total: $1.541/hour" and exit_code_for(inventory) == EXIT_OK


def test_an_empty_inventory_says_none_were_found_only_where_regions_were_read() -> None:
    read = Inventory(regions=["us-east-1", "eu-west-1"], endpoints=[], errors=[], total_usd_per_hour=0.0)
    assert _plain(read) == ["No endpoints of gemmaserve's in the 2 region(s) read.", "Total: $0.000/hour"]
    error = RegionError(region="eu-west-1", error="AwsError", message="denied")
    part = read.model_copy(update={"errors": [error]})
    assert _plain(part) == [
        "No endpoints of gemmaserve's in the 1 region(s) read.",
        "Total: at least $0.000/hour (1 region(s) unread)",
    ]
    assert part.ok is False and exit_code_for(part) == EXIT_FAILED
    assert "INCOMPLETE, could not check: eu-west-1 (denied)" in summary_for(part)
    none = Inventory(regions=["eu-west-1"], endpoints=[], errors=[error], total_usd_per_hour=0.0)
    assert _plain(none) == ["Total: unknown (no region could be read: eu-west-1)"]  # never "no endpoints"


def test_cleanup_is_not_ok_when_a_chosen_resource_was_refused_and_says_so_to_an_agent() -> None:
    refused = CleanupItem(
        kind="endpoint", name="exp-a", region="us-east-1", owner="ana", verdict=CleanupVerdict.REFUSED, fix="--force"
    )
    report = CleanupReport(dry_run=False, owner="ana", expired=[], deleted=[], items=[refused], errors=[])
    assert report.ok is False and json.loads(report.model_dump_json())["ok"] is False
    assert _plain(report) == ["refused       endpoint:exp-a (us-east-1, ana)", "              fix: --force"]
    assert "NOT DONE: endpoint:exp-a (refused)" in summary_for(report)
    unread = CleanupReport(
        dry_run=True,
        owner=None,
        expired=[],
        deleted=[],
        errors=[RegionError(region="eu-west-1", error="AwsError", message="denied")],
    )
    assert _plain(unread) == ["Nothing to delete (any owner) in the regions read; 1 region(s) could not be read."] and (
        exit_code_for(unread) == EXIT_FAILED
    )


def test_logs_say_when_there_is_no_log_group_yet_and_what_the_engine_facts_are() -> None:
    logs = EndpointLogs(
        endpoint_name="w",
        region="us-east-1",
        log_group="/aws/sagemaker/Endpoints/w",
        log_group_exists=False,
        lines=[],
        facts=EngineFacts(),
        truncated=False,
    )
    assert _plain(logs) == [
        "No log group /aws/sagemaker/Endpoints/w yet (capacity wait, or the container cannot start).",
        "Engine facts: none yet",
    ]
    line = LogLine(timestamp=WHEN, stream="AllTraffic/i-1", message="GPU KV cache size: 146,525 tokens")
    found = logs.model_copy(
        update={
            "log_group_exists": True,
            "lines": [line],
            "facts": EngineFacts(kv_cache_tokens=146525),
            "truncated": True,
        }
    )
    assert _plain(found) == [
        "14:31:00 GPU KV cache size: 146,525 tokens",
        "(only the first 1 lines were read)",
        "Engine facts: kv_cache_tokens=146525",
    ]
    assert summary_for(found) == (
        "1 lines from /aws/sagemaker/Endpoints/w (truncated). Engine facts: kv_cache_tokens=146525"
    )


def test_the_reply_is_printed_as_it_came_and_is_the_agents_text_too() -> None:
    reply = InvokeResult(
        endpoint_name="e2b",
        region="us-east-1",
        text="first line\n  second [bold]line[/]",
        finish_reason="stop",
        usage=None,
        latency_s=0.5,
        invoked_variant=None,
        response={},
    )
    assert "\n".join(_plain(reply)) == reply.text == summary_for(reply)


def test_a_state_not_found_has_no_price_and_a_pool_shows_its_range() -> None:
    gone = EndpointState(endpoint_name="x", region="us-east-1", status=EndpointStatus.NOT_FOUND)
    assert _plain(gone) == ["x (us-east-1): NotFound"]
    pool = EndpointState(
        endpoint_name="p",
        region="us-east-1",
        status=EndpointStatus.CREATING,
        pool_types=["ml.g6.xlarge", "ml.g6.2xlarge"],
        price_range=PriceRange(low_usd_per_hour=0.805, high_usd_per_hour=0.978, unpriced=["ml.x"]),
    )
    assert _plain(pool) == [
        "p (us-east-1): Creating",
        "  pool     ml.g6.xlarge, ml.g6.2xlarge",
        "  price    $0.805–0.978/hour (price unknown for ml.x)",
    ]
    assert summary_for(pool) == "p (us-east-1): Creating"


def test_an_update_that_went_back_is_not_ok() -> None:
    result = _instance(UpdateResult)
    assert isinstance(result, UpdateResult)
    back = result.model_copy(update={"dry_run": False, "outcome": UpdateOutcome.ROLLED_BACK, "rollback": "slower"})
    assert back.ok is False and exit_code_for(back) == EXIT_FAILED
    assert "Outcome: rolled-back (slower)" in _plain(back)
    done = back.model_copy(update={"outcome": UpdateOutcome.UPDATED, "rollback": None})
    assert done.ok is True


def test_a_dry_run_preflight_refuses_exits_1_with_ok_false_in_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sagemaker", "deploy", "--model", "e2b", "--instance", "ml.g4dn.xlarge", "--region", "us-east-1"]
    code, out, err = run([*args, "--dry-run", "--json"], capsys)
    outcome = json.loads(out)
    assert code == 1 and outcome["ok"] is False and outcome["preflight"]["ok"] is False
    assert "would be refused" in err  # the stock image on a T4: no Turing clamp
    code, out, _ = run([*args, "--image", "763104351884.dkr.ecr.us-east-1.amazonaws.com/x:1", "--dry-run"], capsys)
    assert "Dry run — these calls would be made:" in out


def test_image_render_shows_the_dockerfile_or_the_buildspec_with_the_same_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, dockerfile, _ = run(["sagemaker", "image", "render", "--region", "eu-west-1"], capsys)
    assert code == 0 and dockerfile.startswith("FROM ") and not dockerfile.endswith("\n\n")
    code, buildspec, _ = run(["sagemaker", "image", "render", "--region", "eu-west-1", "--buildspec"], capsys)
    assert code == 0 and buildspec.startswith("version: 0.2")
    _, plain_json, _ = run(["sagemaker", "image", "render", "--region", "eu-west-1", "--json"], capsys)
    _, spec_json, _ = run(["sagemaker", "image", "render", "--region", "eu-west-1", "--buildspec", "--json"], capsys)
    assert json.loads(plain_json) == json.loads(spec_json)
    assert json.loads(plain_json)["dockerfile"] == dockerfile and json.loads(plain_json)["ok"] is True
