"""Plausibility of the decode figures: the fixed cost against the calls' own TTFT, the two decode rates.

Calls are built from a per-token model (first token after ``ttft``, then one gap per token), so each
test knows which rule its data keeps or breaks; the bounds come from that model, not from these cases.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from gemmaserve.bench import plausibility, results
from gemmaserve.measurements.schema import ClientSettings, PlausibilityFlag, RequestRecord
from tests.support.bench.fixtures import decode_record

SHORT, LONG = 16, 512


def _call(
    tokens: int, index: int, ttft_s: float, gaps_s: Sequence[float], *, extra_end_s: float = 0.0
) -> RequestRecord:
    """One decode call: its first token at ``ttft_s``, then ``gaps_s`` (tokens − 1 of them)."""
    assert len(gaps_s) == tokens - 1
    e2el = ttft_s + sum(gaps_s) + extra_end_s
    return decode_record(
        tokens,
        index,
        ttft_s=ttft_s,
        itl_s=list(gaps_s),
        e2el_s=e2el,
        tpot_s=(e2el - ttft_s) / (tokens - 1),
        start_offset_s=float(index),
    )


def _calls(
    *,
    ttft_s: float = 0.045,
    token_s: Callable[[int], float] = lambda _k: 0.02,
    extra_end_s: float = 0.0,
    long_ttft_s: float | None = None,
    jitter_s: float = 0.0,
    calls: int = 5,
    seed: int = 3,
) -> list[RequestRecord]:
    """Short and long calls; ``token_s(k)`` is the gap before token k (k = 2…); jitter moves each call's TTFT;
    ``extra_end_s`` is time every call spends beyond its first token and its gaps."""
    rng = random.Random(seed)
    records = []
    for tokens in (SHORT, LONG):
        for index in range(calls):
            first = (long_ttft_s if tokens == LONG and long_ttft_s is not None else ttft_s) + rng.uniform(
                -jitter_s, jitter_s
            )
            gaps = [token_s(k) for k in range(2, tokens + 1)]
            records.append(_call(tokens, index, first, gaps, extra_end_s=extra_end_s))
    return records


def _flags(records: list[RequestRecord]) -> set[PlausibilityFlag]:
    return {finding.flag for finding in plausibility.decode_findings(records, short_tokens=SHORT, long_tokens=LONG)}


# --- the rules hold for every honest decode ------------------------------------------------------------


@pytest.mark.parametrize("slowdown", [0.0, 0.1, 0.5, 2.0])
def test_a_steady_or_slowing_stream_is_never_flagged(slowdown: float) -> None:
    # Attention reads a longer KV cache each step, so later tokens may come slower: the mechanism allows
    # it (the fixed cost then falls, and 1/TPOT rises by less than (L-1)/(L-S)), so nothing is flagged.
    records = _calls(token_s=lambda k: 0.02 * (1 + slowdown * k / LONG), jitter_s=0.003)
    assert _flags(records) == set()


def test_the_allowed_rate_ratio_is_the_long_calls_first_gaps_and_one_token() -> None:
    # the first 15 gaps of a long call take from nothing to 15 + 1 tokens' time
    assert plausibility.rate_ratio_bounds(SHORT, LONG) == (pytest.approx(511 / 512), pytest.approx(511 / 495))


@pytest.mark.parametrize(("first_gaps_tokens", "flagged"), [(0.0, False), (16.0, False), (16.5, True), (40.0, True)])
def test_the_long_calls_first_gaps_may_take_up_to_one_token_more_than_their_share(
    first_gaps_tokens: float, flagged: bool
) -> None:
    # Only the long calls' first 15 gaps set the two rates apart (the short calls are those gaps alone);
    # here they take the given number of tokens' time in all (15 is their share), every later gap 20 ms.
    gap = 0.02
    first = [first_gaps_tokens * gap / (SHORT - 1)] * (SHORT - 1)
    short = [_call(SHORT, i, 0.045, first) for i in range(5)]
    long = [_call(LONG, i, 0.045, first + [gap] * (LONG - SHORT)) for i in range(5)]
    assert (PlausibilityFlag.DECODE_RATES_DISAGREE in _flags(short + long)) is flagged


# --- fixed cost against TTFT ------------------------------------------------------------------------


def test_the_quoted_fixed_cost_of_250_ms_against_a_ttft_of_45_ms_is_flagged() -> None:
    # TTFT 45 ms, 50 tok/s, and every call spends 225 ms beyond its first token and its tokens: the line
    # puts the fixed cost at 45 − 20 + 225 = 250 ms.
    records = _calls(ttft_s=0.045, extra_end_s=0.225)
    decode = results.decode_measurement(records, ClientSettings())
    assert decode.intercept_s == pytest.approx(0.250)
    (finding,) = [f for f in decode.findings if f.flag == PlausibilityFlag.FIXED_COST_ABOVE_TTFT]
    assert finding.numbers["fixed_cost_ms"] == pytest.approx(250)
    assert finding.numbers["ttft_ms"] == pytest.approx(45)
    assert finding.numbers["over_ttft_ms"] == pytest.approx(205)
    assert "250.0 ms is 205.0 ms above the calls' own TTFT 45.0 ms" in finding.message
    assert "queueing" in finding.message
    assert decode.intercept_flag == "above_ttft"
    assert any(w.startswith("fixed_cost_above_ttft: ") for w in decode.warnings)


@pytest.mark.parametrize(("extra_ms", "flagged"), [(0.0, False), (19.0, False), (20.0, False), (21.0, True)])
def test_fixed_cost_threshold_is_the_ttft_without_noise(extra_ms: float, flagged: bool) -> None:
    # Exact calls at 20 ms a token: the line meets 0 tokens at TTFT − 20 ms + extra, so it passes the
    # TTFT when the calls carry more than one token's time beyond their first token and their tokens.
    records = _calls(extra_end_s=extra_ms / 1000)
    assert (PlausibilityFlag.FIXED_COST_ABOVE_TTFT in _flags(records)) is flagged


@pytest.mark.parametrize("seed", range(6))
def test_fixed_cost_at_the_ttft_is_not_flagged_through_noise(seed: int) -> None:
    # ±10 ms of TTFT jitter around a fixed cost exactly at the TTFT (the bound): the noise alone never flags.
    records = _calls(extra_end_s=0.020, jitter_s=0.010, seed=seed)
    assert PlausibilityFlag.FIXED_COST_ABOVE_TTFT not in _flags(records)


@pytest.mark.parametrize("seed", range(6))
def test_fixed_cost_well_above_the_ttft_is_flagged_through_noise(seed: int) -> None:
    records = _calls(extra_end_s=0.060, jitter_s=0.010, seed=seed)
    assert PlausibilityFlag.FIXED_COST_ABOVE_TTFT in _flags(records)


# --- the two decode rates -----------------------------------------------------------------------------


def test_the_quoted_74_percent_gap_between_the_rates_is_flagged() -> None:
    # Tokens held back and sent together: the long calls' first token comes late and the rest follow
    # quickly, each call as long as before, so 1/TPOT reads 74% above the differencing rate (50 → 87 tok/s).
    rng = random.Random(5)
    gap = 0.02 / 1.74
    held_back = 511 * (0.02 - gap)
    short = [r for r in _calls(jitter_s=0.002) if r.requested_output_tokens == SHORT]
    long = [_call(LONG, i, 0.045 + held_back + rng.uniform(-0.002, 0.002), [gap] * (LONG - 1)) for i in range(5)]
    (finding,) = [
        f
        for f in plausibility.decode_findings(short + long, short_tokens=SHORT, long_tokens=LONG)
        if f.flag == PlausibilityFlag.DECODE_RATES_DISAGREE
    ]
    assert finding.numbers["differencing_tokens_per_s"] == pytest.approx(50, rel=0.01)
    assert finding.numbers["stream_tokens_per_s"] == pytest.approx(87, rel=0.01)
    assert "74%" in finding.message and "above" in finding.message


@pytest.mark.parametrize(
    ("long_ttft_extra_ms", "flagged"),
    [(0.0, False), (200.0, False), (600.0, True), (-300.0, True)],
)
def test_rate_ratio_threshold(long_ttft_extra_ms: float, flagged: bool) -> None:
    # The long calls wait longer (or shorter) for their first token than the short ones: the differencing
    # rate counts that as decode time, 1/TPOT does not. 200 ms over 496 tokens at 20 ms is a 2% gap
    # (inside 0.998…1.032); 600 ms is 6%; 300 ms less is 3% below.
    records = _calls(ttft_s=0.4, long_ttft_s=0.4 + long_ttft_extra_ms / 1000)
    assert (PlausibilityFlag.DECODE_RATES_DISAGREE in _flags(records)) is flagged


def test_a_rate_gap_within_the_noise_is_not_flagged() -> None:
    # 600 ms of extra first-token wait is flagged on exact calls but not when TTFTs scatter by ±400 ms.
    records = _calls(ttft_s=0.5, long_ttft_s=1.1, jitter_s=0.400, seed=11)
    assert PlausibilityFlag.DECODE_RATES_DISAGREE not in _flags(records)


def test_no_findings_without_the_calls_they_need() -> None:
    records = _calls()
    assert plausibility.decode_findings([], short_tokens=SHORT, long_tokens=LONG) == []
    only_short = [r for r in records if r.requested_output_tokens == SHORT]
    assert plausibility.decode_findings(only_short, short_tokens=SHORT, long_tokens=LONG) == []
    flat = _calls(token_s=lambda _k: 0.0)  # long calls no slower than short ones: no rate to judge
    assert plausibility.decode_findings(flat, short_tokens=SHORT, long_tokens=LONG) == []
