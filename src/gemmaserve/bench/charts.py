"""PNG charts of benchmark results with matplotlib's Agg backend (the optional ``report`` extra).

matplotlib is imported only through :func:`load_pyplot`, which turns its absence
into MissingExtra with the install command. Figures are drawn from saved results
only; each chart is one file in the output directory.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from gemmaserve.bench.cost_table import cost_table, level_throughput
from gemmaserve.bench.results import answered
from gemmaserve.errors import MissingExtra
from gemmaserve.fileio import write_atomic
from gemmaserve.measurements import stats
from gemmaserve.measurements.schema import ResultFile

_DPI = 110


def load_pyplot(import_module: Callable[[str], ModuleType]) -> Any:
    """matplotlib.pyplot on the Agg backend, or MissingExtra naming the extra."""
    try:
        matplotlib = import_module("matplotlib")
        matplotlib.use("Agg")
        return import_module("matplotlib.pyplot")
    except ImportError:
        raise MissingExtra("matplotlib", "report", "The HTML report and its charts") from None


def _save(pyplot: Any, figure: Any, path: Path) -> str:
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})  # no version stamp
    pyplot.close(figure)
    write_atomic(path, buffer.getvalue())
    return str(path)


def _concurrency_axis(axes: Any, levels: set[int]) -> None:
    """Log-2 x axis labelled with the measured levels themselves (1, 4, 16), not powers of two."""
    axes.set_xscale("log", base=2)
    ticks = sorted(levels)
    axes.set_xticks(ticks)
    axes.set_xticklabels([str(tick) for tick in ticks])
    axes.minorticks_off()
    axes.set_xlabel("concurrent requests")


# Series of different targets are set this many marker widths apart at each level: two targets with the
# same figures would otherwise be drawn on one spot, and the one drawn last would hide the other.
DODGE_MARKER_WIDTHS = 1.5


def _dodge_factors(axes: Any, levels: set[int], count: int, markersize: float) -> list[float]:
    """Multipliers of x on the log-2 concurrency axis, one per series, centred on each level and
    :data:`DODGE_MARKER_WIDTHS` markers apart at the axes' size (the ticks stay on the levels)."""
    if count < 2:
        return [1.0] * count
    span_octaves = math.log2(max(levels) / min(levels)) if len(levels) > 1 else 1.0
    width_px = axes.get_window_extent().width
    octaves_per_px = span_octaves * 1.1 / width_px  # matplotlib's default x margins: 5% each side
    step = DODGE_MARKER_WIDTHS * markersize * axes.figure.dpi / 72 * octaves_per_px
    return [2 ** ((index - (count - 1) / 2) * step) for index in range(count)]


def _intervals(
    axes: Any,
    positions: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
    *,
    horizontal: bool,
    color: str = "black",
) -> None:
    """Draw each interval from its own bounds. matplotlib's xerr/yerr take lengths from the point,
    which fail (negative) whenever an interval does not contain its point estimate."""
    if horizontal:
        axes.hlines(positions, lows, highs, color=color, linewidth=1)
        axes.plot([*lows, *highs], [*positions, *positions], linestyle="none", marker="|", markersize=8, color=color)
    else:
        axes.vlines(positions, lows, highs, color=color, linewidth=1)
        axes.plot([*positions, *positions], [*lows, *highs], linestyle="none", marker="_", markersize=8, color=color)


