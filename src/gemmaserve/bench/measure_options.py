"""Turn the user's measure options into ``ClientSettings`` and per-target options (pure).

Both front ends (``gemmaserve bench measure`` and the MCP ``bench_measure`` tool) call
``build_measure_inputs`` so the same flags give the same run; neither builds settings itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from gemmaserve.bench.measure_models import TargetOptions
from gemmaserve.bench.questions import get_question_set
from gemmaserve.bench.schema import ClientSettings
from gemmaserve.errors import UsageError

T = TypeVar("T")


def per_target(values: Sequence[T] | None, count: int, name: str) -> list[T | None]:
    """At most one value per target, in target order; missing ones are None."""
    given: list[T | None] = list(values or [])
    if len(given) > count:
        raise UsageError(
            f"{name} was given {len(given)} values for {count} target(s).",
            hint=f"Give {name} once per target, in target order.",
        )
    return given + [None] * (count - len(given))


def build_measure_inputs(
    targets: Sequence[str],
    *,
    decode_short: int,
    decode_long: int,
    decode_calls: int,
    concurrency: Sequence[int],
    repeats: int,
    input_tokens: int,
    output_tokens: int,
    quality_set: str,
    quality_max_tokens: int,
    temperature: float,
    ignore_eos: bool,
    timeout_s: float,
    seed: int,
    warmup: int,
    quality_concurrency: int,
    requests_per_stream: int,
    client_processes: int = 1,
    max_client_lag_ms: float | None = 5.0,
    labels: Sequence[str] | None = None,
    logs: Sequence[str] | None = None,
    instances: Sequence[str] | None = None,
    gpus: Sequence[str] | None = None,
    prices_usd_per_hour: Sequence[float] | None = None,
    option_names: dict[str, str] | None = None,
) -> tuple[ClientSettings, list[TargetOptions]]:
    """Validate the options and build what ``measure_targets`` takes.

    ``option_names`` renames the per-target options in error messages (the CLI says
    ``--label``, the MCP tool ``labels``).

    Raises:
        UsageError: a bad concurrency level, an unknown question set, or more per-target
            values than targets.
    """
    from gemmaserve.bench.measure import hardware_info

    if not concurrency or any(level < 1 for level in concurrency):
        raise UsageError(f"concurrency {list(concurrency)}: each level must be an integer >= 1.")
    names = {
        "labels": "labels",
        "logs": "logs",
        "instances": "instances",
        "gpus": "gpus",
        "prices_usd_per_hour": "prices_usd_per_hour",
        **(option_names or {}),
    }
    quality = None if quality_set.lower() == "none" else get_question_set(quality_set).name
    settings = ClientSettings(
        decode_short_tokens=decode_short,
        decode_long_tokens=decode_long,
        decode_calls=decode_calls,
        concurrency_levels=list(concurrency),
        load_repeats=repeats,
        load_input_tokens=input_tokens,
        load_output_tokens=output_tokens,
        quality_set=quality,
        quality_max_tokens=quality_max_tokens,
        temperature=temperature,
        ignore_eos=ignore_eos,
        timeout_s=timeout_s,
        seed=seed,
        client_processes=client_processes,
        max_client_lag_s=max_client_lag_ms / 1000 if max_client_lag_ms else None,
        extra={
            "warmup_calls": warmup,
            "quality_concurrency": quality_concurrency,
            "load_requests_per_stream": requests_per_stream,
        },
    )
    count = len(targets)
    options = [
        TargetOptions(
            label=label, log_path=log, hardware=hardware_info(instance=instance, gpu=gpu, price_usd_per_hour=price)
        )
        for label, log, instance, gpu, price in zip(
            per_target(labels, count, names["labels"]),
            per_target(logs, count, names["logs"]),
            per_target(instances, count, names["instances"]),
            per_target(gpus, count, names["gpus"]),
            per_target(prices_usd_per_hour, count, names["prices_usd_per_hour"]),
            strict=True,
        )
    ]
    return settings, options
