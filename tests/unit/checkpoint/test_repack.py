from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from compressed_tensors.compressors.pack_quantized.base import (
    PackedQuantizationCompressor,
)
from compressed_tensors.quantization import QuantizationConfig
from safetensors.torch import load_file, save_file

from gemmaserve.checkpoint.repack import MANIFEST_FILE, repack_checkpoint
from gemmaserve.errors import OffGrid, UsageError
from tests.support.checkpoint.builders import PREFIX, write_unquantized


@pytest.fixture(scope="module")
def repacked(unquantized_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("repack") / "w4a16"
    return out, repack_checkpoint(unquantized_dir, out)


def test_every_value_reconstructs_bit_exactly(repacked: tuple[Path, object]) -> None:
    _, report = repacked
    assert report.tensors_quantized == 16
    assert report.values_bit_exact == report.values_quantized > 0
    assert report.groups_peak_not_at_8 > 0  # the builder puts one tensor's peaks at -5..5


def test_compressed_tensors_decompresses_the_output_to_the_source_values(
    unquantized_dir: Path, repacked: tuple[Path, object]
) -> None:
    out, _ = repacked
    config = json.loads((out / "config.json").read_text())
    qconfig = QuantizationConfig.model_validate(config["quantization_config"])
    scheme = qconfig.config_groups["group_0"]
    source = load_file(str(unquantized_dir / "model-00001-of-00003.safetensors"))
    packed = load_file(str(out / "model-00001-of-00003.safetensors"))
    module = f"{PREFIX}.layers.0.mlp.gate_proj"
    state = {k.rsplit(".", 1)[1]: v for k, v in packed.items() if k.startswith(module + ".")}
    weight = PackedQuantizationCompressor.decompress(state, scheme)["weight"]
    assert weight.dtype == torch.bfloat16
    assert torch.equal(weight.view(torch.int16), source[f"{module}.weight"].view(torch.int16))


def test_config_ignore_list_and_google_fields(repacked: tuple[Path, object]) -> None:
    out, _report = repacked
    config = json.loads((out / "config.json").read_text())
    assert config["google_field"] == "kept" and config["architectures"] == ["Gemma4ForConditionalGeneration"]
    ignore = config["quantization_config"]["ignore"]
    assert "lm_head" in ignore and f"{PREFIX}.per_layer_model_projection" in ignore
    assert "model.vision_tower.encoder.layers.0.mlp.fc1" in ignore
    assert not any("layers.0.self_attn" in i for i in ignore)


def test_manifest_hashes_every_file_and_unchanged_shards_are_hard_links(
    unquantized_dir: Path, repacked: tuple[Path, object]
) -> None:
    out, report = repacked
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    files = sorted(p.name for p in out.iterdir() if p.name != MANIFEST_FILE)
    assert sorted(manifest["files"]) == files
    for name, info in manifest["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == info["sha256"]
    assert report.shards_linked == 2
    shard = "model-00003-of-00003.safetensors"
    assert (out / shard).stat().st_ino == (unquantized_dir / shard).stat().st_ino


def test_text_only_drops_towers_and_writes_a_causal_lm_config(unquantized_dir: Path, tmp_path: Path) -> None:
    report = repack_checkpoint(unquantized_dir, tmp_path / "text", text_only=True)
    config = json.loads((tmp_path / "text" / "config.json").read_text())
    assert config["architectures"] == ["Gemma4ForCausalLM"] and config["model_type"] == "gemma4_text"
    assert "vision_config" not in config and "audio_config" not in config and "image_token_id" not in config
    assert config["hidden_size"] == 64 and config["google_field"] == "kept"
    index = json.loads((tmp_path / "text" / "model.safetensors.index.json").read_text())
    assert not any("tower" in n or "embed_vision" in n for n in index["weight_map"])
    assert report.tensors_dropped == 4 and not (tmp_path / "text" / "model-00003-of-00003.safetensors").exists()
    assert not any("tower" in i for i in config["quantization_config"]["ignore"])


def test_int4_embeddings_pack_the_per_layer_table_exactly(unquantized_dir: Path, tmp_path: Path) -> None:
    report = repack_checkpoint(unquantized_dir, tmp_path / "e", int4_embeddings=True)
    assert report.tensors_quantized == 17 and report.values_bit_exact == report.values_quantized
    stored = load_file(str(tmp_path / "e" / "model-00002-of-00003.safetensors"))
    assert stored[f"{PREFIX}.embed_tokens_per_layer.weight_packed"].dtype == torch.int32


def test_an_off_grid_group_aborts_and_leaves_nothing(tmp_path: Path) -> None:
    src = write_unquantized(tmp_path / "src", seed=3)
    shard = src / "model-00001-of-00003.safetensors"
    tensors = load_file(str(shard))
    name = f"{PREFIX}.layers.1.mlp.up_proj.weight"
    bad = tensors[name].clone()
    bad[3, 40] = bad[3, 40] * 1.01 + 0.001  # one value between two levels
    tensors[name] = bad
    save_file(tensors, str(shard), metadata={"format": "pt"})
    with pytest.raises(OffGrid, match="up_proj") as info:
        repack_checkpoint(src, tmp_path / "out")
    assert info.value.fields["groups_off_grid"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_existing_output_is_refused(unquantized_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(UsageError):
        repack_checkpoint(unquantized_dir, tmp_path / "taken")


def test_the_output_directory_gets_the_users_umask(unquantized_dir: Path, tmp_path: Path) -> None:
    import os
    import stat

    previous = os.umask(0o027)
    try:
        repack_checkpoint(unquantized_dir, tmp_path / "out")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o750
