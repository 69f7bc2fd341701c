"""Fixtures for the measuring engine: the mock streaming server on 127.0.0.1, a scripted clock, short runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.bench.requests import MeasureRequest
from gemmaserve.bench.transports import ChatRequest, Chunk
from gemmaserve.measurements.schema import ClientSettings, RequestKind, RequestRecord
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import (
    MockProcess,
    ThreadedMockServer,
    start_mock_process,
    start_mock_thread,
)


@pytest.fixture
def mock_server() -> Iterator[ThreadedMockServer]:
    """A fast in-process server (functional tests: faults, shapes, saving)."""
    with start_mock_thread(MockConfig(ttft_s=0.002, itl_s=0.0005, natural_tokens=8)) as server:
        yield server


@pytest.fixture(scope="session")
def timed_server() -> Iterator[MockProcess]:
    """A server in its own process streaming at a known rate (2 ms per token), for timing checks."""
    with start_mock_process(MockConfig(ttft_s=0.002, itl_s=0.002, fixed_cost_s=0.004)) as server:
        yield server


def short_settings(**changes: object) -> ClientSettings:
    """Client settings of a short run: one decode call, concurrency 1 and 2, 8-token prompts and answers,
    no quality set, no client-lag guard; ``changes`` override."""
    values: dict[str, object] = {
        "decode_calls": 1,
        "decode_long_tokens": 24,
        "concurrency_levels": [1, 2],
        "load_repeats": 1,
        "load_input_tokens": 8,
        "load_output_tokens": 8,
        "quality_set": None,
        "max_client_lag_s": None,
        **changes,
    }
    return ClientSettings(**values)  # type: ignore[arg-type]


def short_measure_request(url: str, out: Path, label: str, **changes: object) -> MeasureRequest:
    """``bench measure``'s request for a short run on ``url``: 2 decode calls, 8-token answers, no quality
    set, no client-lag guard; ``changes`` (concurrency, repeats, model, ...) override or add."""
    values: dict[str, object] = {
        "targets": [url],
        "out": str(out),
        "label": [label],
        "decode_calls": 2,
        "decode_long": 24,
        "output_tokens": 8,
        "quality_set": "none",
        "max_client_lag_ms": 0,
        **changes,
    }
    return MeasureRequest(**values)  # type: ignore[arg-type]


def decode_record(tokens: int, index: int, **timings: Any) -> RequestRecord:
    """A successful decode call at concurrency 1 that asked for and got ``tokens``; ``timings`` are its
    measured fields (``ttft_s``, ``e2el_s``, ``tpot_s``, ``itl_s``, ``start_offset_s``)."""
    return RequestRecord(
        request_id=f"decode-{tokens}-{index}",
        kind=RequestKind.DECODE,
        concurrency=1,
        repeat=index,
        requested_output_tokens=tokens,
        output_tokens=tokens,
        success=True,
        **timings,
    )


class ScriptedClock:
    """A clock that reads what the scripted transport sets."""

    def __init__(self, start_s: float = 100.0) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s


class ScriptedTransport:
    """Yields a fixed script of (seconds after send, chunk fields) per request; no socket."""

    kind = "http"
    url = "http://scripted"
    description = "scripted"

    def __init__(
        self, clock: ScriptedClock, script: Sequence[tuple[float, dict[str, object]]], error: Exception | None = None
    ) -> None:
        self.clock = clock
        self.script = script
        self.error = error
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        sent_s = self.clock.now_s
        for offset_s, values in self.script:
            self.clock.now_s = sent_s + offset_s
            yield Chunk(arrival_s=self.clock.now_s, **values)  # type: ignore[arg-type]
        if self.error is not None:
            raise self.error

    async def aclose(self) -> None:
        return None


@pytest.fixture
def scripted_clock() -> ScriptedClock:
    return ScriptedClock()
