"""What a full garbage collection does to a burst, with and without the batch freezing the heap first.

CPython's collector walks every tracked object of the process in a full (generation 2) collection:
17-31 ms for ``bench measure``'s heap on the 2-core machine. When one falls inside a burst, the
event loop stands still and the requests behind it leave late (a 16-stream burst on the GPU host
had one send wait 18.7 ms). ``run_batch`` therefore freezes the heap before its clock starts. This script makes a full collection due at the start of each burst (long-lived objects
made, generation-1 collections counted up to the threshold, as a long-running client accumulates
them) and runs the same 16-stream burst against the mock server with ``run_batch`` as shipped and
with the freeze taken out, alternating, on this process's real heap (the CLI imported). Per burst:
the spread of the sends (first start to last send), the largest gap between two sends, the TTFT
error against the server's records, and the full collections that ran inside the burst.

    python benchmarks/gc_pause_check.py [--bursts 10] [--streams 16] [--objects 200000] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gemmaserve.cli  # noqa: F401  (the heap a `bench measure` process has)
from gemmaserve.bench import engine
from gemmaserve.bench.transports import ChatRequest, HttpTransport
from gemmaserve.bench.workloads import synthetic_prompt
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import fetch_json, start_mock_process
from gemmaserve.testing.truth import ttft_splits

_full_collections: list[tuple[float, float]] = []  # (start, end) of every generation-2 collection
_started: list[float] = []


def _watch(phase: str, info: dict[str, int]) -> None:
    if info["generation"] != 2:
        return
    if phase == "start":
        _started.append(time.perf_counter())
    else:
        _full_collections.append((_started.pop(), time.perf_counter()))


def _make_a_full_collection_due(objects: int, keep: list[Any]) -> None:
    """Long-lived objects pending (more than a quarter of the old generation) and generation 1
    collected up to its threshold: the next automatic collection is a full one."""
    gc.disable()  # made without a collection in between, so all of them are still pending
    keep[:] = [[[i] for i in range(objects)]]  # lists are always tracked (a dict of ints is not)
    gc.enable()
    for _ in range(gc.get_threshold()[2] + 1):
        gc.collect(1)


async def _burst(url: str, streams: int, index: int, frozen: bool, objects: int, keep: list[Any]) -> dict[str, Any]:
    transport = HttpTransport(url, timeout_s=60)
    try:
        await transport.discover_model()
        requests = [
            (f"b{index}-{i}", ChatRequest(synthetic_prompt(64, seed=index, salt=("gc", i)), 8, ignore_eos=True))
            for i in range(streams)
        ]
        shipped = engine._heap_frozen
        if not frozen:
            engine._heap_frozen = contextlib.nullcontext  # type: ignore[assignment]
        try:
            _make_a_full_collection_due(objects, keep)
            collections_before = len(_full_collections)
            batch = await engine.run_batch(
                transport,
                requests,
                concurrency=streams,
                timeout_s=60,
                probe_lag=False,
                deps=engine.BatchDeps(clock=time.perf_counter),
            )
        finally:
            engine._heap_frozen = shipped
    finally:
        await transport.aclose()
    starts = [o.sent_s - (o.client_queue_s or 0.0) for o in batch.outcomes]
    sends = sorted(o.sent_s for o in batch.outcomes)
    last_first_token = max(o.sent_s + o.metrics.ttft_s for o in batch.outcomes if o.metrics and o.metrics.ttft_s)
    inside = [
        end - start
        for start, end in _full_collections[collections_before:]
        if start < last_first_token and end > batch.started_s
    ]
    return {
        "send_spread_s": sends[-1] - min(starts),
        "largest_send_gap_s": max(b - a for a, b in itertools.pairwise(sends)),
        "full_collections_in_burst_s": inside,
        "outcomes": batch.outcomes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bursts", type=int, default=10, help="bursts per mode (alternating)")
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--objects", type=int, default=200_000, help="long-lived objects made before each burst")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/gc_pause_check.json"))
    args = parser.parse_args()
    gc.callbacks.append(_watch)
    keep: list[Any] = []
    rows: dict[str, list[dict[str, Any]]] = {"frozen (as shipped)": [], "not frozen": []}
    with start_mock_process(MockConfig(ttft_s=0.03, itl_s=0.01, record=True)) as server:
        for index in range(args.bursts * 2):
            frozen = index % 2 == 0
            fetch_json(server.url + "/mock/requests", method="DELETE")
            result = asyncio.run(_burst(server.url, args.streams, index, frozen, args.objects, keep))
            records = fetch_json(server.url + "/mock/requests")
            splits = ttft_splits(result.pop("outcomes"), records)
            result["ttft_error_p50_s"] = statistics.median(s.client_ttft_s - s.server_ttft_s for s in splits)
            rows["frozen (as shipped)" if frozen else "not frozen"].append(result)
    summary = {}
    for mode, bursts in rows.items():
        ms = [1000 * b["send_spread_s"] for b in bursts]
        summary[mode] = {
            "bursts": len(bursts),
            "send_spread_ms_median": statistics.median(ms),
            "send_spread_ms_max": max(ms),
            "largest_send_gap_ms_max": 1000 * max(b["largest_send_gap_s"] for b in bursts),
            "ttft_error_ms_median_of_bursts": 1000 * statistics.median(b["ttft_error_p50_s"] for b in bursts),
            "bursts_with_a_full_collection_inside": sum(bool(b["full_collections_in_burst_s"]) for b in bursts),
            "full_collection_ms": [round(1000 * d, 2) for b in bursts for d in b["full_collections_in_burst_s"]],
        }
    document = {"objects": args.objects, "streams": args.streams, "python": sys.version.split()[0], **summary}
    print(json.dumps(document, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**document, "bursts": rows}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
