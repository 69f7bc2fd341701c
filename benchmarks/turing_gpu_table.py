"""Render the Markdown tables of docs/turing-gpu.md from turing_gpu_graph_check.py's result files.

    python benchmarks/turing_gpu_table.py benchmarks/turing_gpu_results/gpu_check_*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

VARIANTS = ("stock", "clamped", "tile16")
HEADER = ("| head | window | batch | launch | tiles prefill/decode, stock → clamped | rel. error stock "
          "| rel. error clamped | rel. error tile 16 | fp16 rounding of ref. | stock µs | clamped µs "
          "| tile 16 µs | clamped / stock | tile 16 / stock |")


def render(report: dict[str, Any]) -> str:
    lines = [(f"{report['device']} (sm_{report['capability'][0]}{report['capability'][1]}), torch "
             f"{report['torch']}, Triton {report['triton']}, kernel file {report['vllm_file']}:"), "",
             HEADER, "|" + "---|" * 14]
    for case in report["cases"]:
        stock, clamped, small = (case[v] for v in VARIANTS)
        lines.append(
            f"| {case['head_size']} | {case['sliding_window'] or 'global'} | {case['workload']} | {case['launch']} "
            f"| {stock['tile_prefill']}/{stock['tile_decode']} → {clamped['tile_prefill']}/{clamped['tile_decode']} "
            f"| {stock['relative_error']:.3e} | {clamped['relative_error']:.3e} | {small['relative_error']:.3e} "
            f"| {stock['fp16_rounding_of_reference']:.3e} | {stock['time_ms'] * 1000:.1f} "
            f"| {clamped['time_ms'] * 1000:.1f} | {small['time_ms'] * 1000:.1f} "
            f"| {case['clamped_over_stock_time']:.3f} | {case['tile16_over_stock_time']:.3f} |")
    replay = max(case[v]["relative_error_after_replay"] for case in report["cases"] for v in VARIANTS)
    spread = max((max(case[v]["time_ms_samples"]) - min(case[v]["time_ms_samples"])) / case[v]["time_ms"]
                 for case in report["cases"] for v in VARIANTS)
    lines += ["", (f"Largest relative error after the graph replays: {replay:.3e}; largest spread of a "
                  f"variant's rounds, (max − min) / median: {spread:.1%}.")]
    return "\n".join(lines)


def main() -> int:
    print("\n\n".join(render(json.loads(Path(name).read_text())) for name in sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
