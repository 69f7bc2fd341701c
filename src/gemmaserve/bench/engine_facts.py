"""Engine facts for the result file: vLLM's Prometheus ``/metrics`` page, or its log via engine_log.

Parsing is pure; the caller fetches the page (``HttpTransport.get_text``) or reads
the file. From ``/metrics``: the KV pool (``vllm:cache_config_info`` num_gpu_blocks ×
block_size) and counters (generation and prompt tokens, prefix-cache queries and hits)
so a reader can check the server's token count and cache use against the client's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gemmaserve.bench.schema import EngineFactsRecord

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
            if blocks and block_size and blocks.isdigit() and block_size.isdigit():
                facts["kv_cache_tokens"] = int(blocks) * int(block_size)
                facts["kv_cache_blocks"] = int(blocks)
                facts["kv_block_size"] = int(block_size)
            if "enable_prefix_caching" in labels:
                facts["prefix_caching"] = labels["enable_prefix_caching"] == "True"
        elif name in COUNTERS:
            key = COUNTERS[name]
            facts[key] = facts.get(key, 0.0) + value  # summed over label sets (models, engines)
        elif name == "vllm:num_requests_running" and "model_name" in labels:
            facts["model"] = labels["model_name"]
    return facts


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
    """Merge the sources; the log's statements win over /metrics for figures both give."""
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
        merged.update(log_facts)
    return EngineFactsRecord.model_validate({**merged, "source": "+".join(sources)})
