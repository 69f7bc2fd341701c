"""Import ``vllm bench serve --save-result`` JSON into the result schema, for the same tables.

Keys follow vLLM's ``vllm/benchmarks/serve.py``: ``duration``, ``completed``,
``failed``, ``total_input_tokens``, ``total_output_tokens``, ``output_throughput``,
``max_concurrency``, ``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms`` and, with
``--save-detailed``, per-request ``ttfts``/``itls``/``latencies``/``input_lens``/
``output_lens``/``errors`` (seconds). ``--append-result`` files (one JSON per line)
become repeats or levels. Each record is one load level; there is no decode or
quality section. Pure apart from reading the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gemmaserve import __version__
from gemmaserve.errors import ResultFileInvalid
from gemmaserve.measurements import schema as s
from gemmaserve.measurements import stats

_REQUIRED = ("duration", "completed", "output_throughput", "total_output_tokens")

# vllm bench serve writes no sampling settings into its result file (vllm/benchmarks/serve.py: the
# setup, traffic and result keys at 0.11.0 lines 1287-1309 and 0.32.0 lines 2258-2287 hold none), and
# what it sent without --temperature changed: up to 0.14.1 it set temperature 0.0 ("Default to greedy
# decoding", 0.14.0 line 1636, 0.11.0 line 1247); from 0.15.0 it sends none and warns that the server
# decides (0.15.0 line 1637, 0.32.0 line 2201), and the server takes the model's generation_config.json
# (--generation-config auto, vllm/config/model.py in 0.32.0) or else 1.0 (chat_completion/protocol.py
# line 682 in 0.32.0). The file names no vLLM version, so which one applied is not known either.
TEMPERATURE_NOT_RECORDED = (
    "not recorded: vllm bench serve writes no sampling settings in its result file; without --temperature "
    "it sent temperature 0 (greedy) up to vLLM 0.14 and left it to the server's default from 0.15 on (the "
    "model's generation_config.json, else 1.0)"
)
TEMPERATURE_FROM_METADATA = "temperature from the file's --metadata"


def looks_like_vllm_result(data: Any) -> bool:
    return isinstance(data, Mapping) and "schema_version" not in data and all(key in data for key in _REQUIRED)


def read_vllm_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One record per JSON document: a single object, or one per line (``--append-result``)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultFileInvalid(f"Cannot read {source}: {exc}", path=source) from None
    try:
        documents = [json.loads(text)]
    except json.JSONDecodeError:
        try:
            documents = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise ResultFileInvalid(f"{source} is not JSON or JSON lines: {exc.msg}.", path=source) from None
    records = [doc for doc in documents if looks_like_vllm_result(doc)]
    if not records or len(records) != len(documents):
        raise ResultFileInvalid(
            f"{source} is not a `vllm bench serve --save-result` file: each record needs {', '.join(_REQUIRED)}.",
            path=source,
        )
    return records


def _ms_summary(record: Mapping[str, Any], metric: str) -> s.Percentiles | None:
    def seconds(key: str) -> float | None:
        value = record.get(key)
        return float(value) / 1000.0 if isinstance(value, int | float) else None

    mean, median = seconds(f"mean_{metric}_ms"), seconds(f"median_{metric}_ms")
    if mean is None and median is None:
        return None
    return s.Percentiles(
        n=int(record.get("completed", 0)),
        mean=mean,
        p50=median,
        p90=seconds(f"p90_{metric}_ms"),
        p99=seconds(f"p99_{metric}_ms"),
    )


def _concurrency(record: Mapping[str, Any]) -> int:
    """The level's concurrency: --max-concurrency, else every prompt at once (rate inf), else the peak seen."""
    if isinstance(record.get("max_concurrency"), int):
        return int(record["max_concurrency"])
    if record.get("request_rate") in ("inf", None) and isinstance(record.get("num_prompts"), int):
        return int(record["num_prompts"])
    peak = record.get("max_concurrent_requests")
    return max(1, int(peak)) if isinstance(peak, int | float) else 1


def _requests(record: Mapping[str, Any], concurrency: int, repeat: int) -> list[s.RequestRecord]:
    ttfts, latencies = record.get("ttfts"), record.get("latencies")
    if not isinstance(ttfts, list) or not isinstance(latencies, list):
        return []
    itls = record.get("itls") or [[] for _ in ttfts]
    inputs = record.get("input_lens") or [None] * len(ttfts)
    outputs = record.get("output_lens") or [None] * len(ttfts)
    errors = record.get("errors") or [""] * len(ttfts)
    starts = record.get("start_times") or [0.0] * len(ttfts)
    first_start = min((t for t in starts if isinstance(t, int | float)), default=0.0)
    rows = []
    for index, ttft in enumerate(ttfts):
        error = errors[index] or None
        output_tokens = outputs[index]
        latency = latencies[index] if index < len(latencies) else None
        tpot = None
        if error is None and isinstance(output_tokens, int) and output_tokens > 1 and latency and ttft:
            tpot = (latency - ttft) / (output_tokens - 1)
        rows.append(
            s.RequestRecord(
                request_id=f"vllm-{concurrency}-{repeat}-{index}",
                kind=s.RequestKind.LOAD,
                concurrency=concurrency,
                repeat=repeat,
                prompt_tokens=inputs[index],
                requested_output_tokens=output_tokens or 0,
                output_tokens=output_tokens,
                success=error is None,
                error=error,
                ttft_s=ttft if error is None else None,
                itl_s=list(itls[index]) if error is None else [],
                e2el_s=latency if error is None else None,
                tpot_s=tpot,
                start_offset_s=float(starts[index]) - first_start if isinstance(starts[index], int | float) else 0.0,
            )
        )
    return rows


