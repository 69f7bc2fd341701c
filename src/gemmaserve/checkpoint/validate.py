"""Before a deploy: does the checkpoint's config agree with what its shards store?

Checks the index against the shards, tensors the config implies (embeddings,
every decoder layer) with their shapes and dtype, packed-tensor shapes, and the
quantization ignore list against the Linears actually stored in 16 bits.
Reads headers (and the 16-byte ``weight_shape`` tensors) only.
"""

from __future__ import annotations

import re
from contextlib import closing
from typing import Any

import numpy as np

from gemmaserve.checkpoint import grid
from gemmaserve.checkpoint.inspect import classify_tensor, text_config, tied_embeddings
from gemmaserve.checkpoint.requests import ValidateRequest
from gemmaserve.checkpoint.sources import (
    INDEX_FILE,
    CheckpointSource,
    open_source,
    tensor_locations,
)
from gemmaserve.findings import Finding, Status, all_pass
from gemmaserve.result_model import ActionResult

_TORCH_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


class ValidateReport(ActionResult):
    """``ok`` is False when any finding fails (a ``warn`` finding, such as a stray dtype, passes)."""

    source: str
    tensors: int
    findings: list[Finding]

    def succeeded(self) -> bool:
        return all_pass(self.findings)


def _ignored(module: str, ignore: list[str]) -> bool:
    for item in ignore:
        if item.startswith("re:"):
            if re.fullmatch(item[3:], module) or re.match(item[3:], module):
                return True
        elif module == item or module.endswith("." + item) or item.endswith("." + module):
            return True
    return False


