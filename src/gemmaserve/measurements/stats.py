"""Statistics of benchmark results: pure functions, no I/O, deterministic.

Methods, stated once: percentiles interpolate linearly between order statistics
(numpy ``linear``, as vLLM); bootstrap intervals are percentile intervals over
seeded resamples (order statistics, numpy ``inverted_cdf``); the paired quality
test is McNemar's exact test (two-sided binomial on the discordant pairs); the
minimum detectable difference is the smallest accuracy gap that test finds with
the stated power, computed exactly (no normal approximation).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, WithJsonSchema, field_serializer, field_validator

from gemmaserve.measurements.schema import Percentiles

DEFAULT_RESAMPLES = 4000
DEFAULT_SEED = 20261202


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """How an interval is bootstrapped: its confidence, how many resamples, and the seed that makes it repeat."""

    confidence: float = 0.95
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED


class Interval(BaseModel):
    """A confidence interval. ``high`` is +inf when unbounded (a decode-rate resample whose line was
    flat): JSON has no infinity, so it is written as null there, and the schema says so."""

    low: float
    high: Annotated[float, WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "null"}]})]
    confidence: float = 0.95

    @field_serializer("high", when_used="json")
    def _high_in_json(self, value: float) -> float | None:
        return value if math.isfinite(value) else None

    @field_validator("high", mode="before")
    @classmethod
    def _high_from_json(cls, value: Any) -> Any:
        """Read back what ``_high_in_json`` wrote: null stood for +inf."""
        return math.inf if value is None else value

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


class DecodeRate(BaseModel):
    """The published differencing method: a line through (short, median t_short) and (long, median t_long)."""

    rate_tokens_per_s: float
    intercept_s: float
    short_median_s: float
    long_median_s: float


class McNemarResult(BaseModel):
    """Paired correctness of the same questions. ``a_only``: A right, B wrong."""

    both: int
    a_only: int
    b_only: int
    neither: int
    p_value: float


class Drift(BaseModel):
    """The same target measured twice (A-B-A): second / first, with a bootstrap interval."""

    ratio: float
    interval: Interval
    significant: bool  # the interval excludes 1.0


def _array(values: Sequence[float], what: str) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError(f"{what}: no values")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what}: values must be finite")
    return array


def median(values: Sequence[float]) -> float:
    return float(np.median(_array(values, "median")))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in 0..100, got {q}")
    return float(np.percentile(_array(values, "percentile"), q, method="linear"))


def summarize(values: Sequence[float]) -> Percentiles:
    """Mean, p50, p90, p99 of a latency metric; an empty input gives n=0 and no figures."""
    if len(values) == 0:
        return Percentiles(n=0)
    array = _array(values, "summarize")
    p50, p90, p99 = np.percentile(array, [50, 90, 99], method="linear")
    return Percentiles(n=int(array.size), mean=float(array.mean()), p50=float(p50), p90=float(p90), p99=float(p99))


# Two chunks that landed in the same network read are timestamped together: a gap this small is the read,
# not the server. (The client's clock resolves far below it.)
SAME_READ_S = 1e-6


def summarize_stream_gaps(values: Sequence[float]) -> Percentiles:
    """:func:`summarize` for ITL or TPOT, unless most gaps are zero: then several tokens arrived per network
    read, the client cannot see how far apart the server wrote them, and no figure is given, only why."""
    if len(values) == 0:
        return Percentiles(n=0)
    same_read = sum(1 for value in values if value <= SAME_READ_S)
    if same_read * 2 < len(values):
        return summarize(values)
    reads = len(values) - same_read
    per_read = len(values) / reads if reads else float(len(values))
    return Percentiles(n=len(values), not_measurable=f"not measurable: about {per_read:.0f} tokens per read")


def _quantiles(samples: NDArray[np.float64], confidence: float) -> Interval:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = (1 - confidence) / 2
    # Order statistics, not interpolation: resampled rates may be +inf (a flat line).
    low, high = np.quantile(samples, [tail, 1 - tail], method="inverted_cdf")
    return Interval(low=float(low), high=float(high), confidence=confidence)


def _resample(rng: np.random.Generator, array: NDArray[np.float64], resamples: int) -> NDArray[np.float64]:
    picks = rng.integers(0, array.size, size=(resamples, array.size))
    return array[picks]


def bootstrap_ci(
    values: Sequence[float],
    *,
    statistic: Callable[[NDArray[np.float64]], NDArray[np.float64]] | None = None,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Percentile bootstrap of a statistic over repeats (default: the median).

    ``statistic`` maps a (resamples, n) array to (resamples,). A single value
    gives a zero-width interval: one repeat carries no spread information.
    """
    array = _array(values, "bootstrap_ci")
    stat = statistic or (lambda rows: np.median(rows, axis=1))
    rng = np.random.default_rng(seed)
    return _quantiles(stat(_resample(rng, array, resamples)), confidence)


