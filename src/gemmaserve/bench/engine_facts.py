"""Engine facts for the result file: vLLM's Prometheus ``/metrics`` page, or its log via engine_log.

Parsing is pure; the caller fetches the page (``HttpTransport.get_text``) or reads
the file. From ``/metrics``: the KV pool as vLLM itself sizes it (the
``kv_cache_size_tokens`` and ``kv_cache_max_concurrency`` labels of
``vllm:cache_config_info``; vLLM labels that gauge with every CacheConfig field) and
counters (generation and prompt tokens, prefix-cache queries and hits) so a reader can
check the server's token count and cache use against the client's.

Never ``num_gpu_blocks × block_size``: for a model with sliding-window and global layers
(Gemma 4) the blocks are shared between KV-cache groups, and the product is about twice
what the engine can hold (real vLLM 0.26: 1,225,387 × 16 = 19.6 M against 9,192,646).
When the labels are absent (older vLLM) the figure comes from the engine log, or is absent.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gemmaserve.measurements.schema import EngineFactsRecord

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

COUNTERS = {
    "vllm:generation_tokens_total": "generation_tokens_total",
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits_total",
}


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line; comments and unparsable lines are skipped."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        labels = dict(_LABEL.findall(match["labels"] or ""))
        samples.append((match["name"], labels, value))
    return samples


def facts_from_metrics(text: str) -> dict[str, Any]:
    """The figures gemmaserve reads from a vLLM /metrics page (empty when none are there)."""
    facts: dict[str, Any] = {}
    for name, labels, value in parse_prometheus(text):
        if name == "vllm:cache_config_info":
            blocks, block_size = labels.get("num_gpu_blocks"), labels.get("block_size")
            if blocks and blocks.isdigit():
                facts["kv_cache_blocks"] = int(blocks)
            if block_size and block_size.isdigit():
                facts["kv_block_size"] = int(block_size)
            tokens = _number(labels.get("kv_cache_size_tokens"))
            if tokens is not None:
                facts["kv_cache_tokens"] = int(tokens)
            concurrency = _number(labels.get("kv_cache_max_concurrency"))
            if concurrency is not None:
                facts["max_concurrency"] = concurrency
            if "enable_prefix_caching" in labels:
                facts["prefix_caching"] = labels["enable_prefix_caching"] == "True"
        elif name in COUNTERS:
            key = COUNTERS[name]
            facts[key] = facts.get(key, 0.0) + value  # summed over label sets (models, engines)
        elif name == "vllm:num_requests_running" and "model_name" in labels:
            facts["model"] = labels["model_name"]
    return facts


def _number(text: str | None) -> float | None:
    """A label's number; vLLM writes unset fields as "None"."""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value >= 0 else None  # NaN or negative: not a capacity


def counter_deltas(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """How much each counter moved during the run (``*_during_run``)."""
    deltas = {}
    for key in COUNTERS.values():
        if key in before and key in after:
            deltas[f"{key.removesuffix('_total')}_during_run"] = after[key] - before[key]
    return deltas


def facts_from_log(path: str | Path) -> dict[str, Any]:
    """Parse a vLLM log file through :func:`gemmaserve.engine_log.parse_engine_log`."""
    from gemmaserve.engine_log import parse_engine_log

    with open(path, encoding="utf-8", errors="replace") as handle:
        facts = parse_engine_log(handle)
    return facts.model_dump(exclude_defaults=True)


def build_engine_facts(
    metrics_before: dict[str, Any] | None,
    metrics_after: dict[str, Any] | None,
    log_facts: dict[str, Any] | None,
    *,
    log_path: str | None = None,
) -> EngineFactsRecord | None:
    """Merge the sources: the KV capacity from /metrics (the engine's own figure), else the log;
    the log's statements win for the other figures both give."""
    if not metrics_before and not metrics_after and not log_facts:
        return None
    merged: dict[str, Any] = {}
    sources = []
    if metrics_before or metrics_after:
        sources.append("metrics")
        merged.update(metrics_after or metrics_before or {})
        for key in COUNTERS.values():
            merged.pop(key, None)
        merged.update(counter_deltas(metrics_before or {}, metrics_after or {}))
    if log_facts:
        sources.append(f"log:{log_path}")
        # The engine's own unrounded capacity wins; the log (rounded to 0.01x) fills the gaps.
        from_metrics: dict[str, Any] = {
            key: merged[key] for key in ("kv_cache_tokens", "max_concurrency") if key in merged
        }
        merged.update(log_facts)
        merged.update(from_metrics)
    return EngineFactsRecord.model_validate({**merged, "source": "+".join(sources)})
