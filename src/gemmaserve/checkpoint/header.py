"""Safetensors headers, parsed with hard limits: what a file holds, never its weights.

Pure parsing of header bytes (``parse_safetensors_header``) plus the one local
read (``read_local_header``: 8-byte length, then the JSON). Hub headers come
from huggingface_hub's range-reading functions (see ``sources.py``); this module
still validates them. Hostile input gets ``MalformedCheckpoint``, never a crash
or an allocation sized by the file.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from typing import Any

from gemmaserve.errors import CheckpointNotFound, MalformedCheckpoint

# A real header (tens of thousands of tensors) is a few MB at most.
MAX_HEADER_BYTES = 100_000_000

# safetensors dtype string -> bytes per element. Anything else is refused:
# guessing a width would misread every offset after it.
DTYPE_BYTES: dict[str, int] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """One tensor of one shard; ``data_begin``/``data_end`` are offsets into the shard's data region."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str
    data_begin: int
    data_end: int

    @property
    def nbytes(self) -> int:
        return self.data_end - self.data_begin

    @property
    def element_count(self) -> int:
        return math.prod(self.shape)

    @property
    def row_bytes(self) -> int:
        """Bytes of one row (first axis); the whole tensor for a scalar."""
        if not self.shape or self.shape[0] == 0:
            return self.nbytes
        return self.nbytes // self.shape[0]


@dataclass(frozen=True, slots=True)
class SafetensorsHeader:
    """One shard's header. ``header_bytes`` is None when a hub API returned only the JSON."""

    file: str
    header_bytes: int | None
    tensors: dict[str, TensorEntry]
    metadata: dict[str, str]

    @property
    def data_bytes(self) -> int:
        return max((t.data_end for t in self.tensors.values()), default=0)


def header_length(prefix: bytes, *, file: str, file_size: int | None) -> int:
    """The JSON length from the first 8 bytes, checked against the file and the cap."""
    if len(prefix) < 8:
        raise MalformedCheckpoint(
            f"{file}: {len(prefix)} bytes is too short to be a safetensors file (needs an 8-byte header length).",
            hint="The file is truncated or not safetensors; download it again.",
            file=file,
        )
    (length,) = struct.unpack("<Q", prefix[:8])
    if length > MAX_HEADER_BYTES:
        raise MalformedCheckpoint(
            f"{file}: header length {length:,} bytes exceeds the {MAX_HEADER_BYTES:,}-byte limit.",
            hint="The file is corrupt or not safetensors.",
            file=file,
        )
    if file_size is not None and 8 + length > file_size:
        raise MalformedCheckpoint(
            f"{file}: header length {length:,} points past the end of the {file_size:,}-byte file.",
            hint="The file is truncated; download it again.",
            file=file,
        )
    return int(length)


