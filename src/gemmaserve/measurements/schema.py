"""The benchmark result file: one JSON document per measured target, versioned.

The saved file is the single source of truth: ``bench combine`` and ``bench
report`` re-read it and never re-run anything. Loading is strict: a file of an
unknown ``schema_version`` or with fields this version does not know raises
:class:`~gemmaserve.errors.ResultFileInvalid`. Pure data and (de)serialisation; no
measuring here. ``python -m gemmaserve.measurements.schema`` rewrites docs/bench-schema.md.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gemmaserve.engine_log import EngineFacts
from gemmaserve.errors import ResultFileInvalid
from gemmaserve.fileio import write_atomic

SCHEMA_VERSION: Final = 2
"""Bump on any change that an older reader could misread; readers accept exactly this.

2: timing follows token chunks, with or without text (1 followed chunks that carried text),
and starts when the request left the client; ``empty_text``, ``client_queue_s``, the decode
intercept flag and the stream rate were added."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetKind(StrEnum):
    HTTP = "http"  # OpenAI-compatible server (vLLM serve), chat completions over SSE
    SAGEMAKER = "sagemaker"  # SageMaker real-time endpoint, invoke_endpoint(_with_response_stream)
    IMPORTED = "imported"  # measured elsewhere (vllm bench serve --save-result) and imported


class RequestKind(StrEnum):
    WARMUP = "warmup"
    DECODE = "decode"
    LOAD = "load"
    QUALITY = "quality"


class TargetInfo(_Strict):
    """What was measured."""

    url: str = Field(description="http(s)://host:port or sagemaker://NAME?region=R, as given")
    kind: TargetKind
    label: str = Field(description="Short name used in tables and charts, e.g. 't4-qat'")
    model: str | None = Field(default=None, description="Served model name as the server reports it")
    catalog_model: str | None = Field(default=None, description="Catalog model key, e.g. 'gemma-4-e2b'")
    encoding: str | None = Field(default=None, description="Catalog encoding key, e.g. 'qat-w4a16'")


class HardwareInfo(_Strict):
    """The GPU and the price it bills at, from the catalog or the AWS Pricing API, if known."""

    gpu: str | None = Field(default=None, description="Catalog GPU key, e.g. 't4'")
    gpu_count: int | None = None
    instance: str | None = Field(default=None, description="Catalog instance key, e.g. 'ml.g4dn.xlarge'")
    price_usd_per_hour: float | None = Field(default=None, ge=0)
    price_region: str | None = None
    price_date: str | None = Field(default=None, description="ISO date the price was read")
    price_source: str | None = Field(default=None, description="URL or 'aws-pricing-api' or 'catalog'")


class HostInfo(_Strict):
    """The client machine, so a reader can judge whether the client was the limit."""

    hostname: str
    platform: str
    python: str
    cpu_count: int | None = None


class RunInfo(_Strict):
    gemmaserve_version: str
    started_at: datetime
    finished_at: datetime | None = Field(default=None, description="None while running or if interrupted")
    host: HostInfo
    command: list[str] = Field(default_factory=list, description="argv of the measuring command")
    run_id: str | None = Field(default=None, description="Shared by all targets measured in one interleaved run")
    target_order: int | None = Field(default=None, description="Position of this target in the interleaving")


class ClientSettings(_Strict):
    """Every knob that changes the numbers."""

    decode_short_tokens: int = 16
    decode_long_tokens: int = 512
    decode_calls: int = Field(default=5, description="Calls at each length")
    concurrency_levels: list[int] = Field(default_factory=lambda: [1, 4, 16])
    load_repeats: int = 3
    load_input_tokens: int = 128
    load_output_tokens: int = 256
    quality_set: str | None = "published-40"
    quality_max_tokens: int = 2048
    temperature: float | None = Field(
        default=0.0,
        description="None when the file does not record it (imported runs: sampling_note says what is known)",
    )
    sampling_note: str | None = Field(
        default=None,
        description="What is known of the sampling when the file does not record it, or where it came from",
    )
    ignore_eos: bool | None = True
    timeout_s: float = 600.0
    seed: int = 0
    transport: str | None = Field(default=None, description="e.g. 'aiohttp+uvloop'")
    client_processes: int = Field(default=1, ge=1, description="Worker processes the load levels were sent from")
    max_client_lag_s: float | None = Field(
        default=0.005,
        description="The run stops when the client's event loop lags more than this (median) in a decode or load "
        "step; None: not checked",
    )
    extra: dict[str, Any] = Field(default_factory=dict, description="Engine-specific settings")


