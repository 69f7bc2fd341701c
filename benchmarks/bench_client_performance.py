"""How exact is gemmaserve's benchmark client? Measure it against a server whose timing is known.

The mock server (its own process) streams at a configured inter-token interval
and records when it really wrote each token; the client's figures are compared
with both. Checks: decode rate within 1% of the true rate, fixed per-call cost
within 1 ms, TTFT/ITL medians within 0.5 ms at concurrency 1 and 256, 512
concurrent streams sustained; then the same TTFT/ITL check with GuideLLM, installed
by the caller in its own venv (with the CPU torch pinned: unpinned it pulls CUDA):

    python3 -m venv /tmp/gl && /tmp/gl/bin/pip install guidellm "torch==2.13.0+cpu"
    python benchmarks/bench_client_performance.py [--quick] [--guidellm /tmp/gl] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

from gemmaserve.bench import stats
from gemmaserve.bench.engine import run_batch
from gemmaserve.bench.prompts import synthetic_prompt
from gemmaserve.bench.transports import ChatRequest, HttpTransport
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import fetch_json, start_mock_process


def _server_truth(url: str) -> dict[str, float]:
    """Medians of what the server really did (TTFT from arrival, gaps between token writes)."""
    records = fetch_json(url + "/mock/requests")
    fetch_json(url + "/mock/requests", method="DELETE")
    ttfts = [r["token_times_s"][0] - r["received_s"] for r in records if r["token_times_s"]]
    gaps = [b - a for r in records for a, b in zip(r["token_times_s"], r["token_times_s"][1:], strict=False)]
    tpots = [(r["token_times_s"][-1] - r["token_times_s"][0]) / (len(r["token_times_s"]) - 1)
             for r in records if len(r["token_times_s"]) > 1]
    return {"ttft_p50_s": statistics.median(ttfts), "itl_p50_s": statistics.median(gaps) if gaps else float("nan"),
            "tpot_p50_s": statistics.median(tpots) if tpots else float("nan"), "requests": len(records)}


async def _batch(url: str, *, concurrency: int, tokens: int, requests: int, salt: str,
                 warm: bool = False) -> dict[str, Any]:
    transport = HttpTransport(url, timeout_s=120)
    try:
        if warm:  # open every keep-alive connection first, as `bench measure` does before a load level
            await run_batch(transport, [(f"w{i}", ChatRequest(f"warm {salt} {i}", 2)) for i in range(concurrency)],
                            concurrency=concurrency, clock=time.perf_counter, timeout_s=120)
            await asyncio.to_thread(fetch_json, url + "/mock/requests", method="DELETE")
        batch = await run_batch(
            transport,
            [(f"{salt}-{i}", ChatRequest(synthetic_prompt(32, seed=1, salt=(salt, i)), tokens, ignore_eos=True))
             for i in range(requests)],
            concurrency=concurrency, clock=time.perf_counter, timeout_s=120,
        )
    finally:
        await transport.aclose()
    ok = [o for o in batch.outcomes if o.success and o.metrics]
    wall = batch.finished_s - batch.started_s
    chunks = sum(o.chunks for o in batch.outcomes)
    itl = [g for o in ok for g in o.metrics.itl_s]  # type: ignore[union-attr]
    return {
        "requests": len(batch.outcomes), "failed": len(batch.outcomes) - len(ok),
        "ttft_p50_s": stats.median([o.metrics.ttft_s for o in ok]),  # type: ignore[union-attr,misc]
        "itl_p50_s": stats.median(itl), "itl_p99_s": stats.percentile(itl, 99),
        "tpot_p50_s": stats.median([o.metrics.tpot_s for o in ok if o.metrics.tpot_s]),  # type: ignore[union-attr,misc]
        "e2el_s": [o.metrics.e2el_s for o in ok],  # type: ignore[union-attr]
        "cpu_s": batch.cpu_s, "wall_s": wall, "cpu_share": batch.cpu_s / wall,
        "cpu_us_per_chunk": 1e6 * batch.cpu_s / chunks if chunks else None,
        "output_tokens_per_s": sum(o.metrics.output_tokens for o in ok) / wall,  # type: ignore[union-attr]
    }


def _run(coroutine: Any) -> Any:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


async def _decode_calls(url: str, calls: int) -> tuple[list[float], list[float]]:
    """Sequential 16- and 512-token calls on ONE keep-alive session, as `bench measure` makes them."""
    transport = HttpTransport(url, timeout_s=120)
    short: list[float] = []
    long: list[float] = []
    try:
        await run_batch(transport, [("warm", ChatRequest("warm up", 2))], concurrency=1, clock=time.perf_counter,
                        timeout_s=120)
        await asyncio.to_thread(fetch_json, url + "/mock/requests", method="DELETE")
        for call in range(calls):
            for tokens, into in ((16, short), (512, long)):
                prompt = synthetic_prompt(32, seed=1, salt=("decode", tokens, call))
                batch = await run_batch(transport, [(f"d{call}", ChatRequest(prompt, tokens, ignore_eos=True))],
                                        concurrency=1, clock=time.perf_counter, timeout_s=120)
                into.append(batch.outcomes[0].metrics.e2el_s)  # type: ignore[union-attr,arg-type]
    finally:
        await transport.aclose()
    return short, long


def decode_check(calls: int) -> dict[str, Any]:
    itl_s, fixed_s = 0.004, 0.010
    # ttft = itl, so the line's value at 0 tokens is exactly the fixed cost the server adds.
    config = MockConfig(ttft_s=itl_s, itl_s=itl_s, fixed_cost_s=fixed_s, record=True)
    with start_mock_process(config) as server:
        short, long = _run(_decode_calls(server.url, calls))
        records = fetch_json(server.url + "/mock/requests")
    line = stats.decode_rate(short, long)
    # The same line from the server's own clock: arrival -> last token written.
    server_walls = {16: [], 512: []}  # type: dict[int, list[float]]
    for record in records:
        server_walls[record["tokens"]].append(record["token_times_s"][-1] - record["received_s"])
    server_line = stats.decode_rate(server_walls[16], server_walls[512])
    true_rate = 1 / itl_s
    return {
        "true_rate_tokens_per_s": true_rate, "rate_tokens_per_s": line.rate_tokens_per_s,
        "rate_error_share": line.rate_tokens_per_s / true_rate - 1,
        "server_recorded_rate_tokens_per_s": server_line.rate_tokens_per_s,
        "configured_fixed_cost_s": fixed_s, "intercept_s": line.intercept_s,
        "intercept_error_s": line.intercept_s - fixed_s,
        "server_recorded_intercept_s": server_line.intercept_s,
        "intercept_error_vs_server_s": line.intercept_s - server_line.intercept_s,
    }


def latency_check(concurrency: int, tokens: int, itl_s: float, ttft_s: float) -> dict[str, Any]:
    config = MockConfig(ttft_s=ttft_s, itl_s=itl_s, record=True)
    with start_mock_process(config) as server:
        client = _run(_batch(server.url, concurrency=concurrency, tokens=tokens, requests=concurrency, salt="m",
                             warm=True))
        truth = _server_truth(server.url)
    client.pop("e2el_s")
    return {
        "concurrency": concurrency, "tokens": tokens, "configured_ttft_s": ttft_s, "configured_itl_s": itl_s,
        "server": truth, "client": client,
        "ttft_error_vs_configured_s": client["ttft_p50_s"] - ttft_s,
        "ttft_error_vs_server_s": client["ttft_p50_s"] - truth["ttft_p50_s"],
        "itl_error_vs_configured_s": client["itl_p50_s"] - itl_s,
        "itl_error_vs_server_s": client["itl_p50_s"] - truth["itl_p50_s"],
        "tpot_error_vs_server_s": client["tpot_p50_s"] - truth["tpot_p50_s"],
    }


_TOKENIZER_SCRIPT = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2}
for word in sys.argv[2:] + [f"t{i}" for i in range(1, 4096)]:
    vocab.setdefault(word, len(vocab))
tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", bos_token="<s>",
                        eos_token="</s>").save_pretrained(sys.argv[1])
"""