def _temperature(record: Mapping[str, Any]) -> tuple[float | None, str]:
    """The temperature and where it came from: ``--metadata temperature=X`` (written as a top-level string,
    0.32.0 line 2271) is the only way such a file records it."""
    value = record.get("temperature")
    try:
        temperature = float(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
    except ValueError:
        temperature = None
    if temperature is None or temperature != temperature or temperature < 0:  # NaN or negative: not a temperature
        return None, TEMPERATURE_NOT_RECORDED
    return temperature, TEMPERATURE_FROM_METADATA


def _started_at(record: Mapping[str, Any]) -> datetime:
    # vLLM writes local time without a zone ('%Y%m%d-%H%M%S'); read it as UTC and say so in the docs.
    try:
        return datetime.strptime(str(record.get("date")), "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return datetime(1970, 1, 1, tzinfo=UTC)


def import_vllm_result(
    path: str | os.PathLike[str],
    *,
    label: str | None = None,
    url: str | None = None,
    hardware: s.HardwareInfo | None = None,
) -> s.ResultFile:
    """Convert one vLLM result file (object or JSON lines) into a :class:`ResultFile` of kind ``imported``.

    Raises:
        ResultFileInvalid: the file is not JSON, or lacks the keys every vLLM result has.
    """
    records = read_vllm_records(path)
    first = records[0]
    levels: dict[int, dict[str, Any]] = {}
    requests: list[s.RequestRecord] = []
    failed = total = 0
    for record in records:
        concurrency = _concurrency(record)
        completed, record_failed = int(record["completed"]), int(record.get("failed", 0) or 0)
        failed += record_failed
        total += completed + record_failed
        level = levels.setdefault(concurrency, {"tok_s": [], "wall_s": [], "record": record, "requests": 0})
        repeat = len(level["tok_s"])
        level["tok_s"].append(float(record["output_throughput"]))
        level["wall_s"].append(float(record["duration"]))
        level["requests"] = completed + record_failed
        requests.extend(_requests(record, concurrency, repeat))
    load = []
    for concurrency in sorted(levels):
        level = levels[concurrency]
        record = level["record"]
        completed = max(int(record["completed"]), 1)
        ok = [r for r in requests if r.concurrency == concurrency and r.success]
        detailed = bool(ok)
        load.append(
            s.LoadLevel(
                concurrency=concurrency,
                repeats=len(level["tok_s"]),
                requests_per_repeat=level["requests"],
                input_tokens=round(int(record.get("total_input_tokens", 0)) / completed),
                output_tokens=round(int(record["total_output_tokens"]) / completed),
                output_tokens_per_s=level["tok_s"],
                wall_s=level["wall_s"],
                median_output_tokens_per_s=stats.median(level["tok_s"]),
                ttft_s=stats.summarize([r.ttft_s for r in ok if r.ttft_s is not None])
                if detailed
                else _ms_summary(record, "ttft"),
                tpot_s=stats.summarize([r.tpot_s for r in ok if r.tpot_s is not None])
                if detailed
                else _ms_summary(record, "tpot"),
                itl_s=stats.summarize([g for r in ok for g in r.itl_s]) if detailed else _ms_summary(record, "itl"),
                e2el_s=stats.summarize([r.e2el_s for r in ok if r.e2el_s is not None])
                if detailed
                else _ms_summary(record, "e2el"),
                failed_requests=sum(int(r.get("failed", 0) or 0) for r in records if _concurrency(r) == concurrency),
            )
        )
    phases = [f"load:{level.concurrency}" for level in load]
    model = first.get("model_id")
    temperature, sampling_note = _temperature(first)
    return s.ResultFile(
        target=s.TargetInfo(
            url=url or f"imported:{Path(path).name}",
            kind=s.TargetKind.IMPORTED,
            label=label or str(first.get("label") or model or Path(path).stem),
            model=model,
        ),
        hardware=hardware or s.HardwareInfo(),
        run=s.RunInfo(
            gemmaserve_version=__version__,
            started_at=_started_at(first),
            finished_at=None,
            host=s.HostInfo(hostname="unknown (imported)", platform="unknown", python="unknown"),
            command=["vllm", "bench", "serve", f"--backend={first.get('backend', '?')}"],
        ),
        client=s.ClientSettings(
            concurrency_levels=[level.concurrency for level in load],
            load_repeats=max(len(v["tok_s"]) for v in levels.values()),
            load_input_tokens=load[0].input_tokens,
            load_output_tokens=load[0].output_tokens,
            quality_set=None,
            temperature=temperature,
            sampling_note=sampling_note,
            ignore_eos=None,
            transport="vllm bench serve",
            extra={
                key: first.get(key)
                for key in ("backend", "request_rate", "burstiness", "num_prompts", "tokenizer_id")
                if key in first
            },
        ),
        requests=requests,
        load=load,
        completeness=s.Completeness(planned=phases, finished=phases),
        failures=s.FailureSummary(requests=total, failed=failed, by_reason={"vllm-reported": failed} if failed else {}),
    )
