"""Check that a 4-bit build's weights are Google's QAT values, tensor by tensor, in row blocks.

The build is dequantized (compressed-tensors pack-quantized, AutoAWQ GEMM, or a
16-bit ``.weight``) at its own group size and compared with the reference (the
bf16 ``-qat-q4_0-unquantized`` values), whose grid is recovered at the
REFERENCE's group size (detected per tensor, or given), so that "off by a level"
is measured in steps of the grid the build was supposed to keep. A reference that
sits on no 4-bit grid is refused (OffGrid), never given a verdict. Only the tensors asked for are read; local files by
``os.preadv`` row ranges, hub repos by HTTP range requests. Local GGUF q4_0
files are read through ``gguf.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from types import ModuleType
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, Field

from gemmaserve.checkpoint import grid
from gemmaserve.checkpoint.blocks import map_in_order, read_rows_reused, row_blocks, tensor_progress
from gemmaserve.checkpoint.header import SafetensorsHeader, TensorEntry
from gemmaserve.checkpoint.inspect import text_config
from gemmaserve.checkpoint.requests import GridCheckRequest, parse_layers
from gemmaserve.checkpoint.sources import (
    CheckpointSource,
    HubSource,
    open_source,
    tensor_locations,
)
from gemmaserve.errors import CheckpointError, MalformedCheckpoint, OffGrid, UsageError
from gemmaserve.progress import CancelToken, ProgressCallback
from gemmaserve.result_model import ActionResult

Progress = Callable[[str, int, int], None]  # (tensor, bytes done, bytes total)
# Reference bytes per row block. numpy: small blocks keep its temporaries in cache; the compiled
# kernels make one pass, so larger blocks only spread the per-block overhead. Hub: one range
# request per block, a few in flight, so download overlaps compute.
_NUMPY_BLOCK_BYTES = 1 << 18
_COMPILED_BLOCK_BYTES = 1 << 22
_HUB_BLOCK_BYTES = 1 << 23


# The two measures of how far a build moved from the reference grid (docs/checkpoint.md, "What grid-check measures").
OFF_BY_A_LEVEL = (
    "Values at least one step of their reference group away from the reference value (|build - reference| >= "
    "|step|; in an all-zero group, any change): moved by a whole level or more."
)
NEAREST_LEVEL_DIFFERS = (
    "Values whose nearest level of their reference group's grid (rint(value / step) clipped to -8..7, the even "
    "level on a tie) is not the reference value's own: what a 4-bit store of the build on the reference grid "
    "would get wrong. Counts values moved by half a step or more (a tie goes to the even level), so usually more "
    "than the values off by a level; a value past the grid's end keeps the end level. NaN and infinite values are "
    "not counted here (values_not_finite counts them)."
)


class GridMeasures(BaseModel):
    """The comparison's counts and both measures, of one tensor or of the whole build."""

    values: int
    values_bit_identical: int
    groups: int
    groups_bit_identical: int
    values_off_by_a_level_or_more: int = Field(description=OFF_BY_A_LEVEL)
    share_off_by_a_level_or_more: float
    values_nearest_level_differs: int = Field(description=NEAREST_LEVEL_DIFFERS)
    share_nearest_level_differs: float
    # None when any value is NaN or infinite (values_not_finite): no difference is measured on bad values
    max_abs_diff: float | None
    mean_abs_diff: float | None
    values_not_finite: int = 0  # NaN or infinite in the build or the reference

    @classmethod
    def of(cls, counts: grid.GridComparison) -> GridMeasures:
        measured = not counts.values_not_finite
        return GridMeasures(
            **{name: getattr(counts, name) for name in counts.COUNTS},
            share_off_by_a_level_or_more=_share(counts.values_off_by_a_level_or_more, counts.values),
            share_nearest_level_differs=_share(counts.values_nearest_level_differs, counts.values),
            max_abs_diff=counts.max_abs_diff if measured else None,
            mean_abs_diff=counts.mean_abs_diff if measured else None,
        )

    @classmethod
    def total(cls, parts: Sequence[GridMeasures]) -> GridMeasures:
        """The measures of ``parts`` together (a tensor with a bad value has no differences to add: the total
        then has none either)."""
        total = grid.GridComparison()
        for part in parts:
            counts = grid.GridComparison()
            for name in counts.COUNTS:
                setattr(counts, name, getattr(part, name))
            counts.max_abs_diff = part.max_abs_diff or 0.0
            counts.sum_abs_diff = (part.mean_abs_diff or 0.0) * part.values
            total.merge(counts)
        return cls.of(total)

    def measures(self) -> str:
        """Both measures, named, and the bit-identical count: one line for the CLI's verdict and the MCP summary."""
        return (
            f"{self.values_off_by_a_level_or_more:,} of {self.values:,} values "
            f"({self.share_off_by_a_level_or_more:.1%}) off by one reference-grid level or more; "
            f"{self.values_nearest_level_differs:,} ({self.share_nearest_level_differs:.1%}) nearest another "
            f"reference-grid level; {self.values_bit_identical:,} bit-identical"
        )