def guidellm_check(venv: Path, concurrency: int, tokens: int, itl_s: float, ttft_s: float) -> dict[str, Any]:
    """GuideLLM against the same server. A word-level tokenizer is built locally: no model hub here."""
    from gemmaserve.bench.prompts import VOCABULARY

    tokenizer_dir = Path("/tmp/gemmaserve-bench-tokenizer")
    subprocess.run([str(venv / "bin" / "python"), "-c", _TOKENIZER_SCRIPT, str(tokenizer_dir), *VOCABULARY],
                   check=True)
    out = Path(f"/tmp/gemmaserve-guidellm-{concurrency}.json")
    with start_mock_process(MockConfig(ttft_s=ttft_s, itl_s=itl_s, record=True)) as server:
        requests = max(concurrency, 5)
        command = [str(venv / "bin" / "guidellm"), "run",
                   "--backend", f"kind=openai_http,target={server.url},model=mock-model",
                   "--profile", f"kind=concurrent,streams={concurrency}",
                   "--constraint", f"kind=max_requests,count={requests}",
                   "--tokenizer", f"kind=huggingface_auto,model={tokenizer_dir}",
                   "--data", f"kind=synthetic_text,prompt_tokens=32,output_tokens={tokens}",
                   "--output", f"kind=json,path={out}", "--disable-console"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                                   env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
        wall_s = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        truth = _server_truth(server.url)
    if completed.returncode != 0:
        return {"concurrency": concurrency, "failed": completed.stderr[-2000:]}
    metrics = json.loads(out.read_text())["benchmarks"][0]["metrics"]

    def med(name: str) -> float:
        return float(metrics[name]["successful"]["median"]) / 1000

    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "concurrency": concurrency, "tokens": tokens, "server": truth,
        "ttft_p50_s": med("time_to_first_token_ms"),
        # GuideLLM's inter_token_latency is per request (latency - ttft) / (tokens - 1): our tpot.
        "itl_p50_s": med("inter_token_latency_ms"),
        "ttft_error_vs_server_s": med("time_to_first_token_ms") - truth["ttft_p50_s"],
        "itl_error_vs_server_s": med("inter_token_latency_ms") - truth["itl_p50_s"],
        "tpot_error_vs_server_s": med("inter_token_latency_ms") - truth["tpot_p50_s"],
        "cpu_s_all_processes": cpu_s, "wall_s": wall_s, "errored": metrics["request_totals"]["errored"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls (about a minute)")
    parser.add_argument("--guidellm", type=Path, help="a venv with guidellm installed (see the docstring)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/client_performance.json"))
    args = parser.parse_args()
    import os

    # The machine may be shared: record its load so a noisy run can be recognised.
    results: dict[str, Any] = {"python": sys.version.split()[0], "loop": "uvloop", "load_average_before": os.getloadavg()}
    started = time.perf_counter()
    results["decode"] = decode_check(3 if args.quick else 5)
    print(json.dumps(results["decode"], indent=1), flush=True)
    results["latency"] = []
    for concurrency, tokens, itl_s in ((1, 256, 0.02), (256, 256, 0.02), (512, 128, 0.05)):
        row = latency_check(concurrency, tokens, itl_s, ttft_s=0.03)
        print(json.dumps(row, indent=1), flush=True)
        results["latency"].append(row)
    if args.guidellm:
        results["guidellm"] = []
        for concurrency in (1, 256):
            row = guidellm_check(args.guidellm, concurrency, 256, 0.02, ttft_s=0.03)
            print(json.dumps(row, indent=1)[:3000], flush=True)
            results["guidellm"].append(row)
    results["elapsed_s"] = time.perf_counter() - started
    results["load_average_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
