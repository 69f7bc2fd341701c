"""Where a client's TTFT differs from the mock server's own record of the same request.

The client times a request from its last byte written to its first content chunk read; the
server (``MockConfig(record=True)``) from its handler's start to its first content chunk handed to the
connection (stamped just before the write, so the client can never read it earlier).
``time.perf_counter`` is CLOCK_MONOTONIC on Linux, one clock for every process of the machine,
so the two records of one request (joined by :func:`~gemmaserve.testing.mock_server.prompt_key`)
split the client's TTFT exactly into three parts: the trip to the server's handler (the request
waiting in a socket while the server's loop serves others: the server's delay, which a real
server's own records leave out too), the server's TTFT, and the trip back (the first chunk
waiting until the client's loop reads it: the client's error).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gemmaserve.bench.engine import Outcome
from gemmaserve.testing.mock_server import prompt_key


@dataclass(frozen=True, slots=True)
class TtftSplit:
    request_id: str
    client_ttft_s: float
    to_server_s: float  # the request left the client -> the server's handler started
    server_ttft_s: float  # the server's handler started -> it wrote the first content chunk
    to_client_s: float  # the server wrote the first content chunk -> the client read it


def ttft_splits(outcomes: Iterable[Outcome], records: Iterable[Mapping[str, Any]]) -> list[TtftSplit]:
    """One split per successful outcome whose prompt the server recorded with a first token.

    Raises ValueError when two records share a prompt: the join would be a guess.
    """
    by_key: dict[str, Mapping[str, Any]] = {}
    for entry in records:
        key = entry.get("prompt_key")
        if key is None or not entry["token_times_s"]:
            continue
        if key in by_key:
            raise ValueError(f"two server records of the same prompt (key {key}): give every request its own prompt")
        by_key[key] = entry
    splits = []
    for outcome in outcomes:
        record = by_key.get(prompt_key(outcome.request.prompt))
        if record is None or not outcome.success or outcome.metrics is None or outcome.metrics.ttft_s is None:
            continue
        first_read_s = outcome.sent_s + outcome.metrics.ttft_s
        first_written_s = record["token_times_s"][0]
        splits.append(
            TtftSplit(
                request_id=outcome.request_id,
                client_ttft_s=outcome.metrics.ttft_s,
                to_server_s=record["received_s"] - outcome.sent_s,
                server_ttft_s=first_written_s - record["received_s"],
                to_client_s=first_read_s - first_written_s,
            )
        )
    return splits
