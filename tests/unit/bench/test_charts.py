"""The report's charts as drawn: every target visible, a 0 bar labelled (checked on the rendered artists)."""

from __future__ import annotations

import importlib
import itertools
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.bench import charts
from gemmaserve.measurements import schema

from .test_schema_builders import build_result

pytest.importorskip("matplotlib")


class KeptPyplot:
    """matplotlib.pyplot whose ``close`` keeps the figure, so a test can read what was drawn."""

    def __init__(self) -> None:
        self.pyplot = charts.load_pyplot(importlib.import_module)
        self.figures: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pyplot, name)

    def close(self, figure: Any) -> None:
        self.figures.append(figure)


def _drawn(draw: Any, results: list[schema.ResultFile], tmp_path: Path, *args: Any) -> Any:
    kept = KeptPyplot()
    assert draw(kept, results, tmp_path / "chart.png", *args) is not None
    (figure,) = kept.figures
    figure.canvas.draw()
    return figure


def _marker_points_px(axes: Any) -> dict[str, list[tuple[float, float]]]:
    """Display positions of each labelled line's markers (the interval bars are unlabelled)."""
    points = {}
    for line in axes.get_lines():
        label = line.get_label()
        if label.startswith("_") or line.get_marker() in ("None", None, ""):
            continue
        xy = axes.transData.transform(list(zip(line.get_xdata(), line.get_ydata(), strict=True)))
        points[label] = [(float(x), float(y)) for x, y in xy]
    return points


def _assert_apart(points: dict[str, list[tuple[float, float]]], min_px: float) -> None:
    for (a, pa), (b, pb) in itertools.combinations(points.items(), 2):
        for (xa, ya), (xb, yb) in zip(pa, pb, strict=True):
            assert abs(xa - xb) >= min_px or abs(ya - yb) >= min_px, (a, b, (xa, ya), (xb, yb))


def _twins() -> list[schema.ResultFile]:
    # Two targets with the same figures everywhere: drawn on one spot, one would hide the other.
    load = {1: [50.0, 50.0, 50.0], 4: [190.0, 190.0, 190.0], 16: [600.0, 600.0, 600.0]}
    return [
        build_result(label="t4-a", load_tok_s=load),
        build_result(label="t4-b", url="http://127.0.0.1:8001", load_tok_s=load),
    ]


@pytest.mark.parametrize("chart", ["throughput", "cost"])
def test_targets_with_the_same_figures_are_each_visible(tmp_path: Path, chart: str) -> None:
    draw = {"throughput": charts._throughput, "cost": charts._cost}[chart]
    args = (1.0,) if chart == "cost" else ()
    figure = _drawn(draw, _twins(), tmp_path, *args)
    (axes,) = figure.axes
    points = _marker_points_px(axes)
    assert {label.split(" (")[0] for label in points} == {"t4-a", "t4-b"}
    marker_px = max(line.get_markersize() for line in axes.get_lines()) * figure.dpi / 72
    _assert_apart(points, marker_px)
    # the ticks still name the measured levels themselves
    assert [tick.get_text() for tick in axes.get_xticklabels()] == ["1", "4", "16"]


def test_latency_chart_shows_each_target_and_percentile(tmp_path: Path) -> None:
    figure = _drawn(charts._latency, _twins(), tmp_path)
    for axes in figure.axes:
        points = _marker_points_px(axes)
        assert set(points) == {"t4-a p50", "t4-a p99", "t4-b p50", "t4-b p99"}
        marker_px = max(line.get_markersize() for line in axes.get_lines()) * figure.dpi / 72
        _assert_apart({k: v for k, v in points.items() if k.endswith("p50")}, marker_px)
        _assert_apart({k: v for k, v in points.items() if k.endswith("p99")}, marker_px)


def test_bars_of_targets_with_one_label_do_not_stack(tmp_path: Path) -> None:
    results = [
        build_result(label="t4", correct=[True] * 30 + [False] * 10),
        build_result(label="t4", correct=[True] * 40, seed=2),
    ]
    for draw in (charts._decode, charts._quality):
        figure = _drawn(draw, results, tmp_path)
        (axes,) = figure.axes
        bars = [patch.get_y() for patch in axes.patches]
        assert len(bars) == 2 and len(set(bars)) == 2, draw


def test_a_zero_score_bar_is_labelled_where_it_can_be_read(tmp_path: Path) -> None:
    results = [build_result(label="broken", correct=[False] * 40), build_result(label="good", correct=[True] * 40)]
    figure = _drawn(charts._quality, results, tmp_path)
    (axes,) = figure.axes
    texts = {text.get_text().strip(): text for text in axes.texts}
    zero = texts["0/40"]
    assert zero.get_color() == "black" and 0 < zero.get_position()[0] < 100
    assert texts["40/40"].get_color() == "white"
