"""The cost table of a result file: $/M output tokens at its decode rate and each load level."""

from __future__ import annotations

import pytest

from gemmaserve.bench import cost_table as bench_cost

from .test_schema_builders import build_result


def test_cost_table_from_a_result() -> None:
    result = build_result(
        price_usd_per_hour=0.72, rate_tokens_per_s=50.0, load_tok_s={1: [40.0, 50.0, 60.0], 4: [200.0]}
    )
    table = bench_cost.cost_table(result, utilisation=0.5)
    assert table is not None
    by_level = {point.concurrency: point for point in table.points}
    assert by_level[0].output_tokens_per_s == pytest.approx(50.0, rel=0.01)
    assert by_level[1].usd_per_million_output_tokens == pytest.approx(0.72 / (50 * 3600 * 0.5) * 1e6)
    assert by_level[4].usd_per_million_output_tokens == pytest.approx(0.72 / (200 * 3600 * 0.5) * 1e6)
    assert table.price_source == "catalog"


def test_cost_table_without_a_price_is_none() -> None:
    assert bench_cost.cost_table(build_result(price_usd_per_hour=None)) is None


def test_level_throughput_is_the_median_of_repeats() -> None:
    assert bench_cost.level_throughput([10.0, 30.0, 20.0]) == 20.0
    assert bench_cost.level_throughput([]) is None
    assert bench_cost.level_throughput([0.0, 0.0]) is None