class TensorGridResult(GridMeasures):
    tensor: str
    build_format: str  # "pack-quantized" | "awq-gemm" | "16-bit" | "gguf-q4_0"
    shape: list[int]
    build_group_size: int | None  # the build's own groups (the row length when per channel); None for 16-bit
    reference_group_size: int  # the groups the reference's grid was recovered with (the row length when per channel)
    reference_dtype: str  # as stored: BF16, F16 or F32
    # the values the grid is recovered in: BF16 for a bf16 export, also one saved as F16 or F32 (.float(), .half())
    reference_grid_dtype: str
    reference_groups_on_grid: int
    reference_groups_peak_not_at_8: int


class GridCheckReport(GridMeasures, ActionResult):
    """``reference_group_size``: the one size every tensor's reference grid has (None when they differ,
    e.g. per channel over rows of different lengths); ``reference_group_size_source``: "detected" or "given"."""

    build: str
    reference: str
    reference_group_size: int | None
    reference_group_size_source: str
    tensors: list[TensorGridResult]
    # "invalid" (a NaN or infinite value in the build or the reference: named per tensor, never a pass)
    # | "off-grid" | "on-grid-rounding" | "bit-identical"
    verdict: str
    build_bytes_fetched: int
    reference_bytes_fetched: int

    def succeeded(self) -> bool:
        """No value off by a level of the reference's grid, and none NaN or infinite (verdict ``invalid``)."""
        return not self.values_off_by_a_level_or_more and self.verdict != "invalid"


Locations = dict[str, tuple[SafetensorsHeader, TensorEntry]]


def quantized_modules(locations: Locations) -> list[str]:
    """Module names that the build stores in 4 bits, or, when none are (a 16-bit build: a dequantized copy,
    a bf16 export), its decoder-layer Linear weights: those a 4-bit grid applies to."""
    from gemmaserve.checkpoint.repack import is_body_linear

    found = sorted(name.rsplit(".", 1)[0] for name in locations if name.endswith((".weight_packed", ".qweight")))
    if found:
        return found
    return sorted(name[: -len(".weight")] for name, (_, entry) in locations.items() if is_body_linear(entry))


def _layer_filter(spec: str) -> set[int]:
    try:
        return parse_layers(spec)
    except ValueError as exc:
        raise UsageError(f"--layers {spec!r}: {exc}") from exc


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
        raise UsageError(
            "No 4-bit tensors, and no 16-bit decoder-layer Linear weights, to check were found in the build.",
            hint="Pass --tensor NAME.",
        )
    return modules


ReferenceGroupSize = int | str | None  # a size, "channel" (one group per row), or None: detect it


def _check_given_group_size(given: ReferenceGroupSize) -> None:
    if given is None or given == "channel":
        return
    if not isinstance(given, int) or isinstance(given, bool) or given < 1:
        raise UsageError(f"--reference-group-size {given!r}: expected a positive number of weights or 'channel'.")


