"""What a checkpoint holds, from its headers and config alone: bytes, dtype and parameters by part.

Parts follow Gemma 4's tensor names (``model.language_model.*``,
``model.vision_tower.*``, ``model.audio_tower.*``, ``model.embed_vision.*``,
``model.embed_audio.*``, ``lm_head.*``). Packed 4-bit parameters are counted
from shapes (8 per int32 word): the hub's own ``parameter_count`` is 8x low.
"""

from __future__ import annotations

import re
from contextlib import closing
from typing import Any

from pydantic import BaseModel

from gemmaserve.checkpoint.header import SafetensorsHeader, TensorEntry
from gemmaserve.checkpoint.requests import InspectRequest
from gemmaserve.checkpoint.sources import CheckpointSource, open_source
from gemmaserve.result_model import ActionResult

PARTS = (
    "per_layer_embedding",
    "vocab_embedding",
    "transformer_body",
    "lm_head",
    "vision_tower",
    "audio_tower",
    "other",
)
# Tensors that describe a packed weight rather than hold parameters.
_QUANT_AUX = re.compile(r"\.(weight_scale|weight_shape|weight_zero_point|weight_global_scale|qzeros|scales|g_idx)$")


def classify_tensor(name: str) -> str:
    """The part a tensor belongs to, from its Gemma 4 name."""
    if "embed_tokens_per_layer" in name:
        return "per_layer_embedding"
    if "audio_tower." in name or "embed_audio." in name:
        return "audio_tower"
    if "vision_tower." in name or "embed_vision." in name or "multi_modal_projector." in name:
        return "vision_tower"
    if name.startswith("lm_head.") or ".lm_head." in name:
        return "lm_head"
    if "embed_tokens." in name:
        return "vocab_embedding"
    if re.search(r"(^|\.)layers\.\d+\.", name) or "language_model." in name or name.startswith("model.norm"):
        return "transformer_body"
    return "other"


def parameter_count(entry: TensorEntry) -> int:
    """Model parameters a tensor stores: packed words count 8 (int4), quantization metadata counts 0."""
    if _QUANT_AUX.search(entry.name):
        return 0
    if entry.name.endswith((".weight_packed", ".qweight")) and entry.dtype == "I32":
        return entry.element_count * 8
    return entry.element_count


def storage_label(entry: TensorEntry) -> str:
    if entry.name.endswith((".weight_packed", ".qweight")) and entry.dtype == "I32":
        return "packed int4"
    return entry.dtype


class PartSummary(BaseModel):
    part: str
    bytes: int
    share: float
    parameters: int
    tensors: int
    storage: dict[str, int]  # storage label ("BF16", "packed int4", ...) -> bytes


class QuantizationSummary(BaseModel):
    quant_method: str | None
    format: str | None
    scheme: str | None  # e.g. "W4A16 int symmetric group"
    num_bits: int | None
    group_size: int | None
    symmetric: bool | None
    targets: list[str]
    ignore: list[str]


class InspectReport(ActionResult):
    """``bytes_fetched`` counts what gemmaserve read itself (config, index, local headers); on the hub
    the shard headers are read by huggingface_hub (a 100 kB range request per shard) on top of it."""

    source: str
    shards: int
    tensors: int
    total_bytes: int
    total_parameters: int
    bytes_fetched: int
    architectures: list[str]
    tie_word_embeddings: bool | None
    parts: list[PartSummary]
    quantization: QuantizationSummary | None
    findings: list[str]


def text_config(config: dict[str, Any] | None) -> dict[str, Any]:
    if not config:
        return {}
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def tied_embeddings(config: dict[str, Any] | None) -> bool | None:
    if not config:
        return None
    for scope in (text_config(config), config):
        if "tie_word_embeddings" in scope:
            return bool(scope["tie_word_embeddings"])
    return None


