"""Check that a 4-bit build's weights are Google's QAT values, tensor by tensor, in row blocks.

The build is dequantized (compressed-tensors pack-quantized, AutoAWQ GEMM, or a
16-bit ``.weight``) and compared with the reference (the bf16
``-qat-q4_0-unquantized`` values), whose grid step per group is recovered with
``grid.recover_grid``. Only the tensors asked for are read; local files by
``os.preadv`` row ranges, hub repos by HTTP range requests. Local GGUF q4_0
files are read through ``gguf.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import BaseModel

from gemmaserve.checkpoint import grid
from gemmaserve.checkpoint.header import SafetensorsHeader, TensorEntry
from gemmaserve.checkpoint.inspect import text_config
from gemmaserve.checkpoint.sources import (
    CheckpointSource,
    HubSource,
    open_source,
    tensor_locations,
)
from gemmaserve.errors import CheckpointError, MalformedCheckpoint, UsageError

Progress = Callable[[str, int, int], None]  # (tensor, bytes done, bytes total)
# Local reads: small blocks keep numpy's temporaries in cache. Hub reads: one range request per 16 MB.
_ROW_BLOCK_BYTES = 1 << 18
_HUB_ROW_BLOCK_BYTES = 1 << 24


class TensorGridResult(BaseModel):
    tensor: str
    build_format: str  # "pack-quantized" | "awq-gemm" | "16-bit"
    shape: list[int]
    values: int
    values_bit_identical: int
    groups: int
    groups_bit_identical: int
    values_off_by_a_level_or_more: int
    share_off_by_a_level_or_more: float
    max_abs_diff: float
    mean_abs_diff: float
    reference_groups_on_grid: int
    reference_groups_peak_not_at_8: int


class GridCheckReport(BaseModel):
    build: str
    reference: str
    group_size: int
    tensors: list[TensorGridResult]
    values: int
    values_bit_identical: int
    groups: int
    groups_bit_identical: int
    values_off_by_a_level_or_more: int
    share_off_by_a_level_or_more: float
    max_abs_diff: float
    mean_abs_diff: float
    verdict: str  # "bit-identical" | "on-grid-rounding" | "off-grid"
    build_bytes_fetched: int
    reference_bytes_fetched: int


Locations = dict[str, tuple[SafetensorsHeader, TensorEntry]]


def quantized_modules(locations: Locations) -> list[str]:
    """Module names that the build stores in 4 bits (or 16-bit ``.weight`` when none are)."""
    found = sorted(
        name.rsplit(".", 1)[0] for name in locations if name.endswith((".weight_packed", ".qweight"))
    )
    return found


def _layer_filter(spec: str) -> set[int]:
    layers: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                layers.update(range(lo, hi + 1))
            else:
                layers.add(int(part))
        except ValueError as exc:
            raise UsageError(f"--layers {spec!r}: expected numbers and ranges like 0,3-5.") from exc
    return layers


def select_modules(locations: Locations, *, tensor: str | None, layers: str | None) -> list[str]:
    modules = quantized_modules(locations)
    if tensor:
        module = re.sub(r"\.(weight|weight_packed|qweight)$", "", tensor)
        if module not in modules and f"{module}.weight" not in locations:
            raise UsageError(
                f"The build has no tensor {tensor!r}.",
                hint=f"4-bit modules it holds include: {', '.join(modules[:5]) or 'none'}",
            )
        return [module]
    if layers:
        wanted = _layer_filter(layers)
        modules = [m for m in modules if (hit := re.search(r"layers\.(\d+)\.", m)) and int(hit.group(1)) in wanted]
    if not modules:
        raise UsageError("No 4-bit tensors to check were found in the build.", hint="Pass --tensor NAME.")
    return modules


def _group_size(config: dict[str, Any] | None) -> int:
    qc = (config or {}).get("quantization_config") or {}
    for group in (qc.get("config_groups") or {}).values():
        size = (group.get("weights") or {}).get("group_size")
        if size:
            return int(size)
    return int(qc.get("group_size") or grid.GROUP_SIZE)


def _float_rows(source: CheckpointSource, loc: tuple[SafetensorsHeader, TensorEntry], r0: int, r1: int) -> np.ndarray:
    header, entry = loc
    if entry.dtype not in grid.FLOAT_DTYPES or len(entry.shape) != 2:
        raise MalformedCheckpoint(f"{entry.name} is {entry.dtype} {list(entry.shape)}, not a 2-D float weight.")
    return grid.decode_values(source.read_rows(header, entry, r0, r1), entry.dtype)


def _block_bytes(*sources: CheckpointSource) -> int:
    return _HUB_ROW_BLOCK_BYTES if any(isinstance(s, HubSource) for s in sources) else _ROW_BLOCK_BYTES


def _need(locations: Locations, name: str, where: str) -> tuple[SafetensorsHeader, TensorEntry]:
    if name not in locations:
        raise MalformedCheckpoint(f"{where} has no tensor {name!r}.", tensor=name)
    return locations[name]


def check_module(
    module: str,
    build: CheckpointSource,
    build_locations: Locations,
    reference: CheckpointSource,
    reference_locations: Locations,
    *,
    group_size: int,
    progress: Progress | None = None,
) -> TensorGridResult:
    ref_loc = _need(reference_locations, f"{module}.weight", f"Reference {reference.label}")
    ref_entry = ref_loc[1]
    rows, cols = ref_entry.shape if len(ref_entry.shape) == 2 else (0, 0)
    if cols % group_size:
        raise MalformedCheckpoint(f"{module}: {cols} input features are not a multiple of {group_size}.")
    counts = grid.GridComparison()
    on_grid = peak_elsewhere = 0

    def compare(build_values: np.ndarray, r0: int, r1: int) -> None:
        nonlocal on_grid, peak_elsewhere
        ref_values = _float_rows(reference, ref_loc, r0, r1)
        fit = grid.recover_grid(ref_values, model_dtype=ref_entry.dtype, group_size=group_size)
        on_grid += int(fit.on_grid.sum())
        peak_elsewhere += int(fit.peak_elsewhere.sum())
        counts.add(build_values, ref_values, fit.steps, group_size)
        if progress:
            progress(module, r1 * ref_entry.row_bytes, ref_entry.nbytes)

    if f"{module}.weight_packed" in build_locations:
        fmt = "pack-quantized"
        packed_loc = build_locations[f"{module}.weight_packed"]
        scale_loc = _need(build_locations, f"{module}.weight_scale", f"Build {build.label}")
        if f"{module}.weight_zero_point" in build_locations:
            raise CheckpointError(f"{module}: asymmetric pack-quantized builds are not supported yet.")
        if packed_loc[1].shape != (rows, cols // 8) or scale_loc[1].shape != (rows, cols // group_size):
            raise MalformedCheckpoint(
                f"{module}: packed {list(packed_loc[1].shape)} / scale {list(scale_loc[1].shape)} do not match "
                f"the reference [{rows}, {cols}] with group {group_size}."
            )
        scale_dtype = scale_loc[1].dtype
        block = max(1, _block_bytes(build, reference) // max(ref_entry.row_bytes, 1))
        for r0 in range(0, rows, block):
            r1 = min(rows, r0 + block)
            packed = build.read_rows(packed_loc[0], packed_loc[1], r0, r1)
            scales = _float_rows(build, scale_loc, r0, r1)
            values = grid.dequantize_pack_quantized(
                packed, scales, cols=cols, group_size=group_size, model_dtype=scale_dtype
            )
            compare(values, r0, r1)
    elif f"{module}.qweight" in build_locations:
        fmt = "awq-gemm"  # packed along outputs: compared whole (bounded by one tensor, not the checkpoint)
        q_loc = build_locations[f"{module}.qweight"]
        z_loc = _need(build_locations, f"{module}.qzeros", f"Build {build.label}")
        s_loc = _need(build_locations, f"{module}.scales", f"Build {build.label}")
        if q_loc[1].shape != (cols, rows // 8):
            raise MalformedCheckpoint(f"{module}: qweight {list(q_loc[1].shape)} does not match [{cols}, {rows // 8}].")
        qweight = build.read_rows(q_loc[0], q_loc[1], 0, cols)
        qzeros = build.read_rows(z_loc[0], z_loc[1], 0, z_loc[1].shape[0])
        scales = _float_rows(build, s_loc, 0, s_loc[1].shape[0])
        awq_group = cols // s_loc[1].shape[0]
        values = grid.dequantize_awq(qweight, qzeros, scales, group_size=awq_group)
        compare(values, 0, rows)
    else:
        fmt = "16-bit"
        loc = _need(build_locations, f"{module}.weight", f"Build {build.label}")
        block = max(1, _block_bytes(build, reference) // max(ref_entry.row_bytes, 1))
        for r0 in range(0, rows, block):
            r1 = min(rows, r0 + block)
            compare(_float_rows(build, loc, r0, r1), r0, r1)
    return _result(module, fmt, rows, cols, counts, on_grid, peak_elsewhere)


def grid_check(
    build: str,
    reference: str,
    *,
    tensor: str | None = None,
    layers: str | None = None,
    hub_api: Any = None,
    progress: Progress | None = None,
) -> GridCheckReport:
    """Compare a 4-bit build with the QAT reference (local paths or hub repo ids).

    Raises:
        UsageError: a tensor or layer selection that matches nothing.
        CheckpointNotFound / MalformedCheckpoint: unreadable sources or inconsistent tensors.
    """
    if build.endswith(".gguf") and os.path.isfile(build):
        return _grid_check_gguf(build, reference, tensor=tensor, layers=layers, hub_api=hub_api, progress=progress)
    build_src = open_source(build, hub_api=hub_api)
    ref_src = open_source(reference, hub_api=hub_api)
    try:
        build_locations = tensor_locations(build_src)
        reference_locations = tensor_locations(ref_src)
        group_size = _group_size(build_src.load_config())
        modules = select_modules(build_locations, tensor=tensor, layers=layers)
        results = [
            check_module(
                m, build_src, build_locations, ref_src, reference_locations, group_size=group_size, progress=progress
            )
            for m in modules
        ]
    finally:
        build_src.close()
        ref_src.close()
    return _summarize(build_src.label, ref_src.label, group_size, results, build_src.bytes_fetched, ref_src.bytes_fetched)


def _summarize(
    build: str, reference: str, group_size: int, results: list[TensorGridResult], build_bytes: int, reference_bytes: int
) -> GridCheckReport:
    values = sum(r.values for r in results)
    off = sum(r.values_off_by_a_level_or_more for r in results)
    identical = sum(r.values_bit_identical for r in results)
    verdict = "bit-identical" if identical == values else ("off-grid" if off else "on-grid-rounding")
    return GridCheckReport(
        build=build,
        reference=reference,
        group_size=group_size,
        tensors=results,
        values=values,
        values_bit_identical=identical,
        groups=sum(r.groups for r in results),
        groups_bit_identical=sum(r.groups_bit_identical for r in results),
        values_off_by_a_level_or_more=off,
        share_off_by_a_level_or_more=off / values if values else 0.0,
        max_abs_diff=max((r.max_abs_diff for r in results), default=0.0),
        mean_abs_diff=(sum(r.mean_abs_diff * r.values for r in results) / values) if values else 0.0,
        verdict=verdict,
        build_bytes_fetched=build_bytes,
        reference_bytes_fetched=reference_bytes,
    )


def _grid_check_gguf(
    build: str, reference: str, *, tensor: str | None, layers: str | None, hub_api: Any, progress: Progress | None
) -> GridCheckReport:
    """GGUF q4_0 builds: the same comparison, blocks of 32 along each row with an fp16 step."""
    from gemmaserve.checkpoint.gguf import (
        GGML_Q4_0,
        hf_module_name,
        read_gguf,
        read_q4_0_rows,
    )

    _, tensors = read_gguf(build)
    by_module = {
        module: t for t in tensors.values() if t.ggml_type == GGML_Q4_0 and (module := hf_module_name(t.name))
    }
    pseudo: Locations = {f"{m}.qweight": None for m in by_module}  # type: ignore[misc]
    modules = select_modules(pseudo, tensor=tensor, layers=layers)
    ref_src = open_source(reference, hub_api=hub_api)
    build_bytes = 0
    results = []
    try:
        reference_locations = tensor_locations(ref_src)
        for module in modules:
            if module not in by_module:
                raise UsageError(f"The GGUF build has no q4_0 tensor for {module}.")
            gt = by_module[module]
            ref_loc = _need(reference_locations, f"{module}.weight", f"Reference {ref_src.label}")
            rows, cols = ref_loc[1].shape
            if gt.dims != (cols, rows):
                raise MalformedCheckpoint(f"{gt.name} is {list(gt.dims)} (GGUF order), the reference [{rows}, {cols}].")
            counts, on_grid, elsewhere = grid.GridComparison(), 0, 0
            block = max(1, _block_bytes(ref_src) // max(ref_loc[1].row_bytes, 1))
            for r0 in range(0, rows, block):
                r1 = min(rows, r0 + block)
                values = read_q4_0_rows(build, gt, r0, r1)
                build_bytes += (r1 - r0) * cols // 32 * 18
                ref_values = _float_rows(ref_src, ref_loc, r0, r1)
                fit = grid.recover_grid(ref_values, model_dtype=ref_loc[1].dtype)
                on_grid += int(fit.on_grid.sum())
                elsewhere += int(fit.peak_elsewhere.sum())
                counts.add(values, ref_values, fit.steps, grid.GROUP_SIZE)
                if progress:
                    progress(module, r1 * ref_loc[1].row_bytes, ref_loc[1].nbytes)
            results.append(_result(module, "gguf-q4_0", rows, cols, counts, on_grid, elsewhere))
    finally:
        ref_src.close()
    return _summarize(build, ref_src.label, grid.GROUP_SIZE, results, build_bytes, ref_src.bytes_fetched)


def _result(
    module: str, fmt: str, rows: int, cols: int, counts: grid.GridComparison, on_grid: int, elsewhere: int
) -> TensorGridResult:
    return TensorGridResult(
        tensor=module,
        build_format=fmt,
        shape=[rows, cols],
        values=counts.values,
        values_bit_identical=counts.values_bit_identical,
        groups=counts.groups,
        groups_bit_identical=counts.groups_bit_identical,
        values_off_by_a_level_or_more=counts.values_off_by_a_level_or_more,
        share_off_by_a_level_or_more=counts.values_off_by_a_level_or_more / counts.values if counts.values else 0.0,
        max_abs_diff=counts.max_abs_diff,
        mean_abs_diff=counts.mean_abs_diff,
        reference_groups_on_grid=on_grid,
        reference_groups_peak_not_at_8=elsewhere,
    )


__all__ = ["GridCheckReport", "TensorGridResult", "grid_check", "text_config"]
