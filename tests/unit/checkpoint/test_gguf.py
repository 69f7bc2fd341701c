from __future__ import annotations

from pathlib import Path

import pytest

from gemmaserve.checkpoint import grid_check
from gemmaserve.checkpoint.gguf import hf_module_name, read_gguf
from gemmaserve.checkpoint.gridcheck import GridScope
from gemmaserve.errors import MalformedCheckpoint
from tests.support.checkpoint.builders import PREFIX, write_gguf_build


def test_a_gguf_built_from_the_grid_has_no_value_off_by_a_level(unquantized_dir: Path, tmp_path: Path) -> None:
    build = write_gguf_build(unquantized_dir, tmp_path / "tiny.gguf")
    report = grid_check(str(build), str(unquantized_dir))
    assert {t.build_format for t in report.tensors} == {"gguf-q4_0"} and len(report.tensors) == 4
    assert report.values_off_by_a_level_or_more == 0
    # llama.cpp dequantizes in float32; the reference is bf16(q * d): equal unless bf16 rounded the product.
    assert report.values_bit_identical > 0.5 * report.values


def test_a_gguf_one_level_off_is_caught(unquantized_dir: Path, tmp_path: Path) -> None:
    build = write_gguf_build(unquantized_dir, tmp_path / "off.gguf", shift_levels=True)
    report = grid_check(str(build), str(unquantized_dir), GridScope(tensor=f"{PREFIX}.layers.1.mlp.down_proj"))
    assert report.verdict == "off-grid" and 0.2 < report.share_off_by_a_level_or_more < 0.5


def test_gguf_names_and_malformed_files(tmp_path: Path) -> None:
    assert hf_module_name("blk.12.attn_output.weight") == f"{PREFIX}.layers.12.self_attn.o_proj"
    assert hf_module_name("token_embd.weight") is None
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + b"\0" * 20)
    with pytest.raises(MalformedCheckpoint, match="magic"):
        read_gguf(bad)
    huge = tmp_path / "huge.gguf"
    huge.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (10**12).to_bytes(8, "little") + (0).to_bytes(8, "little"))
    with pytest.raises(MalformedCheckpoint, match="exceeds"):
        read_gguf(huge)
    short = tmp_path / "short.gguf"
    short.write_bytes(
        b"GGUF" + (3).to_bytes(4, "little") + (1).to_bytes(8, "little") + (0).to_bytes(8, "little") + b"\x05"
    )
    with pytest.raises(MalformedCheckpoint, match="past the end"):
        read_gguf(short)
