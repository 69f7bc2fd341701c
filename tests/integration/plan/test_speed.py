"""Speeds and $/M before any deploy (gemmaserve.speed): the mechanism term by term, its constants solved from
calibration runs only, and the held-out published runs predicted within 15%."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gemmaserve.bench.measure import measure_endpoints
from gemmaserve.bench.requests import MeasureRequest
from gemmaserve.catalog import SpeedData, SpeedRun, load_catalog, load_speed_data
from gemmaserve.cli import app
from gemmaserve.errors import UnknownName, UsageError
from gemmaserve.plan import PlanRequest, plan
from gemmaserve.speed import (
    Served,
    SpeedQuestion,
    StepCosts,
    Workload,
    _resolve,
    calibrate,
    check_error,
    costs_for,
    experts_touched_share,
    kv_bytes_per_sequence,
    output_tokens_per_s,
    predict,
    step_seconds,
    weight_bytes_per_step,
    workload_of,
)
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import ThreadedMockServer, start_mock_thread
from tests.support.bench.fixtures import short_measure_request

CATALOG = load_catalog()
DATA = load_speed_data()
GPUS = CATALOG.gpus
L4 = GPUS["l4"]
E2B, E4B, MOE = CATALOG.models["gemma-4-e2b"], CATALOG.models["gemma-4-e4b"], CATALOG.models["gemma-4-26b-a4b"]
CHECKS = [run for run in DATA.runs if run.role == "check"]
# The quoted published runs (SageMaker, a client on a workstation), and vLLM 0.26.0 on the H200 started here.
PUBLISHED_CHECKS = [run for run in CHECKS if run.platform != "vm"]
ENGINE_CHECKS = [run for run in CHECKS if run.platform == "vm"]
H200 = GPUS["h200"]


@pytest.fixture
def mock_server() -> Iterator[ThreadedMockServer]:
    with start_mock_thread(MockConfig(ttft_s=0.002, itl_s=0.0005, natural_tokens=8)) as server:
        yield server


def test_a_step_reads_the_body_and_the_head_but_not_the_per_layer_tables_or_the_towers() -> None:
    bf16 = E2B.encodings["bf16"]
    parts = bf16.parts_bytes
    assert weight_bytes_per_step(E2B.geometry, bf16, 1) == parts["transformer_body"] + parts["vocab_embedding"]
    qat = E2B.encodings["qat-w4a16"]  # its lm_head is stored untied in 16 bits: that is the head read
    assert (
        weight_bytes_per_step(E2B.geometry, qat, 1) == qat.parts_bytes["transformer_body"] + qat.parts_bytes["lm_head"]
    )


def test_the_moe_reads_only_the_experts_its_batch_routes_to() -> None:
    checkpoint = MOE.encodings["bf16"]
    one, sixteen, many = (weight_bytes_per_step(MOE.geometry, checkpoint, b) for b in (1, 16, 4096))
    body = checkpoint.parts_bytes["transformer_body"]
    assert one < 0.2 * body  # top-8 of 128 experts plus the dense parts
    assert one < sixteen < many <= body + checkpoint.parts_bytes["vocab_embedding"] + 1
    assert experts_touched_share(MOE.geometry, 1) == pytest.approx(8 / 128)
    assert experts_touched_share(E2B.geometry, 7) == 1.0


def test_kv_reads_grow_with_context_until_the_sliding_window_then_only_for_full_layers() -> None:
    geometry = E2B.geometry
    short, at_window, long = (kv_bytes_per_sequence(geometry, n) for n in (100, geometry.sliding_window, 8192))
    assert short < at_window < long
    full_layers = geometry.layer_types().count("full")
    per_full_token = 2 * geometry.full_kv_heads * geometry.full_head_dim * 2
    assert long - at_window == full_layers * per_full_token * (8192 - geometry.sliding_window)


def test_large_batches_become_compute_bound() -> None:
    costs = StepCosts(0.9, 0.0, 0.0, ("l4",))
    checkpoint = E4B.encodings["bf16"]
    small = [step_seconds(Served(E4B.geometry, checkpoint, L4), costs, batch=b, context=1) for b in (1, 2)]
    assert small[1] == pytest.approx(small[0], rel=0.01)  # memory-bound: a second sequence is nearly free
    large = [step_seconds(Served(E4B.geometry, checkpoint, L4), costs, batch=b, context=1) for b in (4096, 8192)]
    assert large[1] == pytest.approx(2 * large[0], rel=0.01)  # compute-bound: twice the tokens, twice the time


def test_constants_come_from_calibration_runs_alone() -> None:
    costs = calibrate(DATA.runs, L4)
    assert 0.5 < costs.bandwidth_efficiency < 1.0 and costs.fixed_s > 0 and costs.per_sequence_s > 0
    moved = [
        run.model_copy(update={"decode_tokens_per_s": run.decode_tokens_per_s * 3}) if run.role == "check" else run
        for run in DATA.runs
    ]
    assert calibrate(moved, L4) == costs  # a check run never moves a constant
    for run in DATA.runs:
        if run.role == "calibration" and run.gpu == "l4":  # the solved constants reproduce what they came from
            item = _resolve(run)
            rate = 1 / step_seconds(
                Served(item.geometry, item.checkpoint, L4), costs, batch=1, context=run.prompt_tokens + 128
            )
            assert rate == pytest.approx(run.decode_tokens_per_s, rel=0.01)


def _predicted(run: SpeedRun) -> tuple[float, dict[int, float]]:
    """A check run's decode rate and stream levels as the model predicts them, with the run's own cost per
    request (its client's network, read from its one-stream level) and its streams' routing."""
    item = _resolve(run)
    gpu = GPUS[run.gpu]
    costs, _, _ = costs_for(gpu, DATA, GPUS)
    decode = 1 / step_seconds(
        Served(item.geometry, item.checkpoint, gpu), costs, batch=1, context=run.prompt_tokens + 128
    )
    workload = workload_of(item, gpu)
    levels = {
        streams: output_tokens_per_s(Served(item.geometry, item.checkpoint, gpu), costs, workload, streams)
        for streams in run.output_tokens_per_s
    }
    return decode, levels


@pytest.mark.parametrize("run", PUBLISHED_CHECKS, ids=[f"{r.model}-{r.encoding}-{r.gpu}" for r in PUBLISHED_CHECKS])
def test_held_out_published_runs_are_predicted_within_15_percent(run: SpeedRun) -> None:
    decode, levels = _predicted(run)
    assert decode == pytest.approx(run.decode_tokens_per_s, rel=0.15)
    for streams, measured in run.output_tokens_per_s.items():
        assert levels[streams] == pytest.approx(measured, rel=0.15), streams


def test_the_h200_engine_runs_held_out_are_the_31b_and_the_moe() -> None:
    assert {(run.model, run.gpu) for run in ENGINE_CHECKS} >= {("gemma-4-31b", "h200"), ("gemma-4-26b-a4b", "h200")}
    for run in ENGINE_CHECKS:  # recorded with the plan's prediction made before the run
        assert "predicted before the run" in run.source


@pytest.mark.parametrize("run", ENGINE_CHECKS, ids=[f"{r.model}-{r.gpu}" for r in ENGINE_CHECKS])
def test_held_out_engine_runs_decode_and_16_streams_within_15_percent(run: SpeedRun) -> None:
    decode, levels = _predicted(run)
    assert decode == pytest.approx(run.decode_tokens_per_s, rel=0.15)
    assert levels[16] == pytest.approx(run.output_tokens_per_s[16], rel=0.15)


def test_streams_in_lockstep_route_a_moe_batch_to_one_tokens_experts() -> None:
    checkpoint = MOE.encodings["bf16"]
    one = weight_bytes_per_step(MOE.geometry, checkpoint, 1)
    assert weight_bytes_per_step(MOE.geometry, checkpoint, 16, distinct_tokens=1) == one
    assert weight_bytes_per_step(MOE.geometry, checkpoint, 16) > 3 * one  # 16 distinct tokens: most experts
    dense = E4B.encodings["bf16"]  # a dense model reads all of itself either way
    assert weight_bytes_per_step(E4B.geometry, dense, 16, distinct_tokens=1) == weight_bytes_per_step(
        E4B.geometry, dense, 16
    )
    alike, apart = Workload(44, 256, 0.01, streams_route_alike=True), Workload(44, 256, 0.01)
    costs, _, _ = costs_for(H200, DATA, GPUS)
    fast = output_tokens_per_s(Served(MOE.geometry, checkpoint, H200), costs, alike, 16)
    assert fast > 2 * output_tokens_per_s(Served(MOE.geometry, checkpoint, H200), costs, apart, 16)
    # The 26B A4B run on the H200 (dummy weights) is recorded as lockstep: its 16 streams stepped in
    # 4.72 ms (median gap), one stream in 4.07 ms: one token's experts, not the ~82 of 128 that 16
    # independent tokens would read.
    moe_runs = [run for run in ENGINE_CHECKS if run.model == "gemma-4-26b-a4b"]
    assert moe_runs and all(run.routing == "lockstep" for run in moe_runs)


def test_a_moe_miss_widens_moe_rows_and_a_dense_miss_dense_rows() -> None:
    dense, moe = check_error(DATA, GPUS, E4B.geometry), check_error(DATA, GPUS, MOE.geometry)
    assert 0 < dense < 0.15 and moe > 0
    inflated = [
        run.model_copy(update={"decode_tokens_per_s": run.decode_tokens_per_s * 2})
        if run.role == "check" and run.model == "gemma-4-26b-a4b"
        else run
        for run in DATA.runs
    ]
    moved = SpeedData(runs=inflated, platforms=DATA.platforms)
    assert check_error(moved, GPUS, E4B.geometry) == dense  # a MoE check never widens a dense row
    assert check_error(moved, GPUS, MOE.geometry) > moe


def test_the_interval_holds_the_check_error_and_widens_for_a_gpu_with_no_runs() -> None:
    error = check_error(DATA, GPUS, E2B.geometry)
    assert 0 < error < 0.15
    workload = Workload(128, 256, 0.001)
    checkpoint = E2B.encodings["qat-w4a16"]
    measured = predict(SpeedQuestion(E2B.geometry, checkpoint, L4, workload, (16,), 256), DATA, GPUS)
    borrowed = predict(SpeedQuestion(E2B.geometry, checkpoint, GPUS["t4"], workload, (16,), 256), DATA, GPUS)
    width = lambda p: (p.output_high[16] - p.output_low[16]) / p.output_tokens_per_s[16]  # noqa: E731
    assert width(borrowed) > width(measured) > 0
    assert any("t4: no runs of its own" in term for term in borrowed.unmeasured)
    assert measured.decode_low <= measured.decode_tokens_per_s <= measured.decode_high


def test_streams_beyond_max_num_seqs_or_the_pool_wait() -> None:
    capped = plan(
        PlanRequest.parse(
            {"model": ["e2b"], "encoding": ["qat-w4a16"], "gpu": ["l4"], "max_num_seqs": 4, "concurrency": 16}
        )
    ).rows[0]
    assert capped.speed is not None and capped.speed.effective_concurrency[16] == 4
    free = plan(
        PlanRequest.parse({"model": ["e2b"], "encoding": ["qat-w4a16"], "gpu": ["l4"], "concurrency": 16})
    ).rows[0]
    assert capped.output_tokens_per_s is not None and free.output_tokens_per_s is not None
    assert capped.output_tokens_per_s < free.output_tokens_per_s / 2
    assert any("at most 4 of 16 streams" in note for note in capped.notes)


def test_no_calibration_runs_is_an_error_not_a_guess() -> None:
    empty = SpeedData(runs=[run for run in DATA.runs if run.role == "check"], platforms=DATA.platforms)
    with pytest.raises(ValueError, match="no calibration runs"):
        costs_for(L4, empty, GPUS)


def test_plan_ranks_gpus_by_predicted_cost_and_names_the_next_command() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["plan", "--model", "e4b", "--concurrency", "16", "--sort", "cost"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    table = json.loads(
        runner.invoke(app, ["plan", "--model", "e4b", "--concurrency", "16", "--sort", "cost", "--json"]).output
    )
    best = table["rows"][table["cheapest_fit"]]
    priced = [row["usd_per_million_output_tokens"] for row in table["rows"] if row["usd_per_million_output_tokens"]]
    assert best["usd_per_million_output_tokens"] == min(priced) and best["speed_source"] == "predicted"
    gpus = {row["gpu"] for row in table["rows"] if row["usd_per_million_output_tokens"]}
    assert len(gpus) >= 3  # different GPUs, different predicted rates: not $/h in disguise
    rates = {
        row["gpu"]: row["output_tokens_per_s"]
        for row in table["rows"]
        if row["encoding"] == "qat-w4a16" and row["fits"]
    }
    assert len(set(rates.values())) == len(rates)
    assert lines[-2].startswith(f"Cheapest that fits: e4b {best['encoding']} on {best['gpu']}")
    assert lines[-1].strip() == table["next_command"]
    assert all(len(line.rstrip()) <= 100 for line in lines)


def test_bench_results_replace_the_prediction_for_their_own_row_only(
    mock_server: ThreadedMockServer, tmp_path: Path
) -> None:
    request = short_measure_request(
        mock_server.url,
        tmp_path,
        "l4-qat",
        concurrency=[1, 4],
        repeats=1,
        model=["e2b"],
        encoding=["qat-w4a16"],
        gpu=["l4"],
    )
    measure_endpoints(request, use_uvloop=False)
    (tmp_path / "notes.json").write_text("{}", encoding="utf-8")
    table = plan(
        PlanRequest.parse(
            {
                "model": ["e2b"],
                "encoding": ["qat-w4a16", "bf16"],
                "gpu": ["l4", "t4"],
                "concurrency": 4,
                "from_bench": str(tmp_path),
            }
        )
    )
    by_key = {(row.encoding, row.gpu): row for row in table.rows}
    measured = by_key[("qat-w4a16", "l4")]
    assert measured.speed_source == "measured: l4-qat.json"
    from gemmaserve.measurements.schema import load_result

    result = load_result(tmp_path / "l4-qat.json")
    assert result.target.catalog_model == "gemma-4-e2b" and result.target.encoding == "qat-w4a16"
    assert result.decode is not None and measured.decode_tokens_per_s == pytest.approx(
        result.decode.rate_tokens_per_s, abs=0.05
    )
    level = next(level for level in result.load if level.concurrency == 4)
    assert measured.output_tokens_per_s == pytest.approx(level.median_output_tokens_per_s, abs=0.05)
    assert all(
        row.speed_source == "predicted" for key, row in by_key.items() if key != ("qat-w4a16", "l4") and row.fits
    )
    assert any(unused.startswith("notes.json:") for unused in table.bench_files_unused)


def test_from_bench_needs_a_folder_of_results(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory"):
        plan(PlanRequest.parse({"from_bench": str(tmp_path / "missing")}))
    with pytest.raises(UsageError, match="no result files"):
        plan(PlanRequest.parse({"from_bench": str(tmp_path)}))


def test_bench_measure_names_model_and_encoding_together_from_the_catalog() -> None:
    base = {"targets": ["http://127.0.0.1:1"], "out": "x"}
    with pytest.raises(UsageError, match="go together"):
        MeasureRequest.parse({**base, "model": ["e2b"]}).target_options()
    with pytest.raises(UnknownName):
        MeasureRequest.parse({**base, "model": ["e2b"], "encoding": ["fp4"]}).target_options()
    assert MeasureRequest.parse({**base, "model": ["e2b"], "encoding": ["QAT-W4A16"]}).target_options()[0].served == (
        "gemma-4-e2b",
        "qat-w4a16",
    )


def test_docs_hold_the_current_speed_table() -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "plan_speed_table.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout
