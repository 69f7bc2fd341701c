"""What each ``bench`` action takes (one request model per action), and what ``bench measure`` and ``bench import``
return.

Both front ends are built from these models (``gemmaserve bench …`` and the MCP ``bench_*`` tools), so a
knob has one name, default and range. Pure data, cheap to import (pydantic only; the catalog and the
question sets are looked up inside validators), so the CLI can build its options without the engine.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from gemmaserve.errors import UsageError
from gemmaserve.measurements.schema import ClientSettings, HardwareInfo, Percentiles, ResultFile
from gemmaserve.request_model import CREATES_REMOTE, DERIVES, ActionRequest, Cli, token_count
from gemmaserve.result_model import ActionResult

LABEL_PATTERN = re.compile(r"[A-Za-z0-9._-]+")


def _split_levels(value: Any) -> Any:
    """``--concurrency 1,4,16`` (one value, commas) and ``--concurrency 1 --concurrency 4`` both work."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        levels: list[Any] = []
        for item in value:
            if isinstance(item, str):
                parts = [part.strip() for part in item.split(",") if part.strip()]
                if not parts or not all(re.fullmatch(r"[+-]?\d+", part) for part in parts):
                    raise ValueError(f"{item!r} is not a comma-separated list of integers (e.g. 1,4,16)")
                levels += [int(part) for part in parts]
            else:
                levels.append(item)
        return levels
    return value


# Each level an integer >= 1. The element type stays Annotated (not a bare int), so the command line
# takes each value as text and the validator above splits "1,4,16"; MCP's schema still says integers.
Concurrency = Annotated[
    list[Annotated[int, Field(ge=1)]],
    BeforeValidator(_split_levels),
    Cli(metavar="N[,N...]"),
    Field(min_length=1, description="Load levels: concurrent streams, comma-separated or repeated."),
]


def _per_target(what: str) -> Any:
    return Field(description=f"{what} per target, in target order.")


Utilisation = Annotated[
    float,
    Field(
        gt=0, le=1, description="Share of billed hours the endpoint is busy; cost per token scales by 1/utilisation."
    ),
]


class MeasureRequest(ActionRequest, action="bench measure", effect=CREATES_REMOTE):
    """``gemmaserve bench measure``: which targets, which phases, how hard, and what each target is."""

    targets: Annotated[
        list[str],
        Cli(argument=True, metavar="TARGET..."),
        Field(
            min_length=1,
            description="http://HOST:PORT or sagemaker://NAME?region=R, measured interleaved; repeat one for A-B-A.",
        ),
    ]
    out: Annotated[str, Cli(metavar="DIR"), Field(min_length=1, description="Directory for <label>.json files.")]
    label: Annotated[list[str] | None, _per_target("Short name (file name, tables)")] = None
    decode_calls: Annotated[int, Field(ge=0, description="Calls at each decode length (0 skips).")] = 5
    decode_short: Annotated[int, *token_count(ge=1, description="Output tokens of the short decode calls.")] = 16
    decode_long: Annotated[int, *token_count(ge=2, description="Output tokens of the long decode calls.")] = 512
    concurrency: Concurrency = [1, 4, 16]  # noqa: RUF012 - pydantic copies a default per instance
    repeats: Annotated[int, Field(ge=0, description="Repeats per load level (0 skips load).")] = 3
    input_tokens: Annotated[int, *token_count(ge=1, description="Prompt words per load request.")] = 128
    output_tokens: Annotated[int, *token_count(ge=1, description="Output tokens per load request.")] = 256
    requests_per_stream: Annotated[
        int, Field(ge=1, description="Load requests per concurrent stream in each repeat.")
    ] = 1
    quality_set: Annotated[str, Field(description="Question set, or 'none' to skip.")] = "published-40"
    quality_max_tokens: Annotated[int, *token_count(ge=1, description="Output token limit of a quality answer.")] = 2048
    quality_concurrency: Annotated[int, Field(ge=1, description="Quality questions in flight at once.")] = 8
    temperature: Annotated[float, Field(ge=0, description="Sampling temperature of every call.")] = 0.0
    ignore_eos: Annotated[bool, Field(description="Ask vLLM for exactly max_tokens on decode and load calls.")] = True
    timeout_s: Annotated[
        float, Cli(aliases=("--timeout",), metavar="SECONDS"), Field(gt=0, description="Seconds one request may take.")
    ] = 600.0
    seed: Annotated[int, Field(description="Seed of the synthetic prompts.")] = 0
    warmup: Annotated[int, Field(ge=0, description="Unscored calls per target first.")] = 1
    client_processes: Annotated[
        int,
        Field(
            ge=1, description="Worker processes that send each load level (one per free core for thousands of streams)."
        ),
    ] = 1
    max_client_lag_ms: Annotated[
        float,
        Field(
            ge=0,
            description="Stop when the client's own event loop lags more than this (median) in a decode or load "
            "step; 0: never.",
        ),
    ] = 5.0
    log: Annotated[list[str] | None, Cli(metavar="FILE"), _per_target("vLLM log file")] = None
    instance: Annotated[list[str] | None, _per_target("Catalog instance (price, GPU)")] = None
    gpu: Annotated[list[str] | None, _per_target("Catalog GPU")] = None
    model: Annotated[list[str] | None, _per_target("Catalog model served (e2b, 31b, …), for `plan --from-bench`")] = (
        None
    )
    encoding: Annotated[list[str] | None, _per_target("Catalog encoding served (bf16, qat-w4a16, …)")] = None
    price_usd_per_hour: Annotated[
        list[Annotated[float, Field(ge=0)]] | None, _per_target("Hourly price (overrides the catalog's)")
    ] = None

    @field_validator("label", "log", "instance", "gpu", "model", "encoding", "price_usd_per_hour")
    @classmethod
    def _one_per_target(cls, values: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        targets = info.data.get("targets")
        if values is not None and targets is not None and len(values) > len(targets):
            option = "--" + (info.field_name or "").replace("_", "-")
            raise ValueError(
                f"{len(values)} values for {len(targets)} target(s): give {option} once per target, in target order"
            )
        return values

    @field_validator("label")
    @classmethod
    def _label_is_a_file_name(cls, labels: list[str] | None) -> list[str] | None:
        for label in labels or []:
            if not LABEL_PATTERN.fullmatch(label):
                raise ValueError(f"label {label!r} may only use letters, digits, '.', '_' and '-'")
        return labels

    @field_validator("quality_set")
    @classmethod
    def _known_question_set(cls, name: str) -> str:
        if name.lower() == "none":
            return "none"
        from gemmaserve.measurements.questions import get_question_set

        return get_question_set(name).name

    @model_validator(mode="after")
    def _long_exceeds_short(self) -> MeasureRequest:
        if self.decode_long <= self.decode_short:
            raise ValueError(
                f"--decode-long ({self.decode_long}) must exceed --decode-short ({self.decode_short}): the decode "
                "rate is the difference of the two"
            )
        return self

    def client_settings(self) -> ClientSettings:
        """The run's client settings (what every result file records)."""
        return ClientSettings(
            decode_short_tokens=self.decode_short,
            decode_long_tokens=self.decode_long,
            decode_calls=self.decode_calls,
            concurrency_levels=list(self.concurrency),
            load_repeats=self.repeats,
            load_input_tokens=self.input_tokens,
            load_output_tokens=self.output_tokens,
            quality_set=None if self.quality_set == "none" else self.quality_set,
            quality_max_tokens=self.quality_max_tokens,
            temperature=self.temperature,
            ignore_eos=self.ignore_eos,
            timeout_s=self.timeout_s,
            seed=self.seed,
            client_processes=self.client_processes,
            max_client_lag_s=self.max_client_lag_ms / 1000 if self.max_client_lag_ms else None,
            extra={
                "warmup_calls": self.warmup,
                "quality_concurrency": self.quality_concurrency,
                "load_requests_per_stream": self.requests_per_stream,
            },
        )

    def target_options(self) -> list[TargetOptions]:
        """Label, log, hardware and price of each target, in target order.

        Raises:
            UnknownName: an instance or GPU the catalog does not know (exit 2).
        """
        count = len(self.targets)

        def padded(values: list[Any] | None) -> list[Any]:
            return list(values or []) + [None] * (count - len(values or []))

        return [
            TargetOptions(
                label=label,
                log_path=log,
                hardware=hardware_info(instance=instance, gpu=gpu, price_usd_per_hour=price),
                served=served_checkpoint(model, encoding),
            )
            for label, log, instance, gpu, model, encoding, price in zip(
                padded(self.label),
                padded(self.log),
                padded(self.instance),
                padded(self.gpu),
                padded(self.model),
                padded(self.encoding),
                padded(self.price_usd_per_hour),
                strict=True,
            )
        ]


class CombineRequest(ActionRequest, action="bench combine", effect=DERIVES):
    """``gemmaserve bench combine``: saved result files to compare; the first is the baseline A."""

    files: Annotated[
        list[str],
        Cli(argument=True, metavar="FILE..."),
        Field(min_length=1, description="Result files; the first is the baseline A, a repeated target is drift."),
    ]
    out: Annotated[
        str | None,
        Cli(metavar="FILE"),
        Field(description="Also write the comparison: FILE.md as Markdown, any other name as JSON."),
    ] = None
    utilisation: Utilisation = 1.0


class ReportRequest(ActionRequest, action="bench report", effect=DERIVES):
    """``gemmaserve bench report``: a directory of result files to render as Markdown, HTML and charts."""

    directory: Annotated[
        str, Cli(argument=True, metavar="DIR"), Field(min_length=1, description="Directory of result files.")
    ]
    out: Annotated[str | None, Cli(metavar="DIR"), Field(description="Where to write (default DIR/report).")] = None
    markdown_only: Annotated[bool, Field(description="Skip the HTML page and charts (needs no matplotlib).")] = False
    utilisation: Utilisation = 1.0


class ImportRequest(ActionRequest, action="bench import", effect=DERIVES):
    """``gemmaserve bench import``: a ``vllm bench serve --save-result`` file into a gemmaserve result file."""

    vllm_file: Annotated[
        str,
        Cli(argument=True, metavar="VLLM_FILE"),
        Field(min_length=1, description="The JSON file `vllm bench serve --save-result` wrote."),
    ]
    out: Annotated[str, Cli(metavar="FILE"), Field(min_length=1, description="The result file to write.")]
    label: Annotated[
        str | None, Field(description="Short name for tables (default: the file's label or model id).")
    ] = None
    url: Annotated[str | None, Field(description="The target that was measured, for the record.")] = None
    instance: Annotated[
        str | None,
        Field(description="Catalog instance type (e.g. ml.g4dn.xlarge): sets the GPU and the list price."),
    ] = None
    region: Annotated[str, Field(min_length=1, description="Region of the price.")] = "us-east-1"


class RunStatus(StrEnum):
    SUCCESS = "success"  # every planned phase finished and every request succeeded
    PARTIAL = "partial"  # some requests failed or some phases are missing, but results exist
    FAILED = "failed"  # no measured request succeeded
    INTERRUPTED = "interrupted"


EXIT_CODES = {RunStatus.SUCCESS: 0, RunStatus.PARTIAL: 1, RunStatus.FAILED: 1, RunStatus.INTERRUPTED: 130}


class TargetOptions(BaseModel):
    """Per-target extras: a label for tables and file names, a vLLM log, hardware and price, what it serves."""

    label: str | None = None
    log_path: str | None = None
    hardware: HardwareInfo = Field(default_factory=HardwareInfo)
    served: tuple[str | None, str | None] = (None, None)  # catalog model and encoding keys


def served_checkpoint(model: str | None, encoding: str | None) -> tuple[str | None, str | None]:
    """The catalog keys of what a target serves (both or neither, so a result never names half a row).

    Raises:
        UnknownName: a model or encoding the catalog does not know (exit 2).
        UsageError: one given without the other.
    """
    from gemmaserve.catalog import resolve_encoding, resolve_model

    if model is None and encoding is None:
        return None, None
    if model is None or encoding is None:
        raise UsageError("--model and --encoding go together (per target): name both or neither")
    entry = resolve_model(model)
    return entry.key, resolve_encoding(entry, encoding).key


class LatencyRow(BaseModel):
    """TTFT, ITL and TPOT of one phase of one target: the decode calls, or one load level."""

    phase: str  # "decode" or "load:<c>"
    concurrency: int
    ttft_s: Percentiles
    itl_s: Percentiles
    tpot_s: Percentiles


class TargetSummary(BaseModel):
    url: str
    label: str
    path: str
    status: RunStatus
    requests: int
    failed: int
    short_replies: int
    failures_by_reason: dict[str, int]
    finished: list[str]
    missing: list[str]
    decode_tokens_per_s: float | None
    intercept_s: float | None
    intercept_flag: str | None = None  # "negative": the intercept is not a fixed cost
    decode_warnings: list[str] = []
    load_output_tokens_per_s: dict[str, float | None]
    latency: list[LatencyRow] = []
    quality_correct: int | None
    quality_total: int | None
    quality_answered: int | None = None  # the denominator of quality: failed requests are left out
    client_warning: str | None
    note: str | None = None


class MeasureReport(ActionResult):
    """What ``bench measure`` returns: the run's outcome per target (each target's file holds the rest)."""

    run_id: str
    out_dir: str
    status: RunStatus
    exit_code: int = Field(description="The CLI's exit status (kept for scripts; `ok` and `status` say the same)")
    transport: str
    targets: list[TargetSummary]
    message: str

    def succeeded(self) -> bool:
        """Every planned phase finished and every request succeeded (a partial run is not ok)."""
        return self.status is RunStatus.SUCCESS

    @property
    def interrupted(self) -> bool:
        return self.status is RunStatus.INTERRUPTED


class ImportedResult(ResultFile, ActionResult):
    """What ``bench import`` returns: the result file it wrote (its fields exactly as saved) and where."""

    # Reads back its own JSON, whose computed ``ok`` is no field of a result file.
    model_config = ConfigDict(extra="ignore")

    path: str = Field(description="Where the result file was written")


def hardware_info(
    *, instance: str | None = None, gpu: str | None = None, price_usd_per_hour: float | None = None
) -> HardwareInfo:
    """Hardware and list price from the catalog; an explicit price overrides the catalog's.

    Raises:
        UnknownName: an instance or GPU the catalog does not know (exit 2).
    """
    from gemmaserve.catalog import resolve_gpu, resolve_instance

    values: dict[str, Any] = {}
    if instance:
        entry = resolve_instance(instance)
        values.update(instance=entry.key, gpu=entry.gpu, gpu_count=entry.gpu_count)
        if entry.price is not None:
            values.update(
                price_usd_per_hour=entry.price.usd_per_hour,
                price_region=entry.price.region,
                price_date=entry.price.date,
                price_source=entry.price.source,
            )
    if gpu:
        values["gpu"] = resolve_gpu(gpu).key
    if price_usd_per_hour is not None:
        values.update(price_usd_per_hour=price_usd_per_hour, price_source="user", price_date=None, price_region=None)
    return HardwareInfo(**values)