def _decode(pyplot: Any, results: Sequence[ResultFile], path: Path) -> str | None:
    bars = []
    for result in results:
        decode = result.decode
        if decode is None:
            continue
        try:
            rate = stats.decode_rate(
                decode.short_e2el_s,
                decode.long_e2el_s,
                short_tokens=decode.short_tokens,
                long_tokens=decode.long_tokens,
            )
        except ValueError:
            continue
        interval = stats.decode_rate_ci(
            decode.short_e2el_s, decode.long_e2el_s, short_tokens=decode.short_tokens, long_tokens=decode.long_tokens
        )
        high = interval.high if math.isfinite(interval.high) else rate.rate_tokens_per_s
        bars.append((result.target.label, rate.rate_tokens_per_s, interval.low, high))
    if not bars:
        return None
    figure, axes = pyplot.subplots(figsize=(6.4, 0.6 + 0.55 * len(bars)))
    # Positions, not the labels as categories: two targets of one label would share a bar.
    positions = list(range(len(bars)))
    axes.barh(positions, [b[1] for b in bars], color="#4C72B0")
    axes.set_yticks(positions, [b[0] for b in bars])
    _intervals(axes, positions, [b[2] for b in bars], [b[3] for b in bars], horizontal=True)
    for index, bar in enumerate(bars):
        axes.text(max(bar[1], bar[3]), index, f"  {bar[1]:.1f}", va="center", ha="left", fontsize=9)
    axes.invert_yaxis()
    axes.set_xlabel("decode rate, one stream (tok/s), 95% CI")
    axes.set_title("Decode rate (differencing method)")
    axes.margins(x=0.15)
    return _save(pyplot, figure, path)