def bootstrap_ratio_ci(
    a_values: Sequence[float],
    b_values: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Interval for median(B) / median(A), resampling each side's repeats independently."""
    a = _array(a_values, "bootstrap_ratio_ci A")
    b = _array(b_values, "bootstrap_ratio_ci B")
    rng = np.random.default_rng(seed)
    a_medians = np.median(_resample(rng, a, resamples), axis=1)
    b_medians = np.median(_resample(rng, b, resamples), axis=1)
    if np.any(a_medians <= 0):
        raise ValueError("bootstrap_ratio_ci: A must be positive")
    return _quantiles(b_medians / a_medians, confidence)


def decode_rate(
    short_s: Sequence[float], long_s: Sequence[float], *, short_tokens: int = 16, long_tokens: int = 512
) -> DecodeRate:
    """rate = (long − short tokens) / (median t_long − median t_short); intercept = t_short − short / rate.

    Raises:
        ValueError: when the long calls are not slower than the short ones (no rate exists).
    """
    if long_tokens <= short_tokens:
        raise ValueError(f"long_tokens ({long_tokens}) must exceed short_tokens ({short_tokens})")
    short_median = median(short_s)
    long_median = median(long_s)
    if long_median <= short_median:
        raise ValueError(
            f"median wall at {long_tokens} tokens ({long_median:.4f} s) is not above "
            f"the one at {short_tokens} ({short_median:.4f} s): no decode rate"
        )
    rate = (long_tokens - short_tokens) / (long_median - short_median)
    return DecodeRate(
        rate_tokens_per_s=rate,
        intercept_s=short_median - short_tokens / rate,
        short_median_s=short_median,
        long_median_s=long_median,
    )


def _resampled_rates(
    rng: np.random.Generator,
    short_s: Sequence[float],
    long_s: Sequence[float],
    short_tokens: int,
    long_tokens: int,
    resamples: int,
) -> NDArray[np.float64]:
    short = np.median(_resample(rng, _array(short_s, "short"), resamples), axis=1)
    long = np.median(_resample(rng, _array(long_s, "long"), resamples), axis=1)
    gap = long - short
    with np.errstate(divide="ignore"):
        rates = np.where(gap > 0, (long_tokens - short_tokens) / np.where(gap > 0, gap, 1.0), np.inf)
    return rates


def decode_rate_ci(
    short_s: Sequence[float],
    long_s: Sequence[float],
    *,
    short_tokens: int = 16,
    long_tokens: int = 512,
    bootstrap: Bootstrap = Bootstrap(),
) -> Interval:
    """Bootstrap interval of the differencing rate (short and long calls resampled independently)."""
    rng = np.random.default_rng(bootstrap.seed)
    rates = _resampled_rates(rng, short_s, long_s, short_tokens, long_tokens, bootstrap.resamples)
    return _quantiles(rates, bootstrap.confidence)


def decode_rate_ratio_ci(
    a: tuple[Sequence[float], Sequence[float]],
    b: tuple[Sequence[float], Sequence[float]],
    *,
    short_tokens: int = 16,
    long_tokens: int = 512,
    bootstrap: Bootstrap = Bootstrap(),
) -> Interval:
    """Interval for rate(B) / rate(A); each argument is (short walls, long walls)."""
    rng = np.random.default_rng(bootstrap.seed)
    rate_a = _resampled_rates(rng, a[0], a[1], short_tokens, long_tokens, bootstrap.resamples)
    rate_b = _resampled_rates(rng, b[0], b[1], short_tokens, long_tokens, bootstrap.resamples)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = rate_b / rate_a
    ratios = ratios[~np.isnan(ratios)]  # inf / inf: both lines flat in that resample, no ratio
    if ratios.size == 0:
        raise ValueError("decode_rate_ratio_ci: no resample gave two finite rates")
    return _quantiles(ratios, bootstrap.confidence)


def binomial_two_sided_p(successes: int, trials: int) -> float:
    """Exact two-sided p of ``successes`` in ``trials`` fair coin flips (doubling the smaller tail)."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    if trials == 0:
        return 1.0
    tail = min(successes, trials - successes)
    count = sum(math.comb(trials, k) for k in range(tail + 1))
    return float(min(Fraction(1), Fraction(2 * count, 2**trials)))


def mcnemar_exact(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> McNemarResult:
    """McNemar's exact test on paired correctness (same questions, same order)."""
    if len(a_correct) != len(b_correct):
        raise ValueError(f"paired test needs equal lengths, got {len(a_correct)} and {len(b_correct)}")
    pairs = list(zip(a_correct, b_correct, strict=True))
    a_only = sum(1 for a, b in pairs if a and not b)
    b_only = sum(1 for a, b in pairs if b and not a)
    return McNemarResult(
        both=sum(1 for a, b in pairs if a and b),
        a_only=a_only,
        b_only=b_only,
        neither=sum(1 for a, b in pairs if not a and not b),
        p_value=binomial_two_sided_p(a_only, a_only + b_only),
    )


@functools.lru_cache(maxsize=8)
def _log_factorials(n: int) -> NDArray[np.float64]:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _binomial_pmf(n: int, p: float, log_factorials: NDArray[np.float64]) -> NDArray[np.float64]:
    k = np.arange(n + 1)
    if p <= 0 or p >= 1:
        return np.asarray(k == (n if p >= 1 else 0), dtype=np.float64)
    log_comb = log_factorials[n] - log_factorials[k] - log_factorials[n - k]
    return np.asarray(np.exp(log_comb + k * math.log(p) + (n - k) * math.log1p(-p)), dtype=np.float64)


@functools.lru_cache(maxsize=32)
def _critical_tails(max_discordant: int, alpha: float) -> tuple[int, ...]:
    """For each discordant count d, the largest k with exact p(min(b, c) = k) < alpha, or -1 if none."""
    limit = Fraction(alpha)
    tails = []
    for d in range(max_discordant + 1):
        # p = 2 * count / 2**d < alpha  <=>  2 * count * den < num * 2**d, in exact integers.
        bound = limit.numerator * 2**d
        k = -1
        count = 0
        term = 1  # C(d, candidate), by the multiplicative recurrence
        for candidate in range(d // 2 + 1):
            count += term
            if 2 * count * limit.denominator >= bound:
                break
            k = candidate
            term = term * (d - candidate) // (candidate + 1)
        tails.append(k)
    return tuple(tails)


def mcnemar_power(n: int, difference: float, discordant_share: float, *, alpha: float = 0.05) -> float:
    """Probability that McNemar's exact test at ``alpha`` detects an accuracy gap ``difference``.

    ``discordant_share`` is the expected fraction of questions where exactly one
    side is right; it must be at least ``difference``.
    """
    if not 0 <= difference <= discordant_share <= 1:
        raise ValueError("need 0 <= difference <= discordant_share <= 1")
    if n <= 0 or discordant_share == 0:
        return 0.0
    tails = _critical_tails(n, alpha)
    log_factorials = _log_factorials(n)
    # Discordant count D ~ Bin(n, share); given D, each discordant pair favours the better side with q.
    pmf_d = _binomial_pmf(n, discordant_share, log_factorials)
    q = (discordant_share + difference) / (2 * discordant_share)
    power = 0.0
    for d in range(n + 1):
        k = tails[d]
        if k < 0 or pmf_d[d] < 1e-15:
            continue
        pmf_c = _binomial_pmf(d, q, log_factorials)
        # Reject when min(b, c) <= k: c <= k or c >= d - k (disjoint, since 2k < d).
        power += float(pmf_d[d]) * float(pmf_c[: k + 1].sum() + pmf_c[d - k :].sum())
    return min(power, 1.0)


def minimum_detectable_difference(
    n: int, *, discordant_share: float = 0.0, alpha: float = 0.05, power: float = 0.8, step: float = 0.0025
) -> float | None:
    """The smallest accuracy gap (a fraction, 0..1) this many paired questions detect with ``power``.

    For each candidate gap the discordant share is max(``discordant_share``, gap):
    pass the share observed between the two targets; 0 gives the best case (all
    disagreements one way), a lower bound. ``None`` when even a gap of 100% is
    not detectable (too few questions).
    """
    if n <= 0:
        return None
    steps = round(1 / step)
    low, high = 1, steps
    if mcnemar_power(n, 1.0, 1.0, alpha=alpha) < power:
        return None
    # Power rises with the gap at a fixed floor share; bisect over the grid.
    while low < high:
        mid = (low + high) // 2
        gap = mid * step
        if mcnemar_power(n, gap, max(discordant_share, gap), alpha=alpha) >= power:
            high = mid
        else:
            low = mid + 1
    return low * step


def intercept_flag(intercept_s: float) -> Literal["negative"] | None:
    """Why the decode line's intercept cannot be read as a per-call fixed cost, or None.

    A call cannot cost less than nothing: a negative intercept means the short and long
    calls do not lie on one line through a non-negative fixed cost (the end of a request
    was mistimed, or the server changed speed between the two lengths).
    """
    return "negative" if intercept_s < 0 else None


def wilson_interval(correct: int, total: int, *, confidence: float = 0.95) -> Interval:
    """Wilson score interval of one accuracy; it always contains correct / total.

    Each bound is computed from counts, and the upper one by symmetry (the upper bound for
    k of n is 1 − the lower bound for n − k of n), so 0 of n gives exactly 0 and n of n
    exactly 1: the centre ± half-width form leaves 1 − 1e-16 there, an error bar of −1e-14.
    """
    if total <= 0 or not 0 <= correct <= total:
        raise ValueError(f"need 0 <= correct <= total and total > 0, got {correct}/{total}")
    z = _normal_quantile(1 - (1 - confidence) / 2)
    return Interval(
        low=_wilson_low(correct, total, z), high=1.0 - _wilson_low(total - correct, total, z), confidence=confidence
    )


def _wilson_low(correct: int, total: int, z: float) -> float:
    if correct == 0:
        return 0.0
    z2 = z * z
    low = (correct + z2 / 2 - z * math.sqrt(correct * (total - correct) / total + z2 / 4)) / (total + z2)
    return min(max(0.0, low), correct / total)


def _normal_quantile(p: float) -> float:
    # Bisection on erf: exact enough (1e-12) and dependency-free.
    low, high = -10.0, 10.0
    for _ in range(200):
        mid = (low + high) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def drift(
    first: Sequence[float],
    second: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Drift:
    """Drift between two runs of one target: median(second) / median(first) and its interval."""
    interval = bootstrap_ratio_ci(first, second, confidence=confidence, resamples=resamples, seed=seed)
    ratio = median(second) / median(first)
    return Drift(ratio=ratio, interval=interval, significant=not interval.contains(1.0))
