"""GGUF q4_0 builds for grid-check: a bounded reader of the GGUF header and row ranges of q4_0 tensors.

Only what grid-check needs: tensor names, shapes, types and offsets, and the
q4_0 block layout (fp16 step, then 16 bytes: element j in the low nibble of
byte j, element j+16 in its high nibble, level = nibble - 8). GGUF names map
to the Hugging Face module names of the reference (``blk.N.attn_q`` ->
``model.language_model.layers.N.self_attn.q_proj``). Hostile headers get
MalformedCheckpoint; no allocation is sized by the file beyond its own length.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gemmaserve.errors import CheckpointNotFound, MalformedCheckpoint

GGML_Q4_0 = 2
_Q4_0_BLOCK_BYTES = 18
_MAX_COUNT = 1_000_000
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_TO_HF = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "inp_gate": "per_layer_input_gate", "proj": "per_layer_projection",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class GgufTensor:
    name: str
    dims: tuple[int, ...]  # GGUF order: dims[0] is the contiguous (input) axis
    ggml_type: int
    offset: int  # absolute file offset of the data


class _Reader:
    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.pos, self.name = data, 0, name

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedCheckpoint(f"{self.name}: the GGUF header runs past the end of the file.", file=self.name)
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def scalar(self, fmt: str) -> int | float | bool:
        value: int | float | bool = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def count(self) -> int:
        n = int(self.scalar("<Q"))
        if n > _MAX_COUNT:
            raise MalformedCheckpoint(f"{self.name}: a GGUF count of {n:,} exceeds the limit.", file=self.name)
        return n

    def string(self) -> str:
        n = int(self.scalar("<Q"))
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, kind: int) -> object:
        if kind in _SCALAR:
            return self.scalar(_SCALAR[kind])
        if kind == 8:
            return self.string()
        if kind == 9:
            inner, n = int(self.scalar("<I")), self.count()
            return [self.value(inner) for _ in range(n)]
        raise MalformedCheckpoint(f"{self.name}: unknown GGUF value type {kind}.", file=self.name)


def _header_bytes(path: Path) -> bytes:
    # The header sits at the front; 64 MB holds a vocabulary of a few hundred thousand tokens.
    with open(path, "rb") as handle:
        return handle.read(min(os.fstat(handle.fileno()).st_size, 64 << 20))


def read_gguf(path: str | os.PathLike[str]) -> tuple[dict[str, object], dict[str, GgufTensor]]:
    """Metadata and tensor table of a GGUF file."""
    file = Path(path)
    if not file.is_file():
        raise CheckpointNotFound(f"No such GGUF file: {file}", file=str(file))
    size = file.stat().st_size
    reader = _Reader(_header_bytes(file), file.name)
    if reader.take(4) != b"GGUF":
        raise MalformedCheckpoint(f"{file.name} is not a GGUF file (bad magic).", file=file.name)
    version = int(reader.scalar("<I"))
    if version not in (2, 3):
        raise MalformedCheckpoint(f"{file.name}: GGUF version {version} is not supported (2 or 3).", file=file.name)
    n_tensors, n_kv = reader.count(), reader.count()
    metadata: dict[str, object] = {}
    for _ in range(n_kv):
        key = reader.string()
        metadata[key] = reader.value(int(reader.scalar("<I")))
    infos = []
    for _ in range(n_tensors):
        name = reader.string()
        n_dims = int(reader.scalar("<I"))
        if not 1 <= n_dims <= 4:
            raise MalformedCheckpoint(f"{file.name}: tensor {name!r} has {n_dims} dimensions.", file=file.name)
        dims = tuple(int(reader.scalar("<Q")) for _ in range(n_dims))
        infos.append((name, dims, int(reader.scalar("<I")), int(reader.scalar("<Q"))))
    alignment = int(metadata.get("general.alignment", 32))  # type: ignore[call-overload]
    data_start = -(-reader.pos // alignment) * alignment
    tensors: dict[str, GgufTensor] = {}
    for name, dims, ggml_type, offset in infos:
        tensor = GgufTensor(name, dims, ggml_type, data_start + offset)
        if ggml_type == GGML_Q4_0:
            if dims[0] % 32:
                raise MalformedCheckpoint(
                    f"{file.name}: q4_0 tensor {name!r} rows are not whole blocks.", file=file.name
                )
            end = tensor.offset + int(np.prod(dims)) // 32 * _Q4_0_BLOCK_BYTES
            if end > size:
                raise MalformedCheckpoint(
                    f"{file.name}: tensor {name!r} runs past the end of the file.", file=file.name
                )
        tensors[name] = tensor
    return metadata, tensors


def hf_module_name(gguf_name: str, prefix: str = "model.language_model") -> str | None:
    """``blk.3.attn_q.weight`` -> ``model.language_model.layers.3.self_attn.q_proj``; None if unknown."""
    match = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", gguf_name)
    if not match or match.group(2) not in _GGUF_TO_HF:
        return None
    return f"{prefix}.layers.{match.group(1)}.{_GGUF_TO_HF[match.group(2)]}"


def read_q4_0_rows(path: str | os.PathLike[str], tensor: GgufTensor, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of a q4_0 tensor dequantized as llama.cpp does: float32 (q - 8) * fp16 d."""
    cols = tensor.dims[0]
    row_bytes = cols // 32 * _Q4_0_BLOCK_BYTES
    with open(path, "rb") as handle:
        raw = os.pread(handle.fileno(), (stop - start) * row_bytes, tensor.offset + start * row_bytes)
    if len(raw) != (stop - start) * row_bytes:
        raise MalformedCheckpoint(f"{tensor.name}: truncated q4_0 data.", tensor=tensor.name)
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _Q4_0_BLOCK_BYTES)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)
    qs = blocks[:, 2:]
    levels = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32) - 8
    return (levels * d).reshape(stop - start, cols)


def encode_q4_0(levels: np.ndarray, steps_f16: np.ndarray) -> bytes:
    """levels int [rows, cols] (-8..7) and fp16 steps [rows, cols/32] -> q4_0 bytes (for building test files)."""
    nib = (levels.reshape(-1, 32) + 8).astype(np.uint8)
    qs = nib[:, :16] | (nib[:, 16:] << 4)
    d = steps_f16.reshape(-1, 1).astype("<f2").view(np.uint8).reshape(-1, 2)
    return np.concatenate([d, qs], axis=1).tobytes()