class RequestRecord(_Strict):
    """One request as the client saw it. Times in seconds; see docs/bench-schema.md for definitions."""

    request_id: str
    kind: RequestKind
    concurrency: int = Field(ge=1, description="Requests in flight at this level")
    repeat: int = Field(ge=0)
    prompt_tokens: int | None = None
    requested_output_tokens: int
    output_tokens: int | None = Field(default=None, description="Tokens received (usage, else chunks counted)")
    success: bool
    error: str | None = Field(default=None, description="Reason when success is false, or a short-reply note")
    empty_text: bool = Field(
        default=False, description="Tokens arrived but their text was empty: a quality miss, not a failed request"
    )
    ttft_s: float | None = Field(default=None, description="Request sent → first token chunk (text or not)")
    itl_s: list[float] = Field(default_factory=list, description="Gaps between token chunks (text or not)")
    e2el_s: float | None = Field(default=None, description="Request sent → last token chunk (the finish_reason one)")
    tpot_s: float | None = Field(default=None, description="(e2el − ttft) / (output_tokens − 1)")
    start_offset_s: float = Field(description="Send time (when the request left) relative to run start")
    client_queue_s: float | None = Field(
        default=None, description="Started → left the client: queueing inside the client, not part of ttft_s"
    )
    question_id: str | None = Field(default=None, description="For kind=quality")


class PlausibilityFlag(StrEnum):
    """A decode figure that the way a call is timed says cannot be what it claims (gemmaserve.bench.plausibility)."""

    FIXED_COST_ABOVE_TTFT = "fixed_cost_above_ttft"  # the line's fixed cost exceeds the calls' own TTFT
    DECODE_RATES_DISAGREE = "decode_rates_disagree"  # 1/TPOT and the differencing rate are not one decode speed


class PlausibilityFinding(_Strict):
    """A named flag, the numbers it compared and what the disagreement likely means."""

    flag: PlausibilityFlag
    numbers: dict[str, float] = Field(
        description="The figures compared, each named with its unit (fixed_cost_ms, ttft_ms, "
        "stream_tokens_per_s, ratio_ci_low, …)"
    )
    message: str = Field(description="The numbers, the rule they break, and what that likely means")


class DecodeMeasurement(_Strict):
    """The published differencing method: rate = (long − short) / (median t_long − median t_short)."""

    short_tokens: int = 16
    long_tokens: int = 512
    short_e2el_s: list[float] = Field(description="Wall time of each short call")
    long_e2el_s: list[float] = Field(description="Wall time of each long call")
    short_median_s: float | None = None
    long_median_s: float | None = None
    rate_tokens_per_s: float | None = Field(default=None, description="Decode tokens per second of one stream")
    intercept_s: float | None = Field(
        default=None,
        description="The line's value at 0 tokens; a per-call fixed cost only when intercept_flag is null",
    )
    intercept_flag: Literal["negative", "above_ttft"] | None = Field(
        default=None,
        description="'negative': the two lengths do not lie on one line through a non-negative fixed cost; "
        "'above_ttft': the intercept exceeds the calls' own median TTFT (see findings). Either way the "
        "intercept is not a fixed cost and the rate is suspect",
    )
    rate_ci_low: float | None = None
    rate_ci_high: float | None = None
    stream_rate_tokens_per_s: float | None = Field(
        default=None, description="1 / median tpot of the long calls: the rate the streams themselves show"
    )
    findings: list[PlausibilityFinding] = Field(
        default_factory=list, description="Figures the timing of a call says are implausible, with their numbers"
    )
    warnings: list[str] = Field(default_factory=list)


class Percentiles(_Strict):
    """Summary of one latency metric; percentiles by linear interpolation (numpy 'linear')."""

    n: int
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    not_measurable: str | None = Field(
        default=None, description="Why no figure is given (several tokens per network read), when none is"
    )


