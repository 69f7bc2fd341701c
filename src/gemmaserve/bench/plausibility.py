"""Plausibility of the decode figures: what the timing of one call allows them to be (pure: no I/O).

A call is timed from the moment it left: its first token arrives after ``ttft``, then one gap per
further token, so a call of n tokens lasts ``e2el(n) = ttft + Σ gaps(2..n)`` (metrics.py). The
client cannot tell where prefill ends and the first decode step begins (the first token carries
both), so each rule below allows one token's time, ``t = 1/differencing rate``, of slack. From that
alone, with no constant fitted to any run:

- **Fixed cost.** The differencing line (rate from the short and long calls' median walls) meets
  0 tokens at ``intercept = e2el(S) − S·t``. If the short calls are their TTFT plus S − 1 tokens at
  that rate, the intercept is ``TTFT − t``; when later tokens come slower (attention reads a longer
  KV cache each step) the line is steeper and the intercept lower still. With the one token of
  slack the bound is the TTFT itself: a start-up cost cannot exceed the time before anything came
  back. Above it is time the short calls spent that neither their first token nor their tokens
  explain.
- **Two decode rates.** The differencing rate is ``1 / mean gap over tokens S+1..L``; the streams'
  own ``1/TPOT`` of the long calls is ``1 / mean gap over tokens 2..L``. They share every gap but
  the first S − 1 of the long calls, which together take anything from nothing (later tokens
  slower) to their share plus the one token of slack, so ``1/TPOT ÷ differencing`` lies in
  ``[(L − 1)/L, (L − 1)/(L − S − 1)]`` (0.998–1.032 for 16 and 512 tokens).

A figure is flagged only when no choice among the calls measured (any short call's wall, any long
call's, any TTFT, any TPOT) brings it inside what the mechanism allows, so noise alone does not flag
it. The range of the calls, not a bootstrap of their medians: with 3-5 calls a side that bootstrap is
too narrow, and against the local mock server (a steady 2 ms a token, so a rate ratio of exactly 1)
it flagged the two rates in 2 of 4 runs. Without the slack the range still flagged 2 of 12 runs
there (its first gaps ran 0.4 ms long in all, a fifth of a token). Differences under the clock's
resolution are not differences.
"""

from __future__ import annotations

from collections.abc import Sequence

from gemmaserve.measurements import stats
from gemmaserve.measurements.schema import PlausibilityFinding, PlausibilityFlag, RequestKind, RequestRecord

# Two timestamps closer than this are one reading (stats.SAME_READ_S): an excess below it is not measured.
RESOLUTION_S = stats.SAME_READ_S
# A ratio of two floats computed from the same walls differs from its bound by rounding alone below this.
RATIO_ROUNDING = 1e-9


def rate_ratio_bounds(short_tokens: int, long_tokens: int) -> tuple[float, float]:
    """What one decode speed allows for 1/TPOT of the long calls ÷ the differencing rate: their first
    S − 1 gaps take from nothing to (S − 1) + 1 tokens' time, the one being the slack."""
    return (long_tokens - 1) / long_tokens, (long_tokens - 1) / (long_tokens - short_tokens - 1)


def _calls(records: Sequence[RequestRecord], tokens: int) -> list[RequestRecord]:
    return [
        r
        for r in records
        if r.kind == RequestKind.DECODE
        and r.success
        and r.requested_output_tokens == tokens
        and r.e2el_s is not None
        and r.ttft_s is not None
    ]


def decode_findings(
    records: Sequence[RequestRecord], *, short_tokens: int, long_tokens: int
) -> list[PlausibilityFinding]:
    """The findings over the successful decode calls in ``records``; none when a rate cannot be computed."""
    short, long = _calls(records, short_tokens), _calls(records, long_tokens)
    if not short or not long or long_tokens <= short_tokens:
        return []
    short_walls = [r.e2el_s for r in short if r.e2el_s is not None]
    long_walls = [r.e2el_s for r in long if r.e2el_s is not None]
    ttfts = [r.ttft_s for r in (*short, *long) if r.ttft_s is not None]
    extra = long_tokens - short_tokens

    def over_ttft(short_wall: float, long_wall: float, ttft: float) -> float:
        # intercept − TTFT, the intercept being e2el(S) − S·(e2el(L) − e2el(S)) / (L − S)
        return (long_tokens * short_wall - short_tokens * long_wall) / extra - ttft

    short_median, long_median = stats.median(short_walls), stats.median(long_walls)
    token = (long_median - short_median) / extra
    if not token > 0:
        return []  # the long calls are not slower: no rate, so nothing to judge
    ttft = stats.median(ttfts)
    findings = []
    over = over_ttft(short_median, long_median, ttft)
    over_min = over_ttft(min(short_walls), max(long_walls), max(ttfts))
    over_max = over_ttft(max(short_walls), min(long_walls), min(ttfts))
    if over_min > RESOLUTION_S:
        findings.append(_fixed_cost_finding(token, over, ttft, over_min, over_max, short_tokens))
    tpots = [r.tpot_s for r in long if r.tpot_s is not None and r.tpot_s > 0]
    if len(tpots) == len(long):
        ratio = token / stats.median(tpots)
        ratio_min = max(min(long_walls) - max(short_walls), 0.0) / extra / max(tpots)
        ratio_max = (max(long_walls) - min(short_walls)) / extra / min(tpots)
        allowed = rate_ratio_bounds(short_tokens, long_tokens)
        if ratio_min > allowed[1] * (1 + RATIO_ROUNDING) or ratio_max < allowed[0] * (1 - RATIO_ROUNDING):
            findings.append(_rates_finding(token, ratio, (ratio_min, ratio_max), allowed, short_tokens, long_tokens))
    return findings


