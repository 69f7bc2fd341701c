"""Builders of synthetic but realistic result files, shared by the analysis tests.

Latencies follow a line (intercept + tokens / rate) with seeded jitter, so a
test knows the true rate it should recover.
"""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gemmaserve.measurements import schema as s


def build_result(
    *,
    label: str = "t4-bf16",
    url: str = "http://127.0.0.1:8000",
    rate_tokens_per_s: float = 50.0,
    intercept_s: float = 0.08,
    load_tok_s: dict[int, list[float]] | None = None,
    correct: list[bool] | None = None,
    answers: list[str] | None = None,
    price_usd_per_hour: float | None = 0.736,
    gpu: str | None = "t4",
    instance: str | None = "ml.g4dn.xlarge",
    weights_gib: float | None = 9.5,
    kv_cache_tokens: int | None = 400_000,
    seed: int = 1,
    started_at: datetime | None = None,
    quality_set: str = "published-40",
) -> s.ResultFile:
    rng = random.Random(seed)
    start = started_at or datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    short = [intercept_s + 16 / rate_tokens_per_s + rng.uniform(-0.002, 0.002) for _ in range(5)]
    long = [intercept_s + 512 / rate_tokens_per_s + rng.uniform(-0.002, 0.002) for _ in range(5)]
    load_tok_s = load_tok_s if load_tok_s is not None else {1: [48.0, 49.0, 50.0], 4: [180.0, 185.0, 190.0]}
    levels = []
    requests = []
    for level, tok_s in load_tok_s.items():
        for repeat in range(len(tok_s)):
            for index in range(level):
                ttft = 0.05 + 0.01 * index
                requests.append(
                    s.RequestRecord(
                        request_id=f"load-{level}-{repeat}-{index}",
                        kind=s.RequestKind.LOAD,
                        concurrency=level,
                        repeat=repeat,
                        prompt_tokens=128,
                        requested_output_tokens=256,
                        output_tokens=256,
                        success=True,
                        ttft_s=ttft,
                        itl_s=[1 / rate_tokens_per_s] * 255,
                        e2el_s=ttft + 255 / rate_tokens_per_s,
                        tpot_s=1 / rate_tokens_per_s,
                        start_offset_s=10.0 * repeat,
                    )
                )
        levels.append(
            s.LoadLevel(
                concurrency=level,
                repeats=len(tok_s),
                requests_per_repeat=level,
                input_tokens=128,
                output_tokens=256,
                output_tokens_per_s=tok_s,
                ttft_s=s.Percentiles(n=level * len(tok_s), mean=0.06, p50=0.06, p90=0.08, p99=0.09),
                e2el_s=s.Percentiles(n=level * len(tok_s), mean=5.2, p50=5.2, p90=5.3, p99=5.4),
                tpot_s=s.Percentiles(n=level * len(tok_s), mean=0.02, p50=0.02, p90=0.021, p99=0.022),
                itl_s=s.Percentiles(n=255 * level * len(tok_s), mean=0.02, p50=0.02, p90=0.021, p99=0.03),
            )
        )
    quality = None
    if correct is not None:
        texts = answers or [("42" if ok else "41") for ok in correct]
        quality = s.QualitySection(
            set_name=quality_set,
            max_tokens=2048,
            answers=[
                s.QualityAnswer(
                    question_id=f"q{i:02d}",
                    kind="product",
                    prompt=f"question {i}",
                    expected="42",
                    answer_text=f"Answer: {text}",
                    extracted=text,
                    correct=ok,
                )
                for i, (ok, text) in enumerate(zip(correct, texts, strict=True))
            ],
            correct=sum(correct),
            total=len(correct),
        )
    phases = ["decode", *(f"load:{c}" for c in load_tok_s), *(["quality"] if quality else [])]
    facts = None
    if weights_gib is not None or kv_cache_tokens is not None:
        facts = s.EngineFactsRecord(source="log", weights_gib=weights_gib, kv_cache_tokens=kv_cache_tokens)
    return s.ResultFile(
        target=s.TargetInfo(url=url, kind=s.TargetKind.HTTP, label=label, model="google/gemma-4-E2B-it"),
        hardware=s.HardwareInfo(
            gpu=gpu,
            gpu_count=1,
            instance=instance,
            price_usd_per_hour=price_usd_per_hour,
            price_date="2026-11-01" if price_usd_per_hour else None,
            price_source="catalog" if price_usd_per_hour else None,
        ),
        run=s.RunInfo(
            gemmaserve_version="0.1.0",
            started_at=start,
            finished_at=start + timedelta(minutes=10),
            host=s.HostInfo(hostname="client", platform="Linux", python="3.12.3", cpu_count=2),
        ),
        requests=requests,
        decode=s.DecodeMeasurement(short_e2el_s=short, long_e2el_s=long),
        load=levels,
        quality=quality,
        engine_facts=facts,
        client_overhead=s.ClientOverhead(cpu_s=1.2, chunks=30_000, cpu_s_per_chunk=4e-5, share=0.03),
        completeness=s.Completeness(planned=phases, finished=phases),
        failures=s.FailureSummary(requests=len(requests)),
    )


def save_run(directory: Path, *results: s.ResultFile) -> Path:
    """A new ``directory`` holding ``results`` as a.json, b.json, …, as ``bench measure --out`` leaves them."""
    directory.mkdir()
    for name, result in zip(string.ascii_lowercase, results, strict=False):
        s.save_result(result, directory / f"{name}.json")
    return directory


def as_dict(result: s.ResultFile) -> dict[str, Any]:
    return result.model_dump(mode="json")


def test_builder_output_round_trips() -> None:
    result = build_result(correct=[True, False, True])
    assert s.ResultFile.model_validate(as_dict(result)) == result