class LoadLevel(_Strict):
    """One concurrency level, over its repeats."""

    concurrency: int = Field(ge=1)
    repeats: int = Field(ge=0, description="Repeats finished")
    requests_per_repeat: int
    input_tokens: int
    output_tokens: int
    output_tokens_per_s: list[float] = Field(description="Aggregate output tok/s of each repeat")
    wall_s: list[float] = Field(default_factory=list, description="First send → last byte, each repeat")
    median_output_tokens_per_s: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ttft_s: Percentiles | None = None
    tpot_s: Percentiles | None = None
    itl_s: Percentiles | None = None
    e2el_s: Percentiles | None = None
    client_queue_s: Percentiles | None = Field(
        default=None, description="Time requests waited inside the client before they left"
    )
    failed_requests: int = 0


class QualityAnswer(_Strict):
    question_id: str
    kind: str = Field(description="Question family, e.g. 'product', 'sum', 'capital'")
    prompt: str
    expected: str
    answer_text: str | None = Field(description="The full reply; None when the request failed")
    extracted: str | None = Field(description="The final answer the scorer read")
    correct: bool
    error: str | None = None


class QualitySection(_Strict):
    set_name: str
    set_version: int = 1
    max_tokens: int
    temperature: float = 0.0
    answers: list[QualityAnswer]
    correct: int
    total: int = Field(description="Questions in the set (answered or not)")


class EngineFactsRecord(EngineFacts):
    """:class:`gemmaserve.engine_log.EngineFacts` plus where they came from; extra keys (from /metrics) are kept."""

    model_config = ConfigDict(frozen=True, extra="allow")

    source: str | None = Field(default=None, description="'metrics', 'log:<file>' or 'cloudwatch'")


class ClientOverhead(_Strict):
    cpu_s: float = Field(description="Client process CPU time over the measured intervals")
    chunks: int
    cpu_s_per_chunk: float | None = None
    share: float | None = Field(default=None, description="Client CPU time / measured wall time (0..n_cores)")
    warning: str | None = Field(default=None, description="Set when the client may have been the limit")


class Completeness(_Strict):
    """What the run planned, what finished, what is missing (an interrupted file stays valid)."""

    planned: list[str] = Field(description="Phases, e.g. 'decode', 'load:16', 'quality'")
    finished: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    interrupted: bool = False


class FailureSummary(_Strict):
    requests: int = 0
    failed: int = 0
    short_replies: int = Field(default=0, description="Replies with fewer tokens than requested")
    empty_text_replies: int = Field(default=0, description="Successful replies whose tokens all decoded to empty text")
    by_reason: dict[str, int] = Field(default_factory=dict)


class ResultFile(_Strict):
    """One target's results. Written incrementally: every finished phase is on disk."""

    schema_version: Literal[2] = SCHEMA_VERSION
    target: TargetInfo
    hardware: HardwareInfo = Field(default_factory=HardwareInfo)
    run: RunInfo
    client: ClientSettings = Field(default_factory=ClientSettings)
    requests: list[RequestRecord] = Field(default_factory=list)
    decode: DecodeMeasurement | None = None
    load: list[LoadLevel] = Field(default_factory=list)
    quality: QualitySection | None = None
    engine_facts: EngineFactsRecord | None = None
    client_overhead: ClientOverhead | None = None
    completeness: Completeness
    failures: FailureSummary = Field(default_factory=FailureSummary)


def parse_result(data: Any, *, source: str = "<data>") -> ResultFile:
    """Validate a decoded JSON document; the version is checked first so the message says why."""
    if not isinstance(data, dict):
        raise ResultFileInvalid(f"{source} is not a gemmaserve result file: expected a JSON object.", path=source)
    version = data.get("schema_version")
    if version is None:
        raise ResultFileInvalid(
            f"{source} has no schema_version: not a gemmaserve bench result file.",
            hint="Import files from `vllm bench serve --save-result` with `gemmaserve bench import`.",
            path=source,
        )
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise ResultFileInvalid(
            f"{source} has schema_version {version!r}; this gemmaserve reads version {SCHEMA_VERSION} only.",
            hint="Re-run `gemmaserve bench measure`, or read it with the gemmaserve version that wrote it.",
            path=source,
            schema_version=version,
        )
    try:
        return ResultFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ResultFileInvalid(
            f"{source} is not a valid result file: {where}: {first['msg']} ({exc.error_count()} problem(s)).",
            hint="The file was edited or truncated; re-run `gemmaserve bench measure` for this target.",
            path=source,
        ) from None


