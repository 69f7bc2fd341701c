"""What the lag guard says when it stops a run: which side lagged (the machine or the client) and what helps.

Measurements are injected: a verdict, the client's CPU share while the judged window ran, the load average.
"""

from __future__ import annotations

import pytest

from gemmaserve.bench.engine import LagVerdict, Outcome, window_cpu_share
from gemmaserve.bench.metrics import compute_request_metrics
from gemmaserve.bench.shards import LaggedRun, MachineLoad, saturation_error
from gemmaserve.bench.transports import ChatRequest, Chunk

FIRST_TOKENS = "while the first tokens arrived"


def test_a_starved_one_stream_step_blames_the_machine_and_never_asks_for_more_processes() -> None:
    """As reported from an idle-looking 2-core machine: decode, one stream, 6% of a core, 10.4 ms late."""
    error = saturation_error(
        "t decode #4, one process",
        LagVerdict(0.0104, 0.0104, FIRST_TOKENS),
        LaggedRun(0.005, 0.06, 1, 1),
        MachineLoad(2.4, 2),
    )
    assert "the machine did not give it the CPU" in error.message
    assert "load average 2.4 on 2 cores" in error.message
    hint = error.hint or ""
    assert "--client-processes" not in hint and "more client processes" not in hint
    assert "quieter machine" in hint and "taskset" in hint and "--max-client-lag-ms" in hint
    assert error.fields["cpu_share"] == 0.06 and error.fields["load_average"] == 2.4


@pytest.mark.parametrize("share", [0.02, 0.07, 0.3, 0.49])
def test_a_client_that_used_little_cpu_is_never_told_to_shard(share: float) -> None:
    error = saturation_error("w", LagVerdict(0.02, 0.03, "over the run"), LaggedRun(0.005, share, 512, 2))
    assert "--client-processes" not in (error.hint or "") and "CPU-bound" not in error.message


def test_a_busy_client_is_told_to_spread_its_streams() -> None:
    error = saturation_error(
        "worker 0 of 4", LagVerdict(0.178, 0.2, FIRST_TOKENS), LaggedRun(0.005, 0.98, 2048, 4), MachineLoad(3.9, 16)
    )
    assert "CPU-bound" in error.message
    assert "--client-processes" in (error.hint or "") and "taskset" not in (error.hint or "")


def _outcome(sent_s: float, ttft_s: float) -> Outcome:
    metrics = compute_request_metrics(
        sent_s, [Chunk(sent_s + ttft_s, "a", token=True), Chunk(sent_s + ttft_s + 0.02, done=True)]
    )
    return Outcome("r", ChatRequest("x", 1), sent_s, sent_s + ttft_s + 0.02, metrics)


def test_the_cpu_share_is_the_judged_windows_not_the_runs() -> None:
    """512 streams on a core of their own: the process is busy through the burst of first tokens
    (100 ms, here every tick 4 ms of CPU per 5 ms) and nearly idle through the decode that follows,
    so over the run it used 45% of a core. Judged over the run it read as starved by the machine."""
    ticks, cpu = [], []
    cpu_s = 0.0
    for index in range(1, 601):
        due = 0.005 * index
        cpu_s += 0.004 if due <= 0.1 else 0.0021
        ticks.append((due, 0.0))
        cpu.append(cpu_s)
    outcomes = [_outcome(0.0, 0.03 + 0.0699 * i / 511) for i in range(512)]  # first tokens 30-100 ms
    share = window_cpu_share(ticks, cpu, outcomes, started_s=0.0, cpu_started_s=0.0)
    assert share == pytest.approx(0.8)
    assert cpu[-1] / ticks[-1][0] < 0.5  # what the whole run's share said
    assert window_cpu_share([], [], outcomes, started_s=0.0, cpu_started_s=0.0) is None