def parse_safetensors_header(
    header_json: bytes, *, file: str, file_size: int | None, strict_coverage: bool = True
) -> SafetensorsHeader:
    """Validate a header's JSON: known dtypes, sizes matching shapes, in-bounds non-overlapping data.

    ``file_size`` (when known) bounds the data; ``strict_coverage`` also requires
    the tensors to tile the data region with no gap, as safetensors writes them.
    """
    try:
        raw = json.loads(header_json.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedCheckpoint(
            f"{file}: the header is not valid JSON ({exc}).", hint="The file is corrupt or not safetensors.", file=file
        ) from exc
    return validate_header_dict(
        raw, file=file, header_bytes=len(header_json), file_size=file_size, strict_coverage=strict_coverage
    )


def validate_header_dict(
    raw: Any, *, file: str, header_bytes: int | None, file_size: int | None, strict_coverage: bool = True
) -> SafetensorsHeader:
    """Validate an already-decoded header (local JSON, or the hub's parsed metadata)."""
    if not isinstance(raw, dict):
        raise MalformedCheckpoint(f"{file}: the header is not a JSON object.", file=file)
    raw = dict(raw)
    metadata_raw = raw.pop("__metadata__", {}) or {}
    if not isinstance(metadata_raw, dict):
        raise MalformedCheckpoint(f"{file}: __metadata__ is not an object.", file=file)
    metadata = {str(k): str(v) for k, v in metadata_raw.items()}
    tensors: dict[str, TensorEntry] = {}
    for name, info in raw.items():
        tensors[name] = _parse_entry(name, info, file=file)
    data_limit = None if file_size is None or header_bytes is None else file_size - 8 - header_bytes
    _check_layout(tensors, file=file, data_limit=data_limit, strict_coverage=strict_coverage)
    return SafetensorsHeader(file=file, header_bytes=header_bytes, tensors=tensors, metadata=metadata)


def _parse_entry(name: str, info: Any, *, file: str) -> TensorEntry:
    if not isinstance(info, dict):
        raise MalformedCheckpoint(f"{file}: tensor {name!r} is not described by an object.", file=file)
    dtype = info.get("dtype")
    shape = info.get("shape")
    offsets = info.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise MalformedCheckpoint(
            f"{file}: tensor {name!r} has dtype {dtype!r}, which gemmaserve does not know.",
            hint=f"Known dtypes: {', '.join(sorted(DTYPE_BYTES))}.",
            file=file,
            tensor=name,
        )
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise MalformedCheckpoint(f"{file}: tensor {name!r} has an invalid shape {shape!r}.", file=file, tensor=name)
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise MalformedCheckpoint(
            f"{file}: tensor {name!r} has invalid data_offsets {offsets!r}.", file=file, tensor=name
        )
    expected = math.prod(shape) * DTYPE_BYTES[dtype]
    if offsets[1] - offsets[0] != expected:
        raise MalformedCheckpoint(
            f"{file}: tensor {name!r} ({dtype} {shape}) should take {expected:,} bytes, "
            f"its offsets span {offsets[1] - offsets[0]:,}.",
            file=file,
            tensor=name,
        )
    return TensorEntry(name, dtype, tuple(shape), file, offsets[0], offsets[1])


def _check_layout(tensors: dict[str, TensorEntry], *, file: str, data_limit: int | None, strict_coverage: bool) -> None:
    ordered = sorted(tensors.values(), key=lambda t: (t.data_begin, t.data_end))
    cursor = 0
    for entry in ordered:
        if entry.nbytes == 0:
            continue
        if entry.data_begin < cursor:
            raise MalformedCheckpoint(
                f"{file}: tensor {entry.name!r} overlaps the tensor before it.", file=file, tensor=entry.name
            )
        if strict_coverage and entry.data_begin != cursor:
            raise MalformedCheckpoint(
                f"{file}: {entry.data_begin - cursor:,} unexplained bytes before tensor {entry.name!r}.",
                file=file,
                tensor=entry.name,
            )
        cursor = max(cursor, entry.data_end)
    if data_limit is not None and cursor > data_limit:
        raise MalformedCheckpoint(
            f"{file}: tensor data needs {cursor:,} bytes, the file holds {data_limit:,} after its header.",
            hint="The file is truncated; download it again.",
            file=file,
        )


def read_local_header(path: str | os.PathLike[str]) -> SafetensorsHeader:
    """Read and validate the header of a local safetensors file (two small reads)."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY)
    except FileNotFoundError as exc:
        raise CheckpointNotFound(f"No such file: {name}", file=name) from exc
    try:
        size = os.fstat(fd).st_size
        length = header_length(os.pread(fd, 8, 0), file=name, file_size=size)
        payload = os.pread(fd, length, 8)
        if len(payload) != length:
            raise MalformedCheckpoint(f"{name}: the header is truncated.", file=name)
    finally:
        os.close(fd)
    return parse_safetensors_header(payload, file=os.path.basename(name), file_size=size)
