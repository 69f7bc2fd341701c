"""Repack ``-qat-q4_0-unquantized`` (bf16 values on the QAT grid) into compressed-tensors W4A16, losslessly.

Streams each tensor in row blocks (memory bounded by the block, not the
checkpoint), recovers every group's exact step, and refuses (OffGrid) when any
group is off the grid. Output goes to a temporary sibling directory renamed
into place at the end, with a manifest (SHA-256 of every file and the grid
report) written last; an interrupted or refused repack leaves nothing under OUT.
Shards with nothing to change are hard-linked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import numpy as np

from gemmaserve.checkpoint import grid
from gemmaserve.checkpoint.blocks import map_in_order, read_rows_reused, row_blocks, submit, tensor_progress
from gemmaserve.checkpoint.header import DTYPE_BYTES, SafetensorsHeader, TensorEntry
from gemmaserve.checkpoint.inspect import classify_tensor
from gemmaserve.checkpoint.requests import RepackRequest
from gemmaserve.checkpoint.sources import INDEX_FILE, LocalSource
from gemmaserve.errors import CheckpointError, OffGrid, UsageError
from gemmaserve.progress import CancelToken, ProgressCallback
from gemmaserve.result_model import ActionResult

MANIFEST_FILE = "gemmaserve-manifest.json"
_ROW_BLOCK_BYTES = 1 << 20  # numpy: its temporaries stay in cache
_COMPILED_BLOCK_BYTES = 1 << 22  # compiled kernels: one pass, larger blocks spread the per-block overhead
Progress = Callable[[str, int, int], None]
_TOWERS = ("vision_tower", "audio_tower")
_MODALITY_KEY = re.compile(r"vision|audio|image|video|^bo[ia]_|^eo[ia]_")


class RepackReport(ActionResult):
    source: str
    output: str
    text_only: bool
    int4_embeddings: bool
    tensors_quantized: int
    values_quantized: int
    values_bit_exact: int
    groups: int
    groups_peak_not_at_8: int
    tensors_kept: int
    tensors_dropped: int
    shards_written: int
    shards_linked: int
    output_bytes: int
    ignore: list[str]
    manifest: str


def is_body_linear(entry: TensorEntry) -> bool:
    """A decoder-layer Linear weight in 16 or 32 bits: what a 4-bit QAT grid applies to."""
    return (
        classify_tensor(entry.name) == "transformer_body"
        and re.search(r"(^|\.)layers\.\d+\.", entry.name) is not None
        and entry.name.endswith(".weight")
        and "norm" not in entry.name.rsplit(".", 2)[-2]
        and ".router." not in entry.name  # vLLM's MoE router (GateLinear) stays 16-bit
        and len(entry.shape) == 2
        and entry.dtype in grid.FLOAT_DTYPES
    )


def plan_tensor(entry: TensorEntry, *, text_only: bool, int4_embeddings: bool) -> str:
    """ "drop", "quantize" or "keep" for one source tensor."""
    part = classify_tensor(entry.name)
    if text_only and part in _TOWERS:
        return "drop"
    if is_body_linear(entry) and entry.shape[1] % grid.GROUP_SIZE == 0:
        return "quantize"
    if (
        int4_embeddings
        and part == "per_layer_embedding"
        and len(entry.shape) == 2
        and entry.shape[1] % grid.GROUP_SIZE == 0
    ):
        return "quantize"
    return "keep"


def ignore_list(entries: list[TensorEntry], plans: dict[str, str]) -> list[str]:
    """Every Linear kept in 16 bits, by module name (vLLM fails to load if one is missing), plus lm_head."""
    modules = {"lm_head"}
    for entry in entries:
        if plans[entry.name] != "keep" or not entry.name.endswith(".weight") or len(entry.shape) != 2:
            continue
        module = entry.name[: -len(".weight")]
        leaf = module.rsplit(".", 1)[-1]
        if "embed_tokens" in leaf or "norm" in leaf or entry.dtype not in grid.FLOAT_DTYPES:
            continue
        modules.add(module)
    return sorted(modules)


def quantization_config(ignore: list[str], *, embedding_targets: list[str]) -> dict[str, Any]:
    weights = {
        "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": grid.GROUP_SIZE,
        "dynamic": False, "actorder": None, "observer": None, "observer_kwargs": {},
    }  # fmt: skip
    groups: dict[str, Any] = {
        "group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None,
                    "output_activations": None, "format": "pack-quantized"},
    }  # fmt: skip
    if embedding_targets:
        groups["group_1"] = {**groups["group_0"], "targets": embedding_targets}
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": groups,
        "ignore": ignore,
        "kv_cache_scheme": None,
        "global_compression_ratio": None,
    }


def text_only_config(config: dict[str, Any]) -> dict[str, Any]:
    """A text-only causal LM config: the text_config lifted to the top, Google's other fields kept."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise CheckpointError("config.json has no text_config: it is already text-only.", hint="Drop --text-only.")
    merged = {k: v for k, v in config.items() if k not in ("text_config", "architectures", "model_type")}
    merged = {k: v for k, v in merged.items() if not _MODALITY_KEY.search(k)}
    merged.update(text)
    merged["architectures"] = ["Gemma4ForCausalLM"]
    merged["model_type"] = text.get("model_type", "gemma4_text")
    return merged


