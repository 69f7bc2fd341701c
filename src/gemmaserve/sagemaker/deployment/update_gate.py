"""The update's quality and speed gate: a pure verdict on A-B-A measurements of the old and the new variant.

The measurements are the bench's own (:mod:`gemmaserve.measurements.stats`): each variant's decode rate by
differencing a short and a long reply (``decode_rate``: the slope between the median walls of the two
lengths), measured old → new → old so a drift of the old variant between the two passes shows; and the
question set's answers of old and new paired by question, judged with McNemar's exact test and the
smallest gap that test can detect with this many pairs (``minimum_detectable_difference``, from the
discordant share observed).

The verdict is ``pass`` only when everything was measured and nothing regressed: too few answers or
timings, a failed request, a rate that cannot be computed or a drifting old variant is ``unknown``, and
an unknown never lets the update through.
"""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import BaseModel

from gemmaserve.measurements import stats

ALPHA = 0.05  # as the bench's comparison (bench/combine.py ALPHA, POWER)
POWER = 0.8
MIN_TIMINGS = 3  # per length and pass: a median of fewer is one call's noise


class Verdict(StrEnum):
    PASS = "pass"
    WORSE_ANSWERS = "worse-answers"
    SLOWER = "slower"
    UNKNOWN = "unknown"  # not measured well enough to say: never a pass


class DecodeSample(BaseModel):
    """One pass over one variant: wall seconds of the short and of the long replies."""

    short_s: list[float]
    long_s: list[float]


class GateInput(BaseModel):
    """Everything the gate judges. ``old_first``/``old_again`` are the A of A-B-A, ``new`` the B."""

    old_first: DecodeSample
    new: DecodeSample
    old_again: DecodeSample
    short_tokens: int
    long_tokens: int
    old_correct: list[bool | None]  # per question, None: the request failed or gave no answer
    new_correct: list[bool | None]
    max_slowdown: float  # 0.10: the new variant may decode at most 10% slower than the old
    max_drift: float = 0.10  # the old variant's two passes may differ by at most this much


class GateDecision(BaseModel):
    verdict: Verdict
    reasons: list[str]
    old_rate_tokens_per_s: float | None = None
    new_rate_tokens_per_s: float | None = None
    slowdown: float | None = None  # 1 - new / old; positive: the new variant is slower
    old_right: int | None = None
    new_right: int | None = None
    paired: int = 0
    p_value: float | None = None
    detectable_gap_points: float | None = None

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS


def _rate(sample: DecodeSample, short_tokens: int, long_tokens: int, label: str) -> tuple[float | None, str | None]:
    values = [*sample.short_s, *sample.long_s]
    if len(sample.short_s) < MIN_TIMINGS or len(sample.long_s) < MIN_TIMINGS:
        return None, (
            f"{label}: {len(sample.short_s)} short and {len(sample.long_s)} long timings, "
            f"fewer than {MIN_TIMINGS} each: no decode rate"
        )
    if any(not math.isfinite(v) or v < 0 for v in values):
        return None, f"{label}: a timing is not a finite non-negative number: no decode rate"
    try:
        line = stats.decode_rate(sample.short_s, sample.long_s, short_tokens=short_tokens, long_tokens=long_tokens)
    except ValueError as error:
        return None, f"{label}: {error}"
    return line.rate_tokens_per_s, None


def decide(gate: GateInput) -> GateDecision:
    """Pass, worse answers, slower or unknown, with the numbers behind it (pure)."""
    unknown: list[str] = []
    regressions: list[tuple[Verdict, str]] = []
    decision = GateDecision(verdict=Verdict.UNKNOWN, reasons=[])

    rates = {}
    for label, sample in (("old", gate.old_first), ("new", gate.new), ("old again", gate.old_again)):
        rate, why = _rate(sample, gate.short_tokens, gate.long_tokens, label)
        if why:
            unknown.append(why)
        rates[label] = rate
    first, new, again = rates["old"], rates["new"], rates["old again"]
    if first is not None and again is not None:
        drift = abs(again - first) / first
        if drift > gate.max_drift:
            unknown.append(
                f"the old variant decoded {first:.1f} then {again:.1f} tokens/s (drift {drift:.0%} > "
                f"{gate.max_drift:.0%}): the two variants cannot be compared"
            )
        old_rate = (first + again) / 2
        decision.old_rate_tokens_per_s = old_rate
        if new is not None:
            decision.new_rate_tokens_per_s = new
            decision.slowdown = 1 - new / old_rate
            if decision.slowdown > gate.max_slowdown:
                regressions.append(
                    (
                        Verdict.SLOWER,
                        f"the new variant decodes {new:.1f} tokens/s vs the old {old_rate:.1f} "
                        f"({decision.slowdown:.0%} slower; at most {gate.max_slowdown:.0%} allowed)",
                    )
                )

    if len(gate.old_correct) != len(gate.new_correct):
        unknown.append(f"{len(gate.old_correct)} old vs {len(gate.new_correct)} new answers: not paired")
    else:
        failed = sum(1 for a, b in zip(gate.old_correct, gate.new_correct, strict=True) if a is None or b is None)
        pairs = [
            (a, b) for a, b in zip(gate.old_correct, gate.new_correct, strict=True) if a is not None and b is not None
        ]
        if failed:
            unknown.append(f"{failed} question(s) got no answer from one variant")
        decision.paired = len(pairs)
        if not pairs:
            unknown.append("no paired answers: answer quality not measured")
        else:
            test = stats.mcnemar_exact([a for a, _ in pairs], [b for _, b in pairs])
            share = (test.a_only + test.b_only) / len(pairs)
            gap = stats.minimum_detectable_difference(len(pairs), discordant_share=share, alpha=ALPHA, power=POWER)
            decision.old_right, decision.new_right = test.both + test.a_only, test.both + test.b_only
            decision.p_value = test.p_value
            decision.detectable_gap_points = gap * 100 if gap is not None else None
            drop = (decision.old_right - decision.new_right) / len(pairs)
            if gap is None:
                unknown.append(f"{len(pairs)} paired answers cannot detect any gap: answer quality not measured")
            elif test.p_value < ALPHA and drop > 0:
                regressions.append(
                    (
                        Verdict.WORSE_ANSWERS,
                        f"the new variant answers {decision.new_right}/{len(pairs)} vs the old "
                        f"{decision.old_right}/{len(pairs)} (McNemar exact p = {test.p_value:.3g}; "
                        f"this set detects a gap of {gap * 100:.1f} points)",
                    )
                )
            elif drop >= gap:
                regressions.append(
                    (
                        Verdict.WORSE_ANSWERS,
                        f"the new variant answers {decision.new_right}/{len(pairs)} vs the old "
                        f"{decision.old_right}/{len(pairs)}: {drop * 100:.1f} points lower, beyond the "
                        f"detectable gap of {gap * 100:.1f}",
                    )
                )

    if regressions:  # a measured regression outranks what else could not be measured
        decision.verdict = regressions[0][0]
        decision.reasons = [why for _, why in regressions] + unknown
    elif unknown:
        decision.verdict = Verdict.UNKNOWN
        decision.reasons = unknown
    else:
        decision.verdict = Verdict.PASS
        decision.reasons = [
            f"decode {decision.new_rate_tokens_per_s:.1f} vs {decision.old_rate_tokens_per_s:.1f} tokens/s, "
            f"answers {decision.new_right}/{decision.paired} vs {decision.old_right}/{decision.paired}"
        ]
    return decision
