#!/usr/bin/env python3
"""Every real engine start in the repository and every published engine log, beside the plan's figure for it.

    python benchmarks/plan_runs_table.py            # print the Markdown table
    python benchmarks/plan_runs_table.py --check    # exit 1 if docs/plan.md does not hold it

Sources: the recorded vLLM 0.26.0 starts (``benchmarks/plan_gpu_memory_runs.json``), the H200 and H100 starts of
``benchmarks/plan_gpu_speed.py`` (``benchmarks/results/plan_gpu_*/*/plan_gpu_speed.json``) and the published
logs in the catalog (``calibration`` entries). Each is replayed by a test (``tests/unit/plan/test_replay_runs.py``,
``tests/integration/plan/test_h200_runs.py``); this prints them together.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from doc_table import print_or_check

from gemmaserve.catalog import load_catalog, resolve_gpu
from gemmaserve.plan import PlanRow, plan_deployment

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "plan.md"


def _on_h200(total_gib: float) -> Any:
    return resolve_gpu("h200").model_copy(update={"visible_memory_gib": total_gib})


def recorded() -> Iterator[tuple[str, str, int | None, PlanRow]]:
    data = json.loads((ROOT / "benchmarks" / "plan_gpu_memory_runs.json").read_text(encoding="utf-8"))
    for run in data["runs"]:
        settings, figures = run["settings"], run["figures"]
        row = plan_deployment(
            settings["model"], "bf16", _on_h200(settings["device_total_gib"]),
            max_model_len=settings["max_model_len"], gpu_memory_utilization=settings["gpu_memory_utilization"],
            max_num_seqs=settings["max_num_seqs"], max_num_batched_tokens=settings["max_num_batched_tokens"],
            language_model_only=settings.get("language_model_only", True), vllm=data["vllm_version"],
            first_start=figures.get("compiled_this_start", settings["cold"]),
        )  # fmt: skip
        yield f"{run['name']} (text-only, 0.26.0)", "H200, recorded", figures.get("kv_cache_tokens"), row


def gpu_machine_results() -> Iterator[tuple[str, str, int | None, PlanRow]]:
    for path in sorted((ROOT / "benchmarks" / "results").glob("plan_gpu_*/*/plan_gpu_speed.json")):
        card = path.parent.parent.name.split("_")[2].upper()  # plan_gpu_h100_2026-12-06 → H100
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"]:
            settings, figures = run["settings"], run["figures"]
            if "VLLM_USE_V2_MODEL_RUNNER" in settings.get("env", {}):
                continue  # the runner forced: a graph-pool measurement, not a start the plan can be asked for
            row = plan_deployment(
                settings["model"], "bf16", _on_h200(figures["total_gib"]),
                max_model_len=settings["max_model_len"], gpu_memory_utilization=settings["gpu_memory_utilization"],
                max_num_seqs=settings["max_num_seqs"], max_num_batched_tokens=settings["max_num_batched_tokens"],
                language_model_only=settings["text_only"], vllm="0.26",
            )  # fmt: skip
            kind = "text-only" if settings["text_only"] else "multimodal"
            yield (
                f"{run['name']} ({kind}, 0.26.0)",
                f"{card}, {path.parent.parent.name}",
                figures["kv_cache_tokens"],
                row,
            )


def published() -> Iterator[tuple[str, str, int | None, PlanRow]]:
    for model in load_catalog().models.values():
        for checkpoint in model.encodings.values():
            for point in checkpoint.calibration:
                if not point.vllm_version:
                    continue
                row = plan_deployment(
                    model, checkpoint, point.gpu, max_model_len=point.max_model_len,
                    gpu_memory_utilization=point.gpu_memory_utilization, vllm=point.vllm_version,
                    language_model_only=point.language_model_only,
                )  # fmt: skip
                name = f"{model.key.removeprefix('gemma-4-')} {checkpoint.key} ({point.vllm_version})"
                yield name, f"{point.gpu.upper()}, published", point.kv_cache_tokens, row


def table() -> str:
    lines = [
        "| start | where | settings | KV tokens logged / plan | diff |",
        "|---|---|---|---|---|",
    ]
    for source in (recorded, gpu_machine_results, published):
        for name, where, logged, row in source():
            settings = (
                f"{row.max_model_len:,} ctx, {row.gpu_memory_utilization:.4g} util, {row.max_num_seqs} seqs, "
                f"{row.max_num_batched_tokens:,} batched, {'first start' if row.first_start else 'warm'}"
            )
            plan = f"{row.kv_cache_tokens:,}" if row.fits else "does not fit"
            if logged:
                diff = f"{row.kv_cache_tokens / logged - 1:+.2%}" if row.fits else "plan says no"
                lines.append(f"| {name} | {where} | {settings} | {logged:,} / {plan} | {diff} |")
            else:
                verdict = "agrees" if not row.fits else "plan says it fits"
                lines.append(f"| {name} | {where} | {settings} | no memory for the cache / {plan} | {verdict} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    return print_or_check(table(), DOC, "benchmarks/plan_runs_table.py")


if __name__ == "__main__":
    raise SystemExit(main())
