"""Every recorded real engine run, replayed through the plan: tokens within 2%; published runs within 5%.

``benchmarks/plan_gpu_memory_runs.json`` holds real vLLM starts (settings and the engine's own
lines); the catalog's ``calibration`` entries hold published engine logs. Nothing in the plan is
fitted to these: a miss here is a mechanism the plan does not yet model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.catalog import load_catalog
from gemmaserve.plan import plan_deployment
from tests.support.plan.replay import replay_h200_start

RUNS_FILE = Path(__file__).resolve().parents[3] / "benchmarks" / "plan_gpu_memory_runs.json"
DOCUMENT = json.loads(RUNS_FILE.read_text(encoding="utf-8"))
RECORDED = [
    run for run in DOCUMENT["runs"] if run.get("status", "ok").startswith("ok") or run["figures"].get("out_of_memory")
]


def _replay(run: dict[str, Any]) -> Any:
    settings = run["settings"]
    text_only = settings.get("language_model_only", True)
    # Whether this start compiled, as its own log says (a warm cache can miss: the compile
    # hash covers more than the settings the script varies); else as the run was set up.
    compiled = run["figures"].get("compiled_this_start", settings["cold"])
    return replay_h200_start(settings, settings["device_total_gib"], text_only, DOCUMENT["vllm_version"], compiled)


def test_the_data_file_holds_real_runs() -> None:
    assert DOCUMENT["vllm_version"].startswith("0.26")
    assert len(RECORDED) >= 5
    for run in RECORDED:
        assert run["figures"].get("kv_cache_tokens") or run["figures"].get("out_of_memory"), run["name"]


@pytest.mark.parametrize("run", RECORDED, ids=[run["name"] for run in RECORDED])
def test_every_recorded_run_replays_within_two_percent(run: dict[str, Any]) -> None:
    row = _replay(run)
    figures = run["figures"]
    if figures.get("out_of_memory") or not figures.get("kv_cache_tokens"):
        assert not row.fits, f"{run['name']}: vLLM had no memory for the cache, the plan says {row.verdict}"
        return
    assert row.fits, f"{run['name']}: vLLM started, the plan says {row.binding_term}"
    assert row.kv_cache_tokens == pytest.approx(figures["kv_cache_tokens"], rel=0.02), run["name"]
    if "available_kv_gib" in figures:
        assert row.kv_budget_gib == pytest.approx(figures["available_kv_gib"], rel=0.02, abs=0.05), run["name"]


def _published() -> list[tuple[str, str, Any]]:
    points = []
    for model in load_catalog().models.values():
        for checkpoint in model.encodings.values():
            for point in checkpoint.calibration:
                if point.vllm_version:
                    points.append((model.key, checkpoint.key, point))
    return points


PUBLISHED = _published()


@pytest.mark.parametrize(("model", "encoding", "point"), PUBLISHED, ids=[f"{m}-{e}-{p.gpu}" for m, e, p in PUBLISHED])
def test_published_engine_logs_are_reproduced_within_five_percent(model: str, encoding: str, point: Any) -> None:
    row = plan_deployment(
        model,
        encoding,
        point.gpu,
        max_model_len=point.max_model_len,
        gpu_memory_utilization=point.gpu_memory_utilization,
        vllm=point.vllm_version,
        language_model_only=point.language_model_only,
    )
    assert row.weights_gib == pytest.approx(point.weights_gib, rel=0.01)
    assert row.kv_cache_tokens == pytest.approx(point.kv_cache_tokens, rel=0.05)
    assert row.max_concurrency == pytest.approx(point.max_concurrency, rel=0.05)


def test_the_four_published_l4_runs_are_all_checked() -> None:
    assert {(m, e) for m, e, _ in PUBLISHED} >= {
        ("gemma-4-e2b", "bf16"),
        ("gemma-4-e2b", "qat-w4a16"),
        ("gemma-4-e4b", "bf16"),
        ("gemma-4-e4b", "qat-w4a16"),
    }
