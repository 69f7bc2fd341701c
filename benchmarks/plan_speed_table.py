#!/usr/bin/env python3
"""The speed model against every measured run in ``catalog/speed.toml``, as the Markdown table in docs/plan.md.

    python benchmarks/plan_speed_table.py            # print the table
    python benchmarks/plan_speed_table.py --check    # exit 1 if docs/plan.md does not hold it

Calibration runs are what the per-GPU constants are solved from (they reproduce by construction,
up to the least-squares fit); check runs are held out and predicted. Each run's own cost per request
outside the engine (the client's network) is read from its one-stream level and used for its
stream levels, as ``tests/integration/plan/test_speed.py`` does.
"""

from __future__ import annotations

from pathlib import Path

from doc_table import print_or_check

from gemmaserve.catalog import load_catalog, load_speed_data
from gemmaserve.speed import (
    Served,
    _resolve,
    call_seconds_of,
    costs_for,
    output_tokens_per_s,
    step_seconds,
    workload_of,
)

DOC = Path(__file__).resolve().parents[1] / "docs" / "plan.md"


def table() -> str:
    catalog, data = load_catalog(), load_speed_data()
    lines = [
        "| run | role | decode measured / predicted | 1 stream | 4 streams | 16 streams | cost per request |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in data.runs:
        item = _resolve(run)
        gpu = catalog.gpus[run.gpu]
        costs, _, _ = costs_for(gpu, data, catalog.gpus)
        context = run.prompt_tokens + run.output_tokens // 2
        decode = 1 / step_seconds(Served(item.geometry, item.checkpoint, gpu), costs, batch=1, context=context)
        call_s = call_seconds_of(item, gpu)
        workload = workload_of(item, gpu)
        cells = []
        for streams in (1, 4, 16):
            measured = run.output_tokens_per_s.get(streams)
            if measured is None:
                cells.append("—")
                continue
            predicted = output_tokens_per_s(Served(item.geometry, item.checkpoint, gpu), costs, workload, streams)
            cells.append(f"{measured:,.1f} / {predicted:,.1f} ({predicted / measured - 1:+.1%})")
        name = f"{run.model.removeprefix('gemma-4-')} {run.encoding} {run.gpu} vLLM {run.vllm_version}"
        if run.routing == "lockstep":
            name += " (streams in lockstep)"
        lines.append(
            f"| {name} | {run.role} | {run.decode_tokens_per_s:.1f} / {decode:.1f} "
            f"({decode / run.decode_tokens_per_s - 1:+.1%}) | {' | '.join(cells)} | {call_s:.2f} s |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    return print_or_check(table(), DOC, "benchmarks/plan_speed_table.py")


if __name__ == "__main__":
    raise SystemExit(main())