def _fixed_cost_finding(
    token_s: float, over_s: float, ttft_s: float, low_s: float, high_s: float, short_tokens: int
) -> PlausibilityFinding:
    fixed_cost_s = ttft_s + over_s  # the line's intercept: e2el(S) − S·t
    numbers = {
        "fixed_cost_ms": fixed_cost_s * 1000,
        "ttft_ms": ttft_s * 1000,
        "token_ms": token_s * 1000,
        "expected_ms": (ttft_s - token_s) * 1000,
        "over_ttft_ms": over_s * 1000,
        "over_ttft_min_ms": low_s * 1000,
        "over_ttft_max_ms": high_s * 1000,
    }
    message = (
        f"per-call fixed cost {numbers['fixed_cost_ms']:.1f} ms is {numbers['over_ttft_ms']:.1f} ms above the "
        f"calls' own TTFT {numbers['ttft_ms']:.1f} ms (from {numbers['over_ttft_min_ms']:.1f} to "
        f"{numbers['over_ttft_max_ms']:.1f} ms over the calls; a call that waits its TTFT and then one gap per token puts it "
        f"at TTFT − one token = {numbers['expected_ms']:.1f} ms). A start-up cost cannot exceed the time before "
        f"anything came back: the {short_tokens}-token calls spent time that neither their first token nor their "
        "tokens explain (queueing behind other work, a stalled or buffered stream, or client overhead at the end "
        "of the stream). It is not a start-up cost, and the differencing rate is suspect."
    )
    return PlausibilityFinding(flag=PlausibilityFlag.FIXED_COST_ABOVE_TTFT, numbers=numbers, message=message)


def _rates_finding(
    token_s: float,
    ratio: float,
    spread: tuple[float, float],
    allowed: tuple[float, float],
    short_tokens: int,
    long_tokens: int,
) -> PlausibilityFinding:
    """``spread``: the lowest and highest ratio the calls allow; ``allowed``: the range a sound stream gives."""
    (low, high), (allowed_low, allowed_high) = spread, allowed
    differencing = 1 / token_s
    stream = ratio * differencing
    numbers = {
        "differencing_tokens_per_s": differencing,
        "stream_tokens_per_s": stream,
        "ratio": ratio,
        "ratio_min": low,
        "ratio_max": high,
        "allowed_ratio_low": allowed_low,
        "allowed_ratio_high": allowed_high,
    }
    above = ratio > allowed_high
    gap = abs(ratio - 1) * 100
    why = (
        "the long calls' first token came late: tokens held back and sent together (TTFT then holds decode "
        "time and 1/TPOT is too high), or the long calls waited longer to start than the short ones, which "
        "the differencing rate counts as decode"
        if above
        else "the short calls took longer than their first token and tokens explain (queueing, a stall, "
        "client overhead: the differencing rate is then too high), or the long calls started sooner than "
        "the short ones"
    )
    message = (
        f"the streams' 1/TPOT {stream:.1f} tok/s is {gap:.0f}% {'above' if above else 'below'} the differencing "
        f"rate {differencing:.1f} tok/s (ratio {ratio:.3f}, from {low:.3f} to {high:.3f} over the calls); one decode speed gives "
        f"a ratio from {allowed_low:.3f} to {allowed_high:.3f} (for {short_tokens} and {long_tokens} tokens: only "
        f"the long calls' first {short_tokens - 1} gaps differ between the two, plus one token of slack). "
        f"One of them is not measuring decode: {why}."
    )
    return PlausibilityFinding(flag=PlausibilityFlag.DECODE_RATES_DISAGREE, numbers=numbers, message=message)


def finding_line(finding: PlausibilityFinding) -> str:
    """The finding as one line of text, its flag first: what every front end shows."""
    return f"{finding.flag.value}: {finding.message}"