def validate_source(source: CheckpointSource) -> ValidateReport:
    findings: list[Finding] = []

    def add(status: Status, check: str, detail: str, fix: str, where: str | None = None) -> None:
        findings.append(Finding(check=check, status=status, detail=detail, fix=fix, where=where))

    config = source.load_config()
    locations = tensor_locations(source)
    index = source.load_index()
    if index is not None:
        weight_map = index.get("weight_map") or {}
        for name, shard in sorted(weight_map.items()):
            if name not in locations:
                add(Status.FAIL, "index", f"{INDEX_FILE} lists {name} in {shard}, which does not store it.",
                    "Regenerate the index from the shards, or restore the missing shard.", where=name)  # fmt: skip
            elif locations[name][1].file != shard:
                add(Status.FAIL, "index", f"{name} is in {locations[name][1].file}, the index says {shard}.",
                    "Regenerate the index from the shards.", where=name)  # fmt: skip
        for name in sorted(set(locations) - set(weight_map)):
            add(Status.FAIL, "index", f"{name} is stored but missing from {INDEX_FILE}.", "Regenerate the index.", name)
    if config is None:
        add(Status.FAIL, "config", "No config.json.", "Copy config.json from the model the weights came from.")
        return ValidateReport(source=source.label, tensors=len(locations), findings=findings)

    text = text_config(config)
    dtype = _TORCH_DTYPES.get(
        str(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or config.get("dtype") or "")
    )
    hidden, vocab, layers = text.get("hidden_size"), text.get("vocab_size"), text.get("num_hidden_layers")
    embeddings = [n for n in locations if n.endswith("embed_tokens.weight") and classify_tensor(n) == "vocab_embedding"]
    if not embeddings:
        add(
            Status.FAIL,
            "tensors",
            "No vocabulary embedding (…embed_tokens.weight) is stored.",
            "Restore the shard that holds it.",
        )
    for name in embeddings:
        shape = list(locations[name][1].shape)
        if hidden and vocab and shape != [vocab, hidden]:
            add(
                Status.FAIL,
                "shapes",
                f"{name} is {shape}, config says [{vocab}, {hidden}].",
                "Use the config.json of this checkpoint.",
                name,
            )
    ple = text.get("hidden_size_per_layer_input")
    if ple and layers:
        ple_names = [
            n
            for n in locations
            if n.endswith(("embed_tokens_per_layer.weight", "embed_tokens_per_layer.weight_packed"))
        ]
        if not ple_names:
            add(
                Status.FAIL,
                "tensors",
                "Config has per-layer inputs but no embed_tokens_per_layer is stored.",
                "Restore it.",
            )
        for name in ple_names:
            entry = locations[name][1]
            width = entry.shape[1] * (8 if entry.dtype == "I32" else 1) if len(entry.shape) == 2 else None
            if width != ple * layers:
                add(Status.FAIL, "shapes", f"{name} holds width {width}, config says {ple} x {layers} layers.",
                    "Use the config.json of this checkpoint.", where=name)  # fmt: skip
    if layers:
        present = {
            int(m.group(1))
            for n in locations
            if classify_tensor(n) == "transformer_body" and (m := re.search(r"layers\.(\d+)\.", n))
        }
        missing = sorted(set(range(int(layers))) - present)
        if missing:
            add(Status.FAIL, "tensors", f"Decoder layers {missing[:10]} named by num_hidden_layers={layers} have no tensors.",
                "A shard is missing or the config belongs to another model.")  # fmt: skip
    if tied_embeddings(config) is False and not any(n.startswith("lm_head.") for n in locations):
        add(
            Status.FAIL,
            "tensors",
            "tie_word_embeddings is false but no lm_head is stored.",
            "Restore lm_head or set tie_word_embeddings.",
        )

    qc = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else None
    ignore = [str(i) for i in (qc or {}).get("ignore") or []]
    group = next(
        (
            int((g.get("weights") or {}).get("group_size") or 0)
            for g in ((qc or {}).get("config_groups") or {}).values()
        ),
        0,
    )
    packed_modules = sorted(n[: -len(".weight_packed")] for n in locations if n.endswith(".weight_packed"))
    if packed_modules and qc is None:
        add(Status.FAIL, "quantization", "Packed 4-bit weights are stored but config.json has no quantization_config.",
            "Add the compressed-tensors quantization_config this build was made with.")  # fmt: skip
    for module in packed_modules:
        packed = locations[f"{module}.weight_packed"][1]
        scale = locations.get(f"{module}.weight_scale")
        shape_loc = locations.get(f"{module}.weight_shape")
        if packed.dtype != "I32" or len(packed.shape) != 2:
            add(
                Status.FAIL,
                "packed",
                f"{module}.weight_packed is {packed.dtype} {list(packed.shape)}, expected I32 2-D.",
                "Repack.",
                module,
            )
            continue
        rows, cols = packed.shape[0], packed.shape[1] * 8
        if shape_loc is None or shape_loc[1].dtype != "I64" or shape_loc[1].shape != (2,):
            add(
                Status.FAIL,
                "packed",
                f"{module}.weight_shape is missing or not I64[2].",
                "Repack the checkpoint.",
                module,
            )
        else:
            stored = np.frombuffer(source.read_rows(shape_loc[0], shape_loc[1], 0, 2).tobytes(), "<i8").tolist()
            if stored[0] != rows or not cols - 8 < stored[1] <= cols:
                add(
                    Status.FAIL,
                    "packed",
                    f"{module}.weight_shape says {stored}, weight_packed holds [{rows}, {cols}].",
                    "Repack.",
                    module,
                )
        if scale is None:
            add(Status.FAIL, "packed", f"{module}.weight_scale is missing.", "Repack the checkpoint.", module)
        elif group and scale[1].shape != (rows, cols // group):
            add(Status.FAIL, "packed", f"{module}.weight_scale is {list(scale[1].shape)}, expected [{rows}, {cols // group}] for group {group}.",
                "Repack, or fix group_size in quantization_config.", where=module)  # fmt: skip
        if _ignored(module, ignore):
            add(
                Status.FAIL,
                "ignore",
                f"{module} is stored packed but listed in the ignore list.",
                f"Remove {module} from ignore.",
                module,
            )
    if qc is not None:
        for name, (_, entry) in sorted(locations.items()):
            if not name.endswith(".weight") or len(entry.shape) != 2 or entry.dtype not in grid.FLOAT_DTYPES:
                continue
            module = name[: -len(".weight")]
            leaf = module.rsplit(".", 1)[-1]
            if "embed_tokens" in leaf or "norm" in leaf:
                continue
            if not _ignored(module, ignore):
                add(Status.FAIL, "ignore", f"{module} is stored in 16 bits but not in the quantization ignore list: vLLM will fail to load it.",
                    f'Add "{module}" to quantization_config.ignore.', where=module)  # fmt: skip
    if dtype:
        for name, (_, entry) in sorted(locations.items()):
            if entry.dtype in grid.FLOAT_DTYPES and entry.dtype != dtype and not name.endswith("weight_scale"):
                add(
                    Status.WARN,
                    "dtype",
                    f"{name} is {entry.dtype}, the config's dtype is {dtype}.",
                    "Check the export.",
                    name,
                )
                break
    return ValidateReport(source=source.label, tensors=len(locations), findings=findings)


def validate_checkpoint(source: str, *, revision: str | None = None, hub_api: Any = None) -> ValidateReport:
    """Validate a local directory or hub repo; ``ok`` is False when any finding fails."""
    with closing(open_source(source, revision=revision, hub_api=hub_api)) as opened:
        return validate_source(opened)


def checkpoint_validate(request: ValidateRequest, *, hub_api: Any = None) -> ValidateReport:
    """The findings for the checkpoint a :class:`ValidateRequest` names (``gemmaserve checkpoint validate``)."""
    return validate_checkpoint(request.source, revision=request.revision, hub_api=hub_api)