def summarize_quantization(config: dict[str, Any] | None) -> QuantizationSummary | None:
    qc = (config or {}).get("quantization_config")
    if not isinstance(qc, dict):
        return None
    weights: dict[str, Any] = {}
    targets: list[str] = []
    activations = None
    groups = qc.get("config_groups")
    if isinstance(groups, dict) and groups:
        first = next(iter(groups.values()))
        if isinstance(first, dict):
            weights = first.get("weights") or {}
            targets = [str(t) for t in first.get("targets") or []]
            activations = first.get("input_activations")
    bits = weights.get("num_bits", qc.get("bits"))
    group = weights.get("group_size", qc.get("group_size"))
    scheme = None
    if bits is not None:
        act = "16" if not activations else str(activations.get("num_bits", "?"))
        parts = [f"W{bits}A{act}", str(weights.get("type", "int"))]
        if "symmetric" in weights:
            parts.append("symmetric" if weights["symmetric"] else "asymmetric")
        if weights.get("strategy"):
            parts.append(str(weights["strategy"]))
        scheme = " ".join(parts)
    ignore = qc.get("ignore", qc.get("modules_to_not_convert")) or []
    return QuantizationSummary(
        quant_method=qc.get("quant_method"),
        format=qc.get("format") or qc.get("version"),
        scheme=scheme,
        num_bits=bits,
        group_size=group,
        symmetric=weights.get("symmetric", None if "zero_point" not in qc else not qc["zero_point"]),
        targets=targets,
        ignore=[str(i) for i in ignore],
    )


def summarize_headers(
    headers: dict[str, SafetensorsHeader], config: dict[str, Any] | None, *, source: str, bytes_fetched: int
) -> InspectReport:
    """The breakdown by part (pure: headers and config in, report out)."""
    totals: dict[str, dict[str, Any]] = {p: {"bytes": 0, "parameters": 0, "tensors": 0, "storage": {}} for p in PARTS}
    names: set[str] = set()
    for header in headers.values():
        for entry in header.tensors.values():
            names.add(entry.name)
            part = totals[classify_tensor(entry.name)]
            part["bytes"] += entry.nbytes
            part["parameters"] += parameter_count(entry)
            part["tensors"] += 1
            label = storage_label(entry)
            part["storage"][label] = part["storage"].get(label, 0) + entry.nbytes
    total = sum(t["bytes"] for t in totals.values())
    parts = [
        PartSummary(part=p, share=(t["bytes"] / total if total else 0.0), **t)
        for p, t in totals.items()
        if t["tensors"]
    ]
    tied = tied_embeddings(config)
    findings: list[str] = []
    if tied and totals["lm_head"]["tensors"]:
        findings.append(
            f"lm_head is stored ({totals['lm_head']['bytes']:,} bytes) although tie_word_embeddings is true: "
            "a duplicate of the vocabulary embedding that vLLM skips at load."
        )
    if tied is False and not totals["lm_head"]["tensors"]:
        findings.append("tie_word_embeddings is false but no lm_head is stored: vLLM will fail to load.")
    if config is None:
        findings.append("No config.json: part names come from tensor names alone.")
    packed = sum(t["storage"].get("packed int4", 0) for t in totals.values())
    if packed and summarize_quantization(config) is None:
        findings.append("Packed 4-bit tensors are stored but config.json has no quantization_config.")
    return InspectReport(
        source=source,
        shards=len(headers),
        tensors=len(names),
        total_bytes=total,
        total_parameters=sum(t["parameters"] for t in totals.values()),
        bytes_fetched=bytes_fetched,
        architectures=[str(a) for a in (config or {}).get("architectures") or []],
        tie_word_embeddings=tied,
        parts=parts,
        quantization=summarize_quantization(config),
        findings=findings,
    )


def inspect_source(source: CheckpointSource) -> InspectReport:
    config = source.load_config()
    headers = source.load_headers()
    return summarize_headers(headers, config, source=source.label, bytes_fetched=source.bytes_fetched)


def inspect_checkpoint(source: str, *, revision: str | None = None, hub_api: Any = None) -> InspectReport:
    """Inspect a local directory/file or a hub repo (headers only; hub through range requests).

    Raises:
        CheckpointNotFound: no such path or repo.
        MalformedCheckpoint: a header or JSON file that does not parse within limits.
    """
    with closing(open_source(source, revision=revision, hub_api=hub_api)) as opened:
        return inspect_source(opened)


def checkpoint_inspect(request: InspectRequest, *, hub_api: Any = None) -> InspectReport:
    """What the checkpoint an :class:`InspectRequest` names holds (``gemmaserve checkpoint inspect``)."""
    return inspect_checkpoint(request.source, revision=request.revision, hub_api=hub_api)