class _BlockResult:
    """What one row block adds to a tensor's result (built on a worker thread, summed on the caller's)."""

    def __init__(self, fit: grid.GridFit | None, comparison: grid.GridComparison, stop: int) -> None:
        self.comparison, self.stop = comparison, stop
        if fit is not None:
            self.on_grid = int(fit.on_grid.sum())
            self.peak_elsewhere = int(fit.peak_elsewhere.sum())
            self.groups = fit.on_grid.size

    @classmethod
    def counted(
        cls, comparison: grid.GridComparison, stop: int, on_grid: int, peak_elsewhere: int, groups: int
    ) -> _BlockResult:
        part = cls(None, comparison, stop)
        part.on_grid, part.peak_elsewhere, part.groups = on_grid, peak_elsewhere, groups
        return part


# The value types a reference stored as each dtype may hold, tried in this order: a bf16 export saved after
# .float() or .half() holds bf16 values, and is read on the bf16 grid; else its own dtype's grid (an F16 export's,
# or values that are exactly q * step in float32).
_GRID_DTYPES = {"BF16": ("BF16",), "F16": ("BF16", "F16"), "F32": ("BF16", "F16", "F32")}


class _ReferenceGrid:
    """Recovers a reference tensor's grid block by block at one group size and in one value type (``dtype``: BF16
    for a bf16 export, also when stored as F16 or F32), both fixed on its first block."""

    def __init__(self, source: CheckpointSource, tensor: str, cols: int, dtype: str, given: ReferenceGroupSize) -> None:
        self.source, self.tensor, self.cols, self.stored_dtype = source, tensor, cols, dtype
        self.dtype: str | None = dtype if len(_GRID_DTYPES.get(dtype, ())) == 1 else None
        self.group_size: int | None = cols if given == "channel" else (given if isinstance(given, int) else None)
        if self.group_size is not None and cols % self.group_size:
            raise UsageError(
                f"--reference-group-size {given}: {tensor} has {cols} input features, not a multiple of it.",
                hint="Leave the option out to detect the reference's group size.",
            )
        self.given = given is not None
        self.on_grid = self.peak_elsewhere = self.groups = 0

    @property
    def decided(self) -> bool:
        return self.group_size is not None and self.dtype is not None

    def fit(self, values: np.ndarray) -> grid.GridFit:
        """The grid of a block of rows; the first block fixes the group size (callers run it before the rest)."""
        group = self.detect(values)
        return grid.recover_grid(values, model_dtype=cast(str, self.dtype), group_size=group, scratch=True)

    def detect(self, values: np.ndarray, decode: bool = False) -> int:
        """The group size (and value type), recognised on the first block's first rows (``decode``: stored values,
        not float32)."""
        if not self.decided:
            sample = values[: grid.DETECT_ROWS]
            self._recognise(grid.decode_values(sample, self.stored_dtype) if decode else sample)
        return cast(int, self.group_size)

    def _recognise(self, sample: np.ndarray) -> None:
        """The first value type whose grid explains the sample: at the given group size, or at the detected one."""
        tried: list[tuple[str, str]] = []  # (value type, share on the grid by group size)
        for dtype in (self.dtype,) if self.dtype else _GRID_DTYPES[self.stored_dtype]:
            if self.group_size is not None:
                fit = grid.recover_grid(sample, model_dtype=dtype, group_size=self.group_size)
                share = float(fit.on_grid.mean()) if fit.on_grid.size else 0.0
                if share >= grid.ON_GRID_MIN_SHARE:
                    self.dtype = dtype
                    return
                tried.append((dtype, f"{self.group_size}: {share:.1%}"))
                continue
            guess = grid.detect_group_size(sample, model_dtype=dtype)
            if guess.group_size is not None:
                self.dtype, self.group_size = dtype, guess.group_size
                return
            tried.append((dtype, ", ".join(f"{size}: {share:.1%}" for size, share in guess.tried.items())))
        failed = "its groups do not reconstruct" if self.given else "no group size reconstructs its groups"
        if self.stored_dtype == "BF16":
            raise self._not_on_grid(f"{failed} (share on the grid by size: {tried[0][1]})")
        reads = [f"as {dtype.lower()} values ({shares})" for dtype, shares in tried]
        not_bf16 = int(np.count_nonzero(np.ascontiguousarray(sample, np.float32).view(np.uint32) & 0xFFFF))
        raise self._not_on_grid(
            f"stored as {self.stored_dtype}, {not_bf16:,} of {sample.size:,} sampled values are not bf16 values, and "
            f"{failed} {', '.join(reads[:-1])} nor {reads[-1]} (share on the grid by size)"
        )

    def count(self, part: _BlockResult) -> None:
        self.on_grid += part.on_grid
        self.peak_elsewhere += part.peak_elsewhere
        self.groups += part.groups

    def finish(self) -> None:
        """Refuse a tensor whose reference groups do not (almost all) sit on the grid: there is no grid to compare to."""
        if self.groups and self.on_grid < grid.ON_GRID_MIN_SHARE * self.groups:
            raise self._not_on_grid(
                f"only {self.on_grid:,} of {self.groups:,} groups of {self.group_size} reconstruct exactly"
            )

    def _not_on_grid(self, detail: str) -> OffGrid:
        how = f"with --reference-group-size {self.group_size}" if self.given else "at any group size"
        widened = (
            ""
            if self.stored_dtype == "BF16"
            else " (a bf16 export saved as F16 or F32 is read as bf16; float32 training weights are not an export)"
        )
        return OffGrid(
            f"Reference {self.source.label} is not on a 4-bit grid {how}: in {self.tensor}, {detail}. "
            "There is no grid to measure the build against, so no verdict is given.",
            hint="Pass the bf16 -qat-q4_0-unquantized export the build was made from as --reference"
            + widened
            + ("" if self.given else ", or --reference-group-size if its groups are another size")
            + ".",
            tensor=self.tensor,
            reference_group_size=self.group_size,
        )


