"""The tiny Gemma 4 writer, read back by the libraries vLLM itself uses (no engine needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from gemmaserve.catalog import resolve_encoding, resolve_model
from gemmaserve.testing.tiny_gemma4 import (
    TINY_GEOMETRY,
    TOKENIZER_SIZE,
    expected_weight_bytes,
    to_bf16_bytes,
    write_tiny_gemma4,
)


def test_the_tiny_checkpoint_mixes_head_sizes_attention_kinds_and_kv_sharing(tmp_path: Path) -> None:
    written = write_tiny_gemma4(tmp_path)
    assert written.layer_types == ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
    assert written.head_dims == [256, 512, 256, 512]
    assert written.kv_shared_layers == [2, 3]
    assert (
        written.weight_bytes
        == expected_weight_bytes(TINY_GEOMETRY)
        == (tmp_path / "model.safetensors").stat().st_size
        - (8 + int.from_bytes((tmp_path / "model.safetensors").read_bytes()[:8], "little"))
    )
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["architectures"], config["model_type"]) == (["Gemma4ForCausalLM"], "gemma4_text")
    assert (config["head_dim"], config["global_head_dim"], config["num_kv_shared_layers"]) == (256, 512, 2)


def test_the_weights_read_back_with_safetensors_in_bf16(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file as load_torch

    write_tiny_gemma4(tmp_path, seed=3)
    tensors = load_torch(tmp_path / "model.safetensors")
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    q_full = tensors["model.layers.1.self_attn.q_proj.weight"]
    assert tuple(q_full.shape) == (2 * 512, 64)
    assert 0.015 < float(q_full.float().std()) < 0.025
    assert tuple(tensors["model.layers.0.self_attn.k_proj.weight"].shape) == (256, 64)
    # KV-shared layers keep only q_proj, as transformers saves them (vLLM 0.32 builds no k/v there).
    assert "model.layers.2.self_attn.k_proj.weight" not in tensors
    assert tuple(tensors["model.layers.3.mlp.gate_proj.weight"].shape) == (256, 64)  # double-wide MLP
    assert float(tensors["model.norm.weight"].float().min()) == 1.0
    with pytest.raises(Exception):  # noqa: B017 - numpy has no bf16: the file is not a float32 file
        load_file(tmp_path / "model.safetensors")


def test_bf16_rounding_is_to_nearest_even() -> None:
    values = np.array([1.0, 1.00390625, 1.01171875, -2.5], dtype=np.float32)  # 1+2^-8 ties to 1.0
    bits = np.frombuffer(to_bf16_bytes(values), dtype="<u2")
    assert [hex(b) for b in bits] == ["0x3f80", "0x3f80", "0x3f82", "0xc020"]


def test_the_tokenizer_and_chat_template_load_offline(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    write_tiny_gemma4(tmp_path)
    tokenizer = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == TOKENIZER_SIZE
    encoded = tokenizer.encode("Hello, ü!")
    assert encoded.ids[0] == 2 and len(encoded.ids) == 1 + len("Hello, ü!".encode())  # <bos>, then a token per byte
    assert tokenizer.decode(encoded.ids) == "Hello, ü!"
    transformers = pytest.importorskip("transformers")
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    prompt = auto.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt == "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"


def test_the_real_e2b_geometry_is_written_as_config_only(tmp_path: Path) -> None:
    written = write_tiny_gemma4(tmp_path, resolve_model("gemma-4-e2b").geometry, weights=False)
    config = json.loads((tmp_path / "config.json").read_text())
    assert not (tmp_path / "model.safetensors").exists() and written.weight_bytes == 0
    assert (config["num_hidden_layers"], config["vocab_size"], config["num_kv_shared_layers"]) == (35, 262144, 20)
    assert [i for i, kind in enumerate(config["layer_types"]) if kind == "full_attention"] == list(range(4, 35, 5))
    # The text decoder's bf16 bytes agree with the catalog's parts of google/gemma-4-E2B-it (towers aside);
    # the catalog's body figure leaves out some norm vectors (~0.6 MB).
    parts = resolve_encoding(resolve_model("gemma-4-e2b"), "bf16").parts_bytes
    text = parts["per_layer_embedding"] + parts["vocab_embedding"] + parts["transformer_body"]
    assert expected_weight_bytes(resolve_model("gemma-4-e2b").geometry) == pytest.approx(text, rel=1e-4)
