from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from gemmaserve.checkpoint.header import MAX_HEADER_BYTES, read_local_header
from gemmaserve.errors import CheckpointNotFound, MalformedCheckpoint


def _raw(path: Path, header: dict, data: bytes = b"", *, length: int | None = None) -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)
    return path


def test_reads_a_real_safetensors_file(tmp_path: Path) -> None:
    save_file(
        {"a": torch.zeros(3, 4, dtype=torch.bfloat16), "b": torch.ones(2, dtype=torch.int32)},
        str(tmp_path / "x.safetensors"),
    )
    header = read_local_header(tmp_path / "x.safetensors")
    assert header.tensors["a"].dtype == "BF16" and header.tensors["a"].shape == (3, 4)
    assert header.tensors["a"].nbytes == 24 and header.tensors["b"].nbytes == 8


@pytest.mark.parametrize(
    ("header", "data", "length", "needle"),
    [
        ({"a": {"dtype": "Q4K", "shape": [2], "data_offsets": [0, 2]}}, b"xx", None, "does not know"),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"xxxx", None, "should take 8"),
        (
            {
                "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]},
            },
            b"x" * 6,
            None,
            "overlaps",
        ),
        ({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}, b"x" * 4, None, "holds 4"),
        ({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}}, b"", None, "invalid shape"),
        ({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 0]}}, b"x", None, "invalid data_offsets"),
        ({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"x", 10_000, "past the end"),
        ({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"x", MAX_HEADER_BYTES + 1, "exceeds"),
    ],
)
def test_malformed_headers_are_refused(
    tmp_path: Path, header: dict, data: bytes, length: int | None, needle: str
) -> None:
    path = _raw(tmp_path / "bad.safetensors", header, data, length=length)
    with pytest.raises(MalformedCheckpoint, match=needle):
        read_local_header(path)


def test_truncated_and_non_json_files(tmp_path: Path) -> None:
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x02")
    with pytest.raises(MalformedCheckpoint, match="too short"):
        read_local_header(short)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(struct.pack("<Q", 4) + b"\xff{[x")
    with pytest.raises(MalformedCheckpoint, match="not valid JSON"):
        read_local_header(garbage)
    listy = _raw(tmp_path / "list.safetensors", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(MalformedCheckpoint, match="not a JSON object"):
        read_local_header(listy)
    with pytest.raises(CheckpointNotFound):
        read_local_header(tmp_path / "missing.safetensors")