def load_result(path: str | os.PathLike[str]) -> ResultFile:
    """Read and strictly validate one result file."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultFileInvalid(f"Result file {source} does not exist.", path=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultFileInvalid(f"Cannot read result file {source}: {exc}", path=source) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFileInvalid(
            f"{source} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).",
            hint="A truncated file means the writer was killed mid-write; results are written atomically, "
            "so this file was not written by gemmaserve.",
            path=source,
        ) from None
    return parse_result(data, source=source)


def save_result(result: ResultFile, path: str | os.PathLike[str]) -> None:
    """Write atomically: a reader sees the previous complete file or this one."""
    write_atomic(path, result.model_dump_json(indent=2) + "\n")


def render_schema_doc() -> str:
    """The Markdown of docs/bench-schema.md: prose head plus the JSON Schema of ResultFile."""
    schema = json.dumps(ResultFile.model_json_schema(), indent=2, sort_keys=True)
    return _DOC_HEAD.format(version=SCHEMA_VERSION) + "\n```json\n" + schema + "\n```\n"


_DOC_HEAD = """\
# Benchmark result file (schema version {version})

`gemmaserve bench measure` writes one JSON file per target; `bench combine` and
`bench report` read only these files. The file is validated by the pydantic
model `gemmaserve.measurements.schema.ResultFile`; loading is strict (unknown
fields or another `schema_version` are refused with `ResultFileInvalid`, exit 1).

This page is generated: `python -m gemmaserve.measurements.schema` rewrites it,
and a test fails when it is out of date.

## Metric definitions (per request)

| field | definition | matches vLLM `bench serve` |
|---|---|---|
| `client_queue_s` | request started → its last byte written to the socket (aiohttp trace hooks): the client's own queueing, kept out of `ttft_s` | no (vLLM starts its clock before the client queues) |
| `ttft_s` | request sent → first token chunk, text or not (vLLM's role-only opening chunk does not stop the clock) | yes |
| `itl_s` | gaps between consecutive token chunks, text or not (a chunk carrying k tokens is one gap); summarised only when fewer than half are zero: otherwise several tokens landed per network read and the summary says "not measurable: about N tokens per read" (TPOT the same) | yes |
| `e2el_s` | request sent → last token chunk (the one with `finish_reason`); the usage chunk and `[DONE]` do not move it | yes |
| `tpot_s` | (e2el − ttft) / (output_tokens − 1): the first token excluded | yes |
| load `output_tokens_per_s` | output tokens of the repeat's successful requests / (the repeat's first send → the end of its last successful request: its last token chunk, as `e2el_s`); failed requests add no tokens but their time counts if one was sent first | yes ("output throughput") |
| decode `rate_tokens_per_s` | (long − short) / (median e2el at long − median e2el at short), the published method | — |
| decode `intercept_s` | median e2el at short − short / rate: fixed cost of one call, unless `intercept_flag` is set | — |
| decode `stream_rate_tokens_per_s` | 1 / median `tpot_s` of the long calls (cross-check of the differencing rate) | 1 / TPOT |

Percentiles use linear interpolation between order statistics (numpy's default
`linear` method, the one vLLM uses). Medians of an even count are the mean of
the middle two.

## Completeness

A run writes the file after every phase. `completeness.planned` lists the
phases (`decode`, `load:<concurrency>`, `quality`), `finished` those on disk,
`missing` the rest; `interrupted` is true when the run was stopped.
`run.finished_at` is null until the run ends.

## JSON Schema
"""


if __name__ == "__main__":  # pragma: no cover - doc generator
    doc_path = Path(__file__).resolve().parents[3] / "docs" / "bench-schema.md"
    write_atomic(doc_path, render_schema_doc())
    print(doc_path)