def _float_rows(
    source: CheckpointSource, loc: tuple[SafetensorsHeader, TensorEntry], r0: int, r1: int, scratch: str | None = None
) -> np.ndarray:
    """Rows as float32; with ``scratch``, in this thread's buffer of that name (valid until its next use)."""
    header, entry = loc
    if entry.dtype not in grid.FLOAT_DTYPES or len(entry.shape) != 2:
        raise MalformedCheckpoint(f"{entry.name} is {entry.dtype} {list(entry.shape)}, not a 2-D float weight.")
    return grid.decode_values(source.read_rows(header, entry, r0, r1), entry.dtype, scratch=scratch)


def _block_rows(entry: TensorEntry, *sources: CheckpointSource) -> int:
    if any(isinstance(s, HubSource) for s in sources):
        size = _HUB_BLOCK_BYTES
    else:
        size = _NUMPY_BLOCK_BYTES if grid.kernels() is None else _COMPILED_BLOCK_BYTES
    return max(1, size // max(entry.row_bytes, 1))


def _run_blocks(
    spans: list[tuple[int, int]], work: Callable[[tuple[int, int]], _BlockResult], ref_grid: _ReferenceGrid,
    counts: grid.GridComparison, report: Callable[[int], None],
) -> None:  # fmt: skip
    """The first block alone (it may fix the reference's group size), then the rest on worker threads, summed in order."""
    if not spans:
        return
    for part in chain([work(spans[0])], map_in_order(work, spans[1:])):
        ref_grid.count(part)
        counts.merge(part.comparison)
        report(part.stop)


def _spans(rows: int, rows_per_block: int, ref_grid: _ReferenceGrid) -> list[tuple[int, int]]:
    """Row blocks; when the group size is still to detect, the first is only the rows detection samples, since it
    runs alone (the others need its answer), and a whole block there would keep the other cores idle."""
    if ref_grid.decided or rows <= grid.DETECT_ROWS:
        return row_blocks(rows, rows_per_block)
    return [(0, grid.DETECT_ROWS)] + [
        (r0 + grid.DETECT_ROWS, r1 + grid.DETECT_ROWS) for r0, r1 in row_blocks(rows - grid.DETECT_ROWS, rows_per_block)
    ]


def _as_bf16_bits(values: np.ndarray) -> np.ndarray | None:
    """float32 values' bf16 bits when every one is a bf16 value (its low 16 bits zero), else None."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
    if np.count_nonzero(bits & np.uint32(0xFFFF)):
        return None
    return (bits >> np.uint32(16)).astype(np.uint16)


def _need(locations: Locations, name: str, where: str) -> tuple[SafetensorsHeader, TensorEntry]:
    if name not in locations:
        raise MalformedCheckpoint(f"{where} has no tensor {name!r}.", tensor=name)
    return locations[name]


def _need_dtype(
    source: CheckpointSource, loc: tuple[SafetensorsHeader, TensorEntry], dtypes: tuple[str, ...], holds: str
) -> None:
    """Refuse a tensor stored in another dtype: its bytes read as these would give a verdict on garbage."""
    header, entry = loc
    if entry.dtype not in dtypes:
        raise MalformedCheckpoint(
            f"Build {source.label}, {header.file}: {entry.name} is {entry.dtype}; it should hold {holds} "
            f"({' or '.join(dtypes)}). No verdict is given on bytes read as another type.",
            file=header.file,
            tensor=entry.name,
        )


def _build_group_size(module: str, what: str, cols: int, scale_groups: int) -> int:
    if scale_groups < 1 or cols % scale_groups:
        raise MalformedCheckpoint(
            f"{module}: {what} has {scale_groups} groups per row, which do not divide {cols} inputs."
        )
    return cols // scale_groups


@dataclass(frozen=True)
class OpenedCheckpoint:
    """A checkpoint opened for reading, with where each of its tensors lies."""

    source: CheckpointSource
    locations: Locations


@dataclass(frozen=True)
class GridScope:
    """Which part of a build a grid check compares (one ``tensor``, or the decoder ``layers``; default all its 4-bit
    tensors) and at which reference group size (a number, or "channel"; None detects it per tensor)."""

    tensor: str | None = None
    layers: str | None = None
    reference_group_size: ReferenceGroupSize = None


def check_module(
    module: str,
    build_side: OpenedCheckpoint,
    reference_side: OpenedCheckpoint,
    *,
    reference_group_size: ReferenceGroupSize = None,
    progress: Progress | None = None,
) -> TensorGridResult:
    build, build_locations = build_side.source, build_side.locations
    reference, reference_locations = reference_side.source, reference_side.locations
    ref_loc = _need(reference_locations, f"{module}.weight", f"Reference {reference.label}")
    ref_entry = ref_loc[1]
    if ref_entry.dtype not in grid.FLOAT_DTYPES or len(ref_entry.shape) != 2:
        raise MalformedCheckpoint(
            f"{ref_entry.name} is {ref_entry.dtype} {list(ref_entry.shape)}, not a 2-D float weight."
        )
    rows, cols = ref_entry.shape
    counts = grid.GridComparison()
    ref_grid = _ReferenceGrid(reference, module, cols, ref_entry.dtype, reference_group_size)
    spans = _spans(rows, _block_rows(ref_entry, build, reference), ref_grid)

    def report(stop: int) -> None:
        if progress:
            progress(module, stop * ref_entry.row_bytes, ref_entry.nbytes)

    def compare_values(build_values: Callable[[int, int], np.ndarray]) -> Callable[[tuple[int, int]], _BlockResult]:
        def work(span: tuple[int, int]) -> _BlockResult:
            r0, r1 = span
            values = build_values(r0, r1)
            ref_values = _float_rows(reference, ref_loc, r0, r1, "reference")
            fit = ref_grid.fit(ref_values)
            part = grid.GridComparison()
            part.add(values, ref_values, fit.steps, _fit_group(fit))
            return _BlockResult(fit, part, r1)

        return work

    if f"{module}.weight_packed" in build_locations:
        fmt = "pack-quantized"
        packed_loc = build_locations[f"{module}.weight_packed"]
        scale_loc = _need(build_locations, f"{module}.weight_scale", f"Build {build.label}")
        if f"{module}.weight_zero_point" in build_locations:
            raise CheckpointError(f"{module}: asymmetric pack-quantized builds are not supported yet.")
        scale_shape = scale_loc[1].shape
        _need_dtype(build, packed_loc, ("I32",), "packed int4 words")
        _need_dtype(build, scale_loc, tuple(grid.FLOAT_DTYPES), "a float scale per group")
        if packed_loc[1].shape != (rows, cols // 8) or len(scale_shape) != 2 or scale_shape[0] != rows:
            raise MalformedCheckpoint(
                f"{module}: packed {list(packed_loc[1].shape)} / scale {list(scale_shape)} do not match "
                f"the reference [{rows}, {cols}]."
            )
        build_group = _build_group_size(module, "weight_scale", cols, scale_shape[1])
        scale_dtype = scale_loc[1].dtype
        # A reference stored as F16 or F32 may hold bf16 values (its first block tells): the one-pass path then too.
        fast = grid.fused_bf16("BF16", scale_dtype) if build_group % 32 == 0 else None

        def work_fused(span: tuple[int, int]) -> _BlockResult:
            """One pass over the stored bits (reference and build), read into this thread's reused buffers."""
            r0, r1 = span
            ref_bits = read_rows_reused(reference, ref_loc[0], ref_loc[1], r0, r1, "reference bits")
            group = ref_grid.detect(ref_bits, decode=True)
            if ref_entry.dtype != "BF16":
                ref_values = grid.decode_values(ref_bits, ref_entry.dtype)
                bf16_bits = _as_bf16_bits(ref_values) if ref_grid.dtype == "BF16" else None
                if bf16_bits is None:  # not bf16 values (not all): compared stage by stage, on the values as stored
                    return work_packed(span, ref_values)
                ref_bits = bf16_bits
            if group % 32:  # groups the one-pass kernel does not take: the rows already read, compared stage by stage
                return work_packed(span, grid.decode_values(ref_bits, "BF16"))
            packed = read_rows_reused(build, packed_loc[0], packed_loc[1], r0, r1, "packed bits")
            scales = read_rows_reused(build, scale_loc[0], scale_loc[1], r0, r1, "scale bits")
            counts, on_grid, peak_elsewhere = grid.compare_packed_block_bf16(
                cast(ModuleType, fast), ref_bits, group, packed, scales, build_group
            )
            return _BlockResult.counted(counts, r1, on_grid, peak_elsewhere, ref_bits.size // group)

        def work_packed(span: tuple[int, int], ref_values: np.ndarray | None = None) -> _BlockResult:
            r0, r1 = span
            packed = build.read_rows(packed_loc[0], packed_loc[1], r0, r1)
            scales = _float_rows(build, scale_loc, r0, r1, "scales")
            if ref_values is None:
                ref_values = _float_rows(reference, ref_loc, r0, r1, "reference")
            fit = ref_grid.fit(ref_values)
            part = grid.GridComparison()
            part.add_packed(
                grid.PackedWeights(packed, scales, build_group, scale_dtype), ref_values, fit.steps, _fit_group(fit)
            )
            return _BlockResult(fit, part, r1)

        _run_blocks(spans, work_packed if fast is None else work_fused, ref_grid, counts, report)
    elif f"{module}.qweight" in build_locations:
        fmt = "awq-gemm"  # packed along outputs: compared whole (bounded by one tensor, not the checkpoint)
        q_loc = build_locations[f"{module}.qweight"]
        z_loc = _need(build_locations, f"{module}.qzeros", f"Build {build.label}")
        s_loc = _need(build_locations, f"{module}.scales", f"Build {build.label}")
        _need_dtype(build, q_loc, ("I32",), "packed int4 words")
        _need_dtype(build, z_loc, ("I32",), "packed int4 zero points")
        _need_dtype(build, s_loc, tuple(grid.FLOAT_DTYPES), "a float scale per group")
        if q_loc[1].shape != (cols, rows // 8):
            raise MalformedCheckpoint(f"{module}: qweight {list(q_loc[1].shape)} does not match [{cols}, {rows // 8}].")
        qweight = build.read_rows(q_loc[0], q_loc[1], 0, cols)
        qzeros = build.read_rows(z_loc[0], z_loc[1], 0, z_loc[1].shape[0])
        scales = _float_rows(build, s_loc, 0, s_loc[1].shape[0])
        build_group = _build_group_size(module, "scales", cols, s_loc[1].shape[0])
        values = grid.dequantize_awq(qweight, qzeros, scales, group_size=build_group)
        _run_blocks(spans, compare_values(lambda r0, r1: values[r0:r1]), ref_grid, counts, report)
    else:
        fmt, build_group = "16-bit", None
        loc = _need(build_locations, f"{module}.weight", f"Build {build.label}")
        _run_blocks(
            spans, compare_values(lambda r0, r1: _float_rows(build, loc, r0, r1, "build")), ref_grid, counts, report
        )
    ref_grid.finish()
    return _result(module, fmt, (rows, cols), build_group, ref_grid, counts)


def grid_check(
    build: str, reference: str, scope: GridScope = GridScope(), *, hub_api: Any = None, progress: Progress | None = None
) -> GridCheckReport:
    """Compare a 4-bit build with the QAT reference (local paths or hub repo ids).

    ``scope``: the tensors compared and the reference grid's group size (:class:`GridScope`).

    Raises:
        UsageError: a tensor or layer selection that matches nothing; a group size that does not divide a row.
        OffGrid: the reference is not on a 4-bit grid (at the given group size, or at any).
        CheckpointNotFound / MalformedCheckpoint: unreadable sources or inconsistent tensors.
    """
    reference_group_size = scope.reference_group_size
    _check_given_group_size(reference_group_size)
    if build.endswith(".gguf") and os.path.isfile(build):
        return _grid_check_gguf(build, reference, scope, hub_api, progress)
    build_src = open_source(build, hub_api=hub_api)
    ref_src = open_source(reference, hub_api=hub_api)
    try:
        build_locations = tensor_locations(build_src)
        reference_locations = tensor_locations(ref_src)
        modules = select_modules(build_locations, tensor=scope.tensor, layers=scope.layers)
        build_side = OpenedCheckpoint(build_src, build_locations)
        reference_side = OpenedCheckpoint(ref_src, reference_locations)
        results = [
            check_module(m, build_side, reference_side, reference_group_size=reference_group_size, progress=progress)
            for m in modules
        ]
    finally:
        build_src.close()
        ref_src.close()
    source = "detected" if reference_group_size is None else "given"
    return _summarize(build_src.label, ref_src.label, source, results, build_src.bytes_fetched, ref_src.bytes_fetched)


def checkpoint_grid_check(
    request: GridCheckRequest,
    *,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    hub_api: Any = None,
) -> GridCheckReport:
    """The grid check a :class:`GridCheckRequest` asks for (``gemmaserve checkpoint grid-check``).

    ``progress`` gets one "checking" event per row block (bytes of the reference read so far, of the
    tensor's total); ``cancel`` stops the check between two blocks (:class:`~gemmaserve.progress.Cancelled`).
    Raises as :func:`grid_check`.
    """
    scope = GridScope(request.tensor, request.layers, request.reference_group_size)
    return grid_check(
        request.build, request.reference, scope, hub_api=hub_api, progress=tensor_progress(progress, cancel, "checking")
    )


def _summarize(
    build: str, reference: str, source: str, results: list[TensorGridResult], build_bytes: int, reference_bytes: int
) -> GridCheckReport:
    total = GridMeasures.total(results)
    if total.values_not_finite:
        verdict = "invalid"
    elif total.values_bit_identical == total.values:
        verdict = "bit-identical"
    else:
        verdict = "off-grid" if total.values_off_by_a_level_or_more else "on-grid-rounding"
    sizes = {r.reference_group_size for r in results}
    return GridCheckReport(
        **total.model_dump(),
        build=build,
        reference=reference,
        reference_group_size=sizes.pop() if len(sizes) == 1 else None,
        reference_group_size_source=source,
        tensors=results,
        verdict=verdict,
        build_bytes_fetched=build_bytes,
        reference_bytes_fetched=reference_bytes,
    )


def _grid_check_gguf(
    build: str, reference: str, scope: GridScope, hub_api: Any, progress: Progress | None
) -> GridCheckReport:
    """GGUF q4_0 builds: the same comparison, blocks of 32 along each row with an fp16 step."""
    reference_group_size = scope.reference_group_size
    from gemmaserve.checkpoint.gguf import (
        GGML_Q4_0,
        hf_module_name,
        read_gguf,
        read_q4_0_rows,
    )

    _, tensors = read_gguf(build)
    by_module = {module: t for t in tensors.values() if t.ggml_type == GGML_Q4_0 and (module := hf_module_name(t.name))}
    pseudo: Locations = {f"{m}.qweight": None for m in by_module}  # type: ignore[misc]
    modules = select_modules(pseudo, tensor=scope.tensor, layers=scope.layers)
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
            counts = grid.GridComparison()
            ref_grid = _ReferenceGrid(ref_src, module, cols, ref_loc[1].dtype, reference_group_size)
            for r0, r1 in row_blocks(rows, _block_rows(ref_loc[1], ref_src)):
                values = read_q4_0_rows(build, gt, r0, r1)
                build_bytes += (r1 - r0) * cols // 32 * 18
                ref_values = _float_rows(ref_src, ref_loc, r0, r1)
                fit = ref_grid.fit(ref_values)
                counts.add(values, ref_values, fit.steps, _fit_group(fit))
                ref_grid.count(_BlockResult(fit, grid.GridComparison(), r1))
                if progress:
                    progress(module, r1 * ref_loc[1].row_bytes, ref_loc[1].nbytes)
            ref_grid.finish()
            results.append(_result(module, "gguf-q4_0", (rows, cols), 32, ref_grid, counts))
    finally:
        ref_src.close()
    source = "detected" if reference_group_size is None else "given"
    return _summarize(build, ref_src.label, source, results, build_bytes, ref_src.bytes_fetched)


def _fit_group(fit: grid.GridFit) -> int:
    return int(fit.levels.shape[1] // fit.steps.shape[1])


def _result(
    module: str, fmt: str, shape: tuple[int, int], build_group: int | None, ref_grid: _ReferenceGrid,
    counts: grid.GridComparison,
) -> TensorGridResult:  # fmt: skip
    rows, cols = shape
    return TensorGridResult(
        **GridMeasures.of(counts).model_dump(),
        tensor=module,
        build_format=fmt,
        shape=[rows, cols],
        build_group_size=build_group,
        reference_group_size=ref_grid.group_size or cols,
        reference_dtype=ref_grid.stored_dtype,
        reference_grid_dtype=ref_grid.dtype or ref_grid.stored_dtype,
        reference_groups_on_grid=ref_grid.on_grid,
        reference_groups_peak_not_at_8=ref_grid.peak_elsewhere,
    )


def _share(count: int, values: int) -> float:
    return count / values if values else 0.0


__all__ = ["GridCheckReport", "TensorGridResult", "grid_check", "text_config"]
