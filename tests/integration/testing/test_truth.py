"""The join of a client's outcomes with the mock server's records, without a server."""

from __future__ import annotations

import pytest

from gemmaserve.bench.engine import Outcome
from gemmaserve.bench.metrics import compute_request_metrics
from gemmaserve.bench.transports import ChatRequest, Chunk
from gemmaserve.testing.mock_server import prompt_key
from gemmaserve.testing.truth import ttft_splits


def _outcome(prompt: str, sent_s: float, first_read_s: float) -> Outcome:
    metrics = compute_request_metrics(sent_s, [Chunk(first_read_s, "a", token=True), Chunk(first_read_s, done=True)])
    return Outcome(prompt, ChatRequest(prompt, 1), sent_s, first_read_s, metrics)


def _record(prompt: str, received_s: float, first_written_s: float) -> dict[str, object]:
    return {"prompt_key": prompt_key(prompt), "received_s": received_s, "token_times_s": [first_written_s]}


def test_each_ttft_splits_at_the_server_stamps_and_unmatched_requests_are_left_out() -> None:
    outcomes = [_outcome("a", 10.000, 10.050), _outcome("b", 10.001, 10.070), _outcome("not recorded", 10.0, 10.1)]
    records = [_record("b", 10.011, 10.061), _record("a", 10.004, 10.049), {"prompt_key": None, "token_times_s": []}]
    splits = {s.request_id: s for s in ttft_splits(outcomes, records)}
    assert set(splits) == {"a", "b"}
    assert splits["a"].to_server_s == pytest.approx(0.004)
    assert splits["a"].server_ttft_s == pytest.approx(0.045)
    assert splits["a"].to_client_s == pytest.approx(0.001)
    assert splits["b"].to_server_s + splits["b"].server_ttft_s + splits["b"].to_client_s == pytest.approx(0.069)


def test_two_records_of_one_prompt_are_refused_not_guessed() -> None:
    with pytest.raises(ValueError, match="same prompt"):
        ttft_splits([_outcome("a", 0.0, 0.05)], [_record("a", 0.001, 0.04), _record("a", 0.002, 0.045)])
