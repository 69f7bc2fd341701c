"""One burst of streams spread over worker processes, so the client is not the bottleneck.

Each shard is a process with its own event loop (uvloop when installed) and keep-alive
session. All shards open their connections first, wait on one start barrier, send their
share of the requests at once, and return their outcomes; the parent merges them in input
order. ``time.perf_counter`` is CLOCK_MONOTONIC on Linux, one clock for every process, so
merged times compare directly.

Each shard also runs a loop-lag probe: a timer due every ``probe_interval_s`` whose
lateness bounds how late a chunk's timestamp can be (a chunk that arrives while the loop
is busy is stamped when the loop gets to it). When the probe's median lateness in any shard
exceeds ``max_lag_s`` (the budget for median timing errors), over the run or while the first
tokens arrived (:func:`~gemmaserve.bench.engine.first_token_lags`), the client could not keep
time: :func:`run_sharded_batch` raises :class:`~gemmaserve.errors.ClientSaturated` instead of
returning inflated latencies.
Never prints; the CLI and the benchmark script render the result.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from gemmaserve.bench.engine import (
    FIRST_TOKENS_WINDOW,
    LAG_PROBE_INTERVAL_S,
    BatchDeps,
    BatchResult,
    LagProbe,
    LagVerdict,
    Outcome,
    first_token_lags,
    lag_figures,
    lag_over_budget,
    run_batch,
    run_in_loop,
    window_cpu_share,
)
from gemmaserve.bench.transports import ChatRequest, HttpTransport
from gemmaserve.errors import ClientSaturated, UsageError

DEFAULT_MAX_LAG_S = 0.005  # the timing budget: median TTFT/ITL errors under 5 ms
PROBE_INTERVAL_S = LAG_PROBE_INTERVAL_S
BARRIER_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class ShardStats:
    """One worker's view of itself while the burst ran."""

    shard: int
    requests: int
    chunks: int
    cpu_s: float  # process CPU time from the start barrier to its last reply
    wall_s: float
    lag_p50_s: float
    lag_p90_s: float
    lag_max_s: float
    first_token_lag_p50_s: float  # ticks due before the shard's last first token
    first_token_lag_p90_s: float
    first_token_cpu_share: float | None = None  # the CPU share over that window (window_cpu_share)

    @property
    def cpu_share(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def share_for(self, verdict: LagVerdict) -> float:
        """The CPU share over the window the verdict judged."""
        return judged_share(verdict, self.cpu_share, self.first_token_cpu_share)

    def lag_verdict(self, budget_s: float) -> LagVerdict | None:
        return lag_over_budget(
            (self.lag_p50_s, self.lag_p90_s), (self.first_token_lag_p50_s, self.first_token_lag_p90_s), budget_s
        )


@dataclass(frozen=True, slots=True)
class ShardedBatch:
    batch: BatchResult  # merged: outcomes in input order, cpu_s summed over the shards
    shards: tuple[ShardStats, ...]
    saturated: bool
    max_lag_s: float

    @property
    def worst_lag_p50_s(self) -> float:
        return max(shard.lag_p50_s for shard in self.shards)

    @property
    def worst_lag_p90_s(self) -> float:
        return max(shard.lag_p90_s for shard in self.shards)


class _ShardRun(NamedTuple):
    outcomes: list[Outcome]
    cpu_s: float
    wall_s: float
    ticks: list[tuple[float, float]]
    first_token_cpu_share: float | None


def judged_share(verdict: LagVerdict, run_share: float, first_token_share: float | None) -> float:
    """The CPU share over the window ``verdict`` judged: the first tokens' when known, else the run's."""
    if verdict.when == FIRST_TOKENS_WINDOW and first_token_share is not None:
        return first_token_share
    return run_share


def split_requests(requests: Sequence[tuple[str, ChatRequest]], shards: int) -> list[list[int]]:
    """Indexes of the requests each shard sends: round robin, so every shard gets the same mix."""
    return [list(range(shard, len(requests), shards)) for shard in range(shards)]


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """What one worker process does: send its requests to ``url`` over ``concurrency`` streams, each within
    ``timeout_s``, probing its event loop every ``probe_interval_s``; ``warm`` opens every connection first."""

    url: str
    concurrency: int
    timeout_s: float
    probe_interval_s: float
    warm: bool
    use_uvloop: bool


async def _shard(plan: ShardPlan, requests: list[tuple[str, ChatRequest]], ready: Any, go: Any) -> _ShardRun:
    concurrency, timeout_s, probe_interval_s = plan.concurrency, plan.timeout_s, plan.probe_interval_s
    transport = HttpTransport(plan.url, timeout_s=timeout_s)
    probe = LagProbe(probe_interval_s, time.process_time)
    deps = BatchDeps(clock=time.perf_counter)
    try:
        await transport.discover_model()
        if plan.warm:  # open every keep-alive connection before the clock matters
            warmup = [(f"warm-{i}", ChatRequest(f"warm up {os.getpid()} {i}", 1)) for i in range(concurrency)]
            await run_batch(transport, warmup, concurrency=concurrency, timeout_s=timeout_s, deps=deps)
        await asyncio.to_thread(ready.wait, BARRIER_TIMEOUT_S)  # every shard warm, the parent told
        await asyncio.to_thread(go.wait, BARRIER_TIMEOUT_S)  # released together
        probe_task = asyncio.create_task(probe.run())
        cpu_started, wall_started = time.process_time(), time.perf_counter()
        batch = await run_batch(
            transport, requests, concurrency=concurrency, timeout_s=timeout_s, deps=deps, probe_lag=False
        )
        cpu_s, wall_s = time.process_time() - cpu_started, time.perf_counter() - wall_started
        probe.running = False
        await probe_task
    finally:
        await transport.aclose()
    outcomes = list(batch.outcomes)
    share = window_cpu_share(probe.ticks, probe.tick_cpu_s, outcomes, started_s=wall_started, cpu_started_s=cpu_started)
    return _ShardRun(outcomes, cpu_s, wall_s, probe.ticks, share)


def _shard_main(
    index: int, plan: ShardPlan, requests: list[tuple[str, ChatRequest]], ready: Any, go: Any, results: Any
) -> None:
    try:
        outcomes, cpu_s, wall_s, ticks, window_share = run_in_loop(
            _shard(plan, requests, ready, go), use_uvloop=plan.use_uvloop
        )
    except BaseException as exc:  # report, never leave the others waiting at a barrier
        ready.abort()
        go.abort()
        results.put((index, None, f"{type(exc).__name__}: {exc}"))
        return
    stats = ShardStats(
        shard=index,
        requests=len(requests),
        chunks=sum(o.chunks for o in outcomes),
        cpu_s=cpu_s,
        wall_s=wall_s,
        **lag_figures(ticks, first_token_lags(ticks, outcomes)),
        first_token_cpu_share=window_share,
    )
    results.put((index, (outcomes, stats), None))


@dataclass(frozen=True, slots=True)
class ShardedRun:
    """How a sharded batch runs: ``processes`` workers, ``concurrency`` streams in all (None: every request
    at once), each request within ``timeout_s``; a worker whose loop lags past ``max_lag_s`` (median) makes
    the run saturated, which raises unless ``raise_on_saturation`` is off."""

    processes: int
    concurrency: int | None = None
    timeout_s: float = 600.0
    warm: bool = True
    max_lag_s: float = DEFAULT_MAX_LAG_S
    probe_interval_s: float = PROBE_INTERVAL_S
    use_uvloop: bool = True
    raise_on_saturation: bool = True


def run_sharded_batch(
    url: str,
    requests: Sequence[tuple[str, ChatRequest]],
    run: ShardedRun,
    before_start: Callable[[], None] | None = None,
) -> ShardedBatch:
    """Send the requests from ``run.processes`` workers, each a round-robin share of the streams; merge the
    outcomes in input order.

    ``before_start`` runs in the parent once every worker has warmed its connections and
    before any is released (a test clears its server's records there).

    Raises:
        UsageError: no request, or fewer than one process.
        ClientSaturated: a worker's loop lagged past ``max_lag_s`` (median), so its timestamps are not trusted.
        BenchError: a worker died.
    """
    processes, concurrency, timeout_s, max_lag_s = run.processes, run.concurrency, run.timeout_s, run.max_lag_s
    if processes < 1 or not requests or (concurrency is not None and concurrency < 1):
        raise UsageError("A sharded batch needs at least one process, one stream and one request.")
    streams = len(requests) if concurrency is None else min(concurrency, len(requests))
    processes = min(processes, streams)
    parts = split_requests(requests, processes)
    context = multiprocessing.get_context("spawn")  # no inherited event loop or session
    ready, go = context.Barrier(processes + 1), context.Barrier(processes + 1)
    results = context.Queue()
    workers = []
    for index, part in enumerate(parts):
        shard_requests = [requests[i] for i in part]
        shard_streams = streams // processes + (1 if index < streams % processes else 0)
        plan = ShardPlan(url, shard_streams, timeout_s, run.probe_interval_s, run.warm, run.use_uvloop)
        worker = context.Process(
            target=_shard_main, args=(index, plan, shard_requests, ready, go, results), daemon=True
        )
        worker.start()
        workers.append(worker)
    gathered: dict[int, tuple[list[Outcome], ShardStats]] = {}
    errors: list[str] = []
    try:
        try:
            ready.wait(BARRIER_TIMEOUT_S + timeout_s)
            if before_start is not None:
                try:
                    before_start()
                except BaseException:
                    go.abort()
                    raise
            go.wait(BARRIER_TIMEOUT_S)
        except threading.BrokenBarrierError:
            pass  # a worker failed before the start: its error is in the queue
        for _ in workers:
            index, payload, error = results.get(timeout=timeout_s + BARRIER_TIMEOUT_S)
            if payload is None:
                errors.append(f"shard {index}: {error}")
            else:
                gathered[index] = payload
    finally:
        for worker in workers:
            worker.join(10)
            if worker.is_alive():
                worker.kill()
                worker.join()
    if errors:
        from gemmaserve.errors import BenchError

        raise BenchError(
            "A client worker process failed: " + "; ".join(errors),
            hint="Check that the target answers: curl URL/v1/models",
        )
    merged: list[Outcome | None] = [None] * len(requests)
    for index, part in enumerate(parts):
        for position, outcome in zip(part, gathered[index][0], strict=True):
            merged[position] = outcome
    outcomes = tuple(outcome for outcome in merged if outcome is not None)
    shards = tuple(gathered[index][1] for index in range(len(parts)))
    batch = BatchResult(
        outcomes=outcomes,
        started_s=min(o.sent_s - (o.client_queue_s or 0.0) for o in outcomes),
        finished_s=max(o.finished_s for o in outcomes),
        cpu_s=sum(shard.cpu_s for shard in shards),
    )
    over = [(shard, verdict) for shard in shards if (verdict := shard.lag_verdict(max_lag_s)) is not None]
    result = ShardedBatch(batch=batch, shards=shards, saturated=bool(over), max_lag_s=max_lag_s)
    if over and run.raise_on_saturation:
        worst, verdict = max(over, key=lambda item: item[1].p50_s)
        lagged = LaggedRun(max_lag_s, worst.share_for(verdict), streams, len(shards))
        raise saturation_error(f"worker {worst.shard} of {len(shards)}", verdict, lagged, machine_load())
    return result


# At or above this share of a core while the judged window ran, the client's own work kept its loop
# late; below it, the loop mostly waited for a core the machine gave to other processes.
CPU_BOUND_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class MachineLoad:
    """The load average (1 minute) and the cores the client may run on; None where the platform does not say."""

    load_average: float | None = None
    cpu_count: int | None = None


@dataclass(frozen=True, slots=True)
class LaggedRun:
    """The run whose client lagged: its timing budget, the lagging process's CPU share over the judged window,
    the streams in all and the client processes that sent them."""

    max_lag_s: float
    cpu_share: float
    streams: int
    processes: int


def machine_load() -> MachineLoad:
    """The load average (1 minute) and the cores this process may run on, for the guard's message."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return MachineLoad(load, cores)


def saturation_error(
    where: str, lag: LagVerdict, run: LaggedRun, machine: MachineLoad = MachineLoad()
) -> ClientSaturated:
    """The error that stops a run whose client lagged past its timing budget.

    ``run.cpu_share``: the lagging process's CPU time over the wall time of the judged window (see
    :func:`~gemmaserve.bench.engine.window_cpu_share`). A loop that lags near a full core is doing too
    much itself: more processes help. One that lags while using little CPU was not given a core when
    it asked (other processes on the machine): more processes would only add to the competition, so
    the hint names what does help.
    """
    max_lag_s, cpu_share, streams, processes = run.max_lag_s, run.cpu_share, run.streams, run.processes
    load_average, cpu_count = machine.load_average, machine.cpu_count
    load_text = (
        f"load average {load_average:.1f} on {cpu_count} cores" if load_average is not None and cpu_count else ""
    )
    if cpu_share >= CPU_BOUND_SHARE:
        cause = "it was CPU-bound: its own work kept the loop late"
        hint = (
            "Spread the streams over more client processes (--client-processes, one per free core), send fewer "
            "streams, or use a larger client machine; --max-client-lag-ms widens the budget."
        )
    else:
        cause = "the machine did not give it the CPU it needed: the loop waited for a core" + (
            f" ({load_text})" if load_text else " that other processes held"
        )
        hint = (
            "The client itself is not the limit (extra client processes would only compete for the same cores). "
            "Run it on a quieter "
            "machine, or give it a core of its own away from the server and other work "
            "(taskset -c 1 gemmaserve bench measure …), or widen the budget (--max-client-lag-ms)."
        )
    return ClientSaturated(
        f"The client could not keep time: {where} ran {streams} streams in all, at {cpu_share:.0%} of a core, "
        f"and its event loop lagged {lag.p50_s * 1000:.1f} ms {lag.when} (median; p90 {lag.p90_s * 1000:.1f} ms) "
        f"against a budget of {max_lag_s * 1000:.1f} ms ({cause}), so its TTFT/ITL would read high; "
        "they are not reported.",
        hint=hint,
        lag_p50_s=lag.p50_s,
        lag_p90_s=lag.p90_s,
        max_lag_s=max_lag_s,
        cpu_share=cpu_share,
        processes=processes,
        streams=streams,
        load_average=load_average,
        cpu_count=cpu_count,
    )
