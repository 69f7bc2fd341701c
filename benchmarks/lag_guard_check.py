"""Does the client's saturation guard see what the first tokens really waited? Checked against the server.

The guard (``gemmaserve.bench.shards``) stops a run when the client's event loop lags more than the
budget while the first tokens arrive; it judges probe ticks, because the client cannot see how long
a chunk sat in its socket. The mock server can: its records, joined request by request with the
client's (``gemmaserve.testing.truth``), give each first token's trip back to the client. This
script runs one client process on a core of its own (the server on another), at several stream
counts, optionally with a busy-looping process on the client's core, and prints per level the
truth (trip back to the client, p50/p90), the guard's figure (first-token lag p50/p90, and the
run's), and whether the guard would stop the run. Needs two cores.

    python benchmarks/lag_guard_check.py --levels 256,512,768,256:hog,512:hog [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gemmaserve.bench.engine import quantile
from gemmaserve.bench.shards import DEFAULT_MAX_LAG_S, ShardedRun, run_sharded_batch
from gemmaserve.bench.transports import ChatRequest
from gemmaserve.bench.workloads import synthetic_prompt
from gemmaserve.measurements import stats
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import fetch_json, start_mock_process
from gemmaserve.testing.truth import ttft_splits


def check(streams: int, hog: bool, server_cpu: int, client_cpu: int) -> dict[str, Any]:
    requests = [
        (f"g{i}", ChatRequest(synthetic_prompt(32, seed=1, salt=("guard", i)), 128, ignore_eos=True))
        for i in range(streams)
    ]
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {server_cpu})
    server = start_mock_process(MockConfig(ttft_s=0.03, itl_s=0.02, record=True))
    os.sched_setaffinity(0, {client_cpu})
    competitor = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if hog else None
    try:
        with server:
            result = run_sharded_batch(
                server.url,
                requests,
                ShardedRun(processes=1, timeout_s=120, raise_on_saturation=False),
                before_start=lambda: fetch_json(server.url + "/mock/requests", method="DELETE"),
            )
            records = fetch_json(server.url + "/mock/requests")
    finally:
        if competitor is not None:
            competitor.kill()
            competitor.wait()
        os.sched_setaffinity(0, before)
    shard = result.shards[0]
    back = [split.to_client_s for split in ttft_splits(result.batch.outcomes, records)]
    verdict = shard.lag_verdict(DEFAULT_MAX_LAG_S)
    return {
        "streams": streams,
        "competitor_on_client_core": hog,
        "cpu_share": shard.cpu_share,
        "truth_back_to_client_p50_s": stats.median(back),
        "truth_back_to_client_p90_s": quantile(back, 0.9),
        "guard_first_token_lag_p50_s": shard.first_token_lag_p50_s,
        "guard_first_token_lag_p90_s": shard.first_token_lag_p90_s,
        "guard_run_lag_p50_s": shard.lag_p50_s,
        "guard_stops": verdict is not None,
        "guard_when": verdict.when if verdict else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="256,512,768,256:hog,512:hog", help="streams[:hog], comma-separated")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/lag_guard_check_after.json"))
    args = parser.parse_args()
    rows = []
    started = time.perf_counter()
    for level in args.levels.split(","):
        streams, _, hog = level.partition(":")
        row = check(int(streams), hog == "hog", args.server_cpu, args.client_cpu)
        row["load_average"] = os.getloadavg()
        print(json.dumps(row), flush=True)
        rows.append(row)
    document = {"budget_s": DEFAULT_MAX_LAG_S, "elapsed_s": time.perf_counter() - started, "levels": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