def _throughput(pyplot: Any, results: Sequence[ResultFile], path: Path) -> str | None:
    series = []
    for result in results:
        points = []
        for level in sorted(result.load, key=lambda lv: lv.concurrency):
            value = level_throughput(level.output_tokens_per_s)
            if value is None:
                continue
            low = high = value
            if len(level.output_tokens_per_s) >= 2:
                interval = stats.bootstrap_ci(level.output_tokens_per_s)
                low, high = interval.low, interval.high
            points.append((level.concurrency, value, low, high))
        if points:
            series.append((result.target.label, points))
    if not series:
        return None
    figure, axes = pyplot.subplots(figsize=(6.4, 4.0))
    levels = {p[0] for _, points in series for p in points}
    factors = _dodge_factors(axes, levels, len(series), pyplot.rcParams["lines.markersize"])
    for (label, points), factor in zip(series, factors, strict=True):
        x = [p[0] * factor for p in points]
        (line,) = axes.plot(x, [p[1] for p in points], marker="o", label=label)
        _intervals(axes, x, [p[2] for p in points], [p[3] for p in points], horizontal=False, color=line.get_color())
    _concurrency_axis(axes, levels)
    axes.set_ylabel("aggregate output tok/s")
    axes.set_title("Throughput vs concurrency (median of repeats, 95% CI)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    return _save(pyplot, figure, path)


def _latency(pyplot: Any, results: Sequence[ResultFile], path: Path) -> str | None:
    series = []
    for result in results:
        levels = sorted(
            (lv for lv in result.load if lv.ttft_s and lv.ttft_s.p50 is not None), key=lambda lv: lv.concurrency
        )
        if levels:
            series.append((result.target.label, levels))
    if not series:
        return None
    figure, (ttft_axes, tpot_axes) = pyplot.subplots(1, 2, figsize=(9.6, 4.0))
    seen = {lv.concurrency for _, levels in series for lv in levels}
    factors = _dodge_factors(ttft_axes, seen, len(series), pyplot.rcParams["lines.markersize"])
    for (label, levels), factor in zip(series, factors, strict=True):
        x = [lv.concurrency * factor for lv in levels]
        for axes, attr in ((ttft_axes, "ttft_s"), (tpot_axes, "tpot_s")):
            p50 = [
                getattr(lv, attr).p50 * 1000 if getattr(lv, attr) and getattr(lv, attr).p50 is not None else math.nan
                for lv in levels
            ]
            p99 = [
                getattr(lv, attr).p99 * 1000 if getattr(lv, attr) and getattr(lv, attr).p99 is not None else math.nan
                for lv in levels
            ]
            line = axes.plot(x, p50, marker="o", label=f"{label} p50")[0]
            axes.plot(x, p99, marker="^", linestyle="--", color=line.get_color(), label=f"{label} p99")
    for axes, title in ((ttft_axes, "TTFT (ms)"), (tpot_axes, "TPOT (ms, first token excluded)")):
        _concurrency_axis(axes, seen)
        axes.set_title(title)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
    return _save(pyplot, figure, path)


def _cost(pyplot: Any, results: Sequence[ResultFile], path: Path, utilisation: float) -> str | None:
    series = []
    for result in results:
        table = cost_table(result, utilisation=utilisation)
        if table is None:
            continue
        points = [p for p in table.points if p.concurrency > 0]
        if points:
            series.append((f"{table.label} (${table.price_usd_per_hour:.3f}/h)", points))
    if not series:
        return None
    figure, axes = pyplot.subplots(figsize=(6.4, 4.0))
    levels = {p.concurrency for _, points in series for p in points}
    factors = _dodge_factors(axes, levels, len(series), pyplot.rcParams["lines.markersize"])
    for (label, points), factor in zip(series, factors, strict=True):
        axes.plot(
            [p.concurrency * factor for p in points],
            [p.usd_per_million_output_tokens for p in points],
            marker="o",
            label=label,
        )
    _concurrency_axis(axes, levels)
    axes.set_yscale("log")  # after the x axis: set_yscale brings back the y minor ticks
    axes.yaxis.set_major_formatter(lambda value, _pos: f"${value:,.2f}")
    axes.yaxis.set_minor_formatter(lambda value, _pos: f"${value:,.2f}")
    axes.tick_params(axis="y", which="minor", labelsize=7)
    axes.set_ylabel("$ per million output tokens")
    axes.set_title(f"Cost per token at {utilisation:.0%} utilisation")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    return _save(pyplot, figure, path)


def _quality(pyplot: Any, results: Sequence[ResultFile], path: Path) -> str | None:
    # correct of answered: a failed request is left out (bench report's one rule), named in the label
    rows = [
        (r.target.label, r.quality.correct, answered(r.quality), r.quality.total)
        for r in results
        if r.quality and answered(r.quality)
    ]
    if not rows:
        return None
    figure, axes = pyplot.subplots(figsize=(6.4, 0.6 + 0.55 * len(rows)))
    shares = [c / a * 100 for _, c, a, _ in rows]
    intervals = [stats.wilson_interval(c, a) for _, c, a, _ in rows]
    positions = list(range(len(rows)))  # not the labels as categories: one label would share a bar
    axes.barh(positions, shares, color="#55A868")
    axes.set_yticks(positions, [r[0] for r in rows])
    _intervals(
        axes,
        positions,
        [i.low * 100 for i in intervals],
        [i.high * 100 for i in intervals],
        horizontal=True,
    )
    for index, (_, correct, asked, total) in enumerate(rows):
        label = f" {correct}/{asked}" + (f" ({total - asked} failed)" if total > asked else "")
        # inside a long bar in white; after a short (or empty) one in black, so a 0 still reads
        inside = shares[index] > 60
        axes.text(1 if inside else shares[index] + 1, index, label, va="center", ha="left", fontsize=9,
                  color="white" if inside else "black")  # fmt: skip
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel("answers correct (%) of those answered, 95% Wilson interval")
    axes.set_title("Answer quality")
    return _save(pyplot, figure, path)


def draw_all(pyplot: Any, results: Sequence[ResultFile], out_dir: Path, *, utilisation: float = 1.0) -> list[str]:
    """Draw every chart the results have data for; returns the PNG paths written."""
    drawn = [
        _decode(pyplot, results, out_dir / "decode.png"),
        _throughput(pyplot, results, out_dir / "throughput.png"),
        _latency(pyplot, results, out_dir / "latency.png"),
        _cost(pyplot, results, out_dir / "cost.png", utilisation),
        _quality(pyplot, results, out_dir / "quality.png"),
    ]
    return [path for path in drawn if path is not None]