class _Layout:
    """The output header of one shard: tensors in name order, contiguous data."""

    def __init__(self) -> None:
        self.specs: dict[str, tuple[str, list[int]]] = {}

    def add(self, name: str, dtype: str, shape: list[int]) -> None:
        self.specs[name] = (dtype, shape)

    def header(self) -> tuple[bytes, dict[str, int]]:
        offsets: dict[str, int] = {}
        raw: dict[str, Any] = {}
        cursor = 0
        for name in sorted(self.specs):
            dtype, shape = self.specs[name]
            size = int(np.prod(shape, dtype=np.int64)) * DTYPE_BYTES[dtype]
            raw[name] = {"dtype": dtype, "shape": shape, "data_offsets": [cursor, cursor + size]}
            offsets[name] = cursor
            cursor += size
        raw["__metadata__"] = {"format": "pt"}
        text = json.dumps(raw, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        return text, offsets


def _pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _bytes_of(array: np.ndarray) -> memoryview:
    """The array's bytes without a copy (``tobytes`` copies each block once more)."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).data


class _Stats:
    def __init__(self) -> None:
        self.tensors = self.values = self.bit_exact = self.groups = self.peak_elsewhere = 0


def _scale_dtype_for(src: LocalSource, header: SafetensorsHeader, entry: TensorEntry) -> str:
    """The model dtype if every group's step fits it exactly, else F32 (one read of the tensor)."""
    block = max(1, _ROW_BLOCK_BYTES // max(entry.row_bytes, 1))
    for r0 in range(0, entry.shape[0], block):
        values = grid.decode_values(src.read_rows(header, entry, r0, min(entry.shape[0], r0 + block)), entry.dtype)
        if not grid.recover_grid(values, model_dtype=entry.dtype).on_grid.all():
            return "F32"
    return entry.dtype


def _quantize_block_rows(entry: TensorEntry) -> int:
    size = _ROW_BLOCK_BYTES if grid.kernels() is None else _COMPILED_BLOCK_BYTES
    return max(1, size // max(entry.row_bytes, 1))


@dataclass(frozen=True)
class _ShardOut:
    """An output shard being written: its file descriptor, where its data starts, and each tensor's offset there."""

    fd: int
    base: int
    offsets: dict[str, int]

    def write(self, data: Any, tensor: str, at: int = 0) -> None:
        """``data`` at byte ``at`` of ``tensor``'s data."""
        _pwrite_all(self.fd, data, self.base + self.offsets[tensor] + at)


def _write_quantized(
    shard: tuple[LocalSource, SafetensorsHeader], entry: TensorEntry, scale_dtype: str, out: _ShardOut,
    stats: _Stats, progress: Progress | None,
) -> None:  # fmt: skip
    """Pack one tensor of ``shard`` (its source and header) block by block on worker threads (each writes its
    own byte ranges); stats and progress are summed in block order on this thread, and the first off-grid block
    in order is the one reported."""
    src, header = shard
    rows, cols = entry.shape
    module = entry.name[: -len(".weight")]
    packed_row, scale_row = cols // 8 * 4, cols // grid.GROUP_SIZE * DTYPE_BYTES[scale_dtype]

    fast = grid.fused_bf16(entry.dtype, scale_dtype)

    def off_grid(r0: int, r1: int, bad: np.ndarray) -> OffGrid:
        return OffGrid(
            f"{entry.name}: {len(bad):,} group(s) in rows {r0}-{r1 - 1} are off the QAT q4_0 grid "
            f"(first: row {r0 + int(bad[0][0])}, group {int(bad[0][1])}). Nothing was written.",
            hint="This is not a -qat-q4_0-unquantized checkpoint, or it was modified; a lossless repack is impossible.",
            tensor=entry.name,
            groups_off_grid=len(bad),
        )

    def work_fused(span: tuple[int, int]) -> tuple[int, int, int, int, int]:
        """One pass from the bf16 bits to the packed words and scales, all in this thread's reused buffers."""
        r0, r1 = span
        bits = read_rows_reused(src, header, entry, r0, r1, "value bits")
        packed = grid._scratch("packed", bits.size // 2, np.uint8)
        scales = grid._scratch("scales", bits.size // grid.GROUP_SIZE, np.uint16)
        block = grid.pack_block_bf16(cast(ModuleType, fast), bits, packed, scales)
        if len(block.off_grid):
            groups_per_row = cols // grid.GROUP_SIZE
            raise off_grid(r0, r1, np.stack(np.divmod(block.off_grid, groups_per_row), axis=1))
        out.write(packed.data, f"{module}.weight_packed", r0 * packed_row)
        out.write(scales.view(np.uint8).data, f"{module}.weight_scale", r0 * scale_row)
        return bits.size, block.bit_exact, block.groups, block.peak_elsewhere, r1

    def work(span: tuple[int, int]) -> tuple[int, int, int, int, int]:
        r0, r1 = span
        values = grid.decode_values(src.read_rows(header, entry, r0, r1), entry.dtype, scratch="values")
        fit = grid.recover_grid(values, model_dtype=entry.dtype, scale_dtype=scale_dtype, scratch=True)
        if not fit.on_grid.all():
            raise off_grid(r0, r1, np.argwhere(~fit.on_grid))
        packed = grid.pack_int4(fit.levels).astype("<i4", copy=False)
        out.write(_bytes_of(packed), f"{module}.weight_packed", r0 * packed_row)
        scales = grid.encode_values(fit.steps, scale_dtype)
        out.write(_bytes_of(scales), f"{module}.weight_scale", r0 * scale_row)
        return values.size, int(fit.bit_exact.sum()), fit.on_grid.size, int(fit.peak_elsewhere.sum()), r1

    for n_values, bit_exact, groups, peak_elsewhere, stop in map_in_order(
        work if fast is None else work_fused, row_blocks(rows, _quantize_block_rows(entry))
    ):
        stats.values += n_values
        stats.bit_exact += bit_exact
        stats.groups += groups
        stats.peak_elsewhere += peak_elsewhere
        if progress:
            progress(entry.name, stop * entry.row_bytes, entry.nbytes)
    out.write(np.array([rows, cols], dtype="<i8").tobytes(), f"{module}.weight_shape")
    stats.tensors += 1


def _copy_tensor(src: LocalSource, header: SafetensorsHeader, entry: TensorEntry, fd: int, offset: int) -> None:
    rows = entry.shape[0] if entry.shape else 1
    if not entry.shape:
        _pwrite_all(
            fd, src.read_range(entry.file, 8 + (header.header_bytes or 0) + entry.data_begin, entry.nbytes), offset
        )
        return
    block = max(1, _ROW_BLOCK_BYTES // max(entry.row_bytes, 1))
    for r0 in range(0, rows, block):
        r1 = min(rows, r0 + block)
        _pwrite_all(fd, _bytes_of(src.read_rows(header, entry, r0, r1)), offset + r0 * entry.row_bytes)


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:  # file_digest reads into one reused buffer (read() allocates each chunk)
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _sync_and_hash(fd: int, path: Path) -> str:
    """A written shard made durable (fsync) and hashed, on a block thread while the next shard is packed."""
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return _sha256(path)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def repack_checkpoint(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    text_only: bool = False,
    int4_embeddings: bool = False,
    progress: Progress | None = None,
) -> RepackReport:
    """Repack a local ``-qat-q4_0-unquantized`` directory into compressed-tensors W4A16 at ``output``.

    Raises:
        UsageError: ``output`` exists, or the source is not a directory with a config.
        OffGrid: a group is off the QAT grid (nothing is left under ``output``).
    """
    out = Path(output)
    if out.exists():
        raise UsageError(f"{out} already exists.", hint="Pick a new output directory or remove it.")
    src = LocalSource(source)
    config = src.load_config()
    if not src.path.is_dir() or config is None:
        raise UsageError(f"{src.path} is not a checkpoint directory with a config.json.")
    headers = src.load_headers()
    entries = [e for h in headers.values() for e in h.tensors.values()]
    plans = {e.name: plan_tensor(e, text_only=text_only, int4_embeddings=int4_embeddings) for e in entries}
    if not any(p == "quantize" for p in plans.values()):
        raise CheckpointError(f"{src.path} has no 16-bit decoder-layer Linear weights to pack.")
    ignore = ignore_list(entries, plans)
    embedding_targets = sorted(
        e.name[: -len(".weight")]
        for e in entries
        if plans[e.name] == "quantize" and classify_tensor(e.name) == "per_layer_embedding"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    # mkdtemp makes it 0700; the finished checkpoint is a directory like any other the user makes
    tmp.chmod(0o777 & ~_umask())
    stats = _Stats()
    written = linked = 0
    finishing: dict[str, Future[str]] = {}  # shards written: their fsync and SHA-256, under way
    try:
        weight_map: dict[str, str] = {}
        total_size = 0
        for shard, header in headers.items():
            shard_entries = sorted(header.tensors.values(), key=lambda e: e.name)
            kept = [e for e in shard_entries if plans[e.name] != "drop"]
            if not kept:
                continue
            for e in kept:
                if plans[e.name] == "quantize":
                    module = e.name[: -len(".weight")]
                    weight_map.update(
                        {f"{module}.{s}": shard for s in ("weight_packed", "weight_scale", "weight_shape")}
                    )
                else:
                    weight_map[e.name] = shard
            if all(plans[e.name] == "keep" for e in shard_entries):
                _link_or_copy(src.root / shard, tmp / shard)
                total_size += header.data_bytes
                linked += 1
                continue
            layout, scale_dtypes = _Layout(), {}
            for e in kept:
                if plans[e.name] == "quantize":
                    module = e.name[: -len(".weight")]
                    is_embedding = classify_tensor(e.name) == "per_layer_embedding"
                    scale_dtypes[e.name] = _scale_dtype_for(src, header, e) if is_embedding else e.dtype
                    rows, cols = e.shape
                    layout.add(f"{module}.weight_packed", "I32", [rows, cols // 8])
                    layout.add(f"{module}.weight_scale", scale_dtypes[e.name], [rows, cols // grid.GROUP_SIZE])
                    layout.add(f"{module}.weight_shape", "I64", [2])
                else:
                    layout.add(e.name, e.dtype, list(e.shape))
            header_json, offsets = layout.header()
            base = 8 + len(header_json)
            fd = os.open(tmp / shard, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            shard_out = _ShardOut(fd, base, offsets)
            try:
                _pwrite_all(fd, len(header_json).to_bytes(8, "little") + header_json, 0)
                for e in kept:
                    if plans[e.name] == "quantize":
                        _write_quantized((src, header), e, scale_dtypes[e.name], shard_out, stats, progress)
                    else:
                        _copy_tensor(src, header, e, fd, base + offsets[e.name])
            except BaseException:
                os.close(fd)
                raise
            finishing[shard] = submit(_sync_and_hash, fd, tmp / shard)  # it closes fd
            total_size += os.path.getsize(tmp / shard) - base
            written += 1
        new_config = text_only_config(config) if text_only else dict(config)
        new_config["quantization_config"] = quantization_config(ignore, embedding_targets=embedding_targets)
        (tmp / "config.json").write_text(json.dumps(new_config, indent=2) + "\n")
        index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
        (tmp / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
        for extra in sorted(src.root.iterdir()):
            if (
                extra.is_file()
                and extra.name not in headers
                and extra.name not in ("config.json", INDEX_FILE, MANIFEST_FILE)
            ):
                _link_or_copy(extra, tmp / extra.name)
        paths = sorted(tmp.iterdir())
        # hashlib releases the GIL on large buffers: one file per thread.
        rest = [p for p in paths if p.name not in finishing]
        digests = dict(zip((p.name for p in rest), map_in_order(_sha256, rest), strict=True))
        digests.update({name: future.result() for name, future in finishing.items()})
        files: dict[str, dict[str, Any]] = {
            p.name: {"bytes": p.stat().st_size, "sha256": digests[p.name]} for p in paths
        }
        report = RepackReport(
            source=str(src.path), output=str(out), text_only=text_only, int4_embeddings=int4_embeddings,
            tensors_quantized=stats.tensors, values_quantized=stats.values, values_bit_exact=stats.bit_exact,
            groups=stats.groups, groups_peak_not_at_8=stats.peak_elsewhere,
            tensors_kept=sum(p == "keep" for p in plans.values()), tensors_dropped=sum(p == "drop" for p in plans.values()),
            shards_written=written, shards_linked=linked, output_bytes=sum(int(f["bytes"]) for f in files.values()),
            ignore=ignore, manifest=str(out / MANIFEST_FILE),
        )  # fmt: skip
        manifest = {"format": "gemmaserve-repack-manifest/1", "files": files, "report": report.model_dump(mode="json")}
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        os.rename(tmp, out)
        return report
    except BaseException:
        for future in finishing.values():  # no thread may still hold a file under tmp (each closes its fd)
            try:
                future.result()
            except BaseException:  # the first error already propagates
                pass
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        src.close()


def checkpoint_repack(
    request: RepackRequest, *, progress: ProgressCallback | None = None, cancel: CancelToken | None = None
) -> RepackReport:
    """The repack a :class:`RepackRequest` asks for (``gemmaserve checkpoint repack``).

    ``progress`` gets one "packing" event per row block; ``cancel`` stops between two blocks, and a
    cancelled repack leaves nothing under ``out``. Raises as :func:`repack_checkpoint` (``out`` exists:
    :class:`~gemmaserve.errors.UsageError`, never an overwrite).
    """
    return repack_checkpoint(
        request.src,
        request.out,
        text_only=request.text_only,
        int4_embeddings=request.int4_embeddings,
        progress=tensor_progress(progress, cancel, "packing"),
    )


def _umask() -> int:
    """The process's umask (reading it means setting it: put straight back)."""
    current = os.umask(0o022)
    os.umask(current)
    return current
