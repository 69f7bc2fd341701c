"""Render the Markdown tables of docs/turing-gpu.md from turing_gpu_graph_check.py's result files.

    python benchmarks/turing_gpu_table.py benchmarks/turing_gpu_results/graph_check_*.json
Reads both result shapes: the first runs (variants stock, clamped, tile16; key "launch" = 2D/3D)
and the current one (adds "launch", the plugin's tile + num_warps delivery; key "layout").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

LABELS = {"stock": "stock", "tile16": "tile 16", "clamped": "tile clamp", "launch": "new launch"}


def _variants(case: dict[str, Any]) -> list[str]:
    return [v for v in LABELS if isinstance(case.get(v), dict)]


def render(report: dict[str, Any]) -> str:
    cases = report["cases"]
    variants = _variants(cases[0]) if cases else []
    head = [
        (
            f"{report['device']} (sm_{report['capability'][0]}{report['capability'][1]}), torch "
            f"{report.get('torch')}, Triton {report.get('triton')}, kernel file {report.get('vllm_file')}:"
        ),
        "",
    ]
    header = (
        "| head | window | batch | grid | "
        + " | ".join(f"{LABELS[v]}: tile, warps" for v in variants)
        + " | "
        + " | ".join(f"{LABELS[v]} rel. error" for v in variants)
        + " | fp16 rounding of ref. | "
        + " | ".join(f"{LABELS[v]} µs" for v in variants)
        + " | "
        + " | ".join(f"{LABELS[v]} / stock" for v in variants if v != "stock")
        + " |"
    )
    columns = 4 + 3 * len(variants) + 1 + len(variants) - 1
    lines = [*head, header, "|" + "---|" * columns]
    for case in cases:
        layout = case.get("layout") if isinstance(case.get("layout"), str) else case.get("launch")
        cells = [str(case["head_size"]), str(case["sliding_window"] or "global"), case["workload"], str(layout)]
        for v in variants:
            tile = case[v].get("tile_launched")
            if tile is None:  # first runs: the tile of the launch's phase
                tile = case[v]["tile_decode"] if layout == "3D" else case[v]["tile_prefill"]
            cells.append(f"{tile}, {case[v].get('num_warps', 'default (4)')}")
        cells += [f"{case[v]['relative_error']:.3e}" for v in variants]
        cells.append(f"{case['stock']['fp16_rounding_of_reference']:.3e}")
        cells += [f"{case[v]['time_ms'] * 1000:.1f}" for v in variants]
        cells += [f"{case[v]['time_ms'] / case['stock']['time_ms']:.3f}" for v in variants if v != "stock"]
        lines.append("| " + " | ".join(cells) + " |")
    if cases:
        replay = max(case[v]["relative_error_after_replay"] for case in cases for v in _variants(case))
        spread = max(
            (max(case[v]["time_ms_samples"]) - min(case[v]["time_ms_samples"])) / case[v]["time_ms"]
            for case in cases
            for v in _variants(case)
        )
        lines += [
            "",
            (
                f"Largest relative error after the graph replays: {replay:.3e}; largest spread of a "
                f"variant's rounds, (max − min) / median: {spread:.1%}."
            ),
        ]
    if report.get("skipped_for_time"):
        lines.append(f"Skipped for time: {', '.join(report['skipped_for_time'])}.")
    return "\n".join(lines)


def main() -> int:
    print("\n\n".join(render(json.loads(Path(name).read_text())) for name in sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
