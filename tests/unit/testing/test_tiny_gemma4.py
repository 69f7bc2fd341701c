"""The tiny Gemma 4 writers (text and multimodal), read back by the libraries vLLM itself uses (no engine needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from gemmaserve.catalog import resolve_encoding, resolve_model
from gemmaserve.testing.tiny_gemma4 import expected_weight_bytes, main, write_tiny_gemma4
from gemmaserve.testing.tiny_gemma4_mm import (
    MM_CHAT_TEMPLATE,
    MM_TOKEN_IDS,
    MM_TOKENIZER_SIZE,
    MM_TOKENS,
    TINY_MM_GEOMETRY,
    Towers,
    mm_tensor_shapes,
    write_tiny_gemma4_mm,
)
from gemmaserve.testing.tiny_gemma4_parts import TINY_GEOMETRY, TOKENIZER_SIZE, model_config, to_bf16_bytes


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


# The multimodal variant (gemmaserve.testing.tiny_gemma4_mm): Gemma4ForConditionalGeneration.


def safetensors_header(path: Path) -> dict[str, tuple[int, ...]]:
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    header.pop("__metadata__")
    return {name: tuple(entry["shape"]) for name, entry in header.items()}


def test_the_multimodal_config_nests_text_vision_and_audio_configs(tmp_path: Path) -> None:
    written = write_tiny_gemma4_mm(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["architectures"], config["model_type"]) == (["Gemma4ForConditionalGeneration"], "gemma4")
    text, vision, audio = config["text_config"], config["vision_config"], config["audio_config"]
    assert (text["model_type"], vision["model_type"], audio["model_type"]) == (
        "gemma4_text",
        "gemma4_vision",
        "gemma4_audio",
    )
    # The text writer's config, less its architecture (the decoder is the top config's language model).
    assert text == {k: v for k, v in model_config(TINY_MM_GEOMETRY).items() if k != "architectures"}
    assert (text["num_hidden_layers"], text["head_dim"], text["global_head_dim"], text["vocab_size"]) == (
        4,
        256,
        512,
        270,
    )
    assert (
        vision["num_hidden_layers"],
        vision["hidden_size"],
        vision["patch_size"],
        vision["pooling_kernel_size"],
    ) == (
        2,
        32,
        16,
        3,
    )
    assert vision["default_output_length"] == 280  # vLLM's gemma4_mm reads it; transformers has no default
    assert (audio["num_hidden_layers"], audio["hidden_size"], audio["subsampling_conv_channels"]) == (2, 32, [128, 32])
    # The token ids in config.json are the tokenizer's, so vLLM's placeholders and the model agree.
    assert {name: config[f"{name.removesuffix('_token')}_token_id"] for name in MM_TOKENS if name != "eoa_token"} == {
        name: MM_TOKEN_IDS[name] for name in MM_TOKENS if name != "eoa_token"
    }
    assert config["eoa_token_index"] == config["eoa_token_id"] == MM_TOKEN_IDS["eoa_token"]
    assert written.token_ids == MM_TOKEN_IDS and sorted(MM_TOKEN_IDS.values()) == list(range(263, 270))
    assert written.weight_bytes == sum(
        2 * int(np.prod(shape)) for shape in safetensors_header(tmp_path / "model.safetensors").values()
    )
    assert written.weight_bytes == written.text_bytes + written.vision_bytes + written.audio_bytes


def test_the_processor_files_are_the_transformers_5_layout(tmp_path: Path) -> None:
    write_tiny_gemma4_mm(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "processor_config.json",
        "chat_template.jinja",
        "model.safetensors",
    }
    processor = json.loads((tmp_path / "processor_config.json").read_text())
    assert processor["processor_class"] == "Gemma4Processor"
    assert processor["image_processor"]["image_processor_type"] == "Gemma4ImageProcessor"
    assert processor["feature_extractor"]["feature_extractor_type"] == "Gemma4AudioFeatureExtractor"
    assert processor["video_processor"]["video_processor_type"] == "Gemma4VideoProcessor"
    assert (processor["image_processor"]["max_soft_tokens"], processor["image_seq_length"]) == (280, 280)
    tokenizer = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert {name: tokenizer[name] for name in MM_TOKENS if name != "video_token"} == {
        name: token for name, token in MM_TOKENS.items() if name != "video_token"
    }
    assert tokenizer["processor_class"] == "Gemma4Processor"
    assert (tmp_path / "chat_template.jinja").read_text() == tokenizer["chat_template"] == MM_CHAT_TEMPLATE


def test_the_multimodal_tokenizer_keeps_the_text_ids_and_adds_the_specials(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    write_tiny_gemma4_mm(tmp_path)
    tokenizer = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == MM_TOKENIZER_SIZE == 270
    for name, token in MM_TOKENS.items():
        assert tokenizer.token_to_id(token) == MM_TOKEN_IDS[name]
    encoded = tokenizer.encode("a<|image|>b")
    assert encoded.ids == [2, 7 + ord("a"), MM_TOKEN_IDS["image_token"], 7 + ord("b")]  # <bos>, bytes, one special
    transformers = pytest.importorskip("transformers")
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert (auto.image_token, auto.image_token_id, auto.boi_token, auto.eoi_token) == (
        "<|image|>",
        MM_TOKEN_IDS["image_token"],
        "<|image>",
        "<image|>",
    )
    assert (auto.audio_token, auto.boa_token, auto.eoa_token) == ("<|audio|>", "<|audio>", "<audio|>")
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "audio"}, {"type": "text", "text": " what? "}]},
    ]
    prompt = auto.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == "<bos><start_of_turn>user\n<|image|><|audio|>what?<end_of_turn>\n<start_of_turn>model\n"


def test_the_image_processor_and_feature_extractor_load_offline_without_torchvision(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    write_tiny_gemma4_mm(tmp_path)
    config = transformers.AutoConfig.from_pretrained(str(tmp_path))
    assert (type(config).__name__, type(config.vision_config).__name__, type(config.audio_config).__name__) == (
        "Gemma4Config",
        "Gemma4VisionConfig",
        "Gemma4AudioConfig",
    )
    assert config.vision_config.default_output_length == 280
    image = transformers.AutoImageProcessor.from_pretrained(str(tmp_path))
    assert type(image).__name__ in ("Gemma4ImageProcessor", "Gemma4ImageProcessorPil")  # torchvision's or PIL's
    assert (image.patch_size, image.max_soft_tokens, image.pooling_kernel_size) == (16, 280, 3)
    audio = transformers.AutoFeatureExtractor.from_pretrained(str(tmp_path))
    assert (type(audio).__name__, audio.sampling_rate, audio.feature_size) == (
        "Gemma4AudioFeatureExtractor",
        16_000,
        128,
    )


def test_the_full_processor_loads_where_torchvision_works(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    try:  # Gemma4's video processor needs torchvision; the engine venv uninstalls it (CONTRIBUTING.md)
        import torchvision  # noqa: F401
    except Exception as error:  # a CUDA build beside a CPU torch raises RuntimeError, not ImportError
        pytest.skip(f"torchvision does not import here ({type(error).__name__}): Gemma4Processor needs it")
    write_tiny_gemma4_mm(tmp_path)
    processor = transformers.AutoProcessor.from_pretrained(str(tmp_path))
    assert type(processor).__name__ == "Gemma4Processor"
    assert (processor.image_token_id, processor.audio_token_id, processor.video_token_id) == (
        MM_TOKEN_IDS["image_token"],
        MM_TOKEN_IDS["audio_token"],
        MM_TOKEN_IDS["video_token"],
    )


@pytest.mark.parametrize("geometry", ["tiny", "gemma-4-e2b"])
def test_the_multimodal_tensors_are_what_transformers_builds_from_the_config(tmp_path: Path, geometry: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if geometry == "tiny":
        write_tiny_gemma4_mm(tmp_path)
        written = safetensors_header(tmp_path / "model.safetensors")
    else:  # config only; the names and shapes vLLM's --load-format dummy would fill
        write_tiny_gemma4_mm(tmp_path, resolve_model(geometry).geometry, weights=False)
        written = {name: shape for name, shape, _ in mm_tensor_shapes(resolve_model(geometry).geometry, Towers())}
    config = transformers.AutoConfig.from_pretrained(str(tmp_path))
    with torch.device("meta"):
        model = transformers.Gemma4ForConditionalGeneration(config)
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    assert expected.pop("lm_head.weight") == expected["model.language_model.embed_tokens.weight"]  # tied, not stored
    assert written == expected


def test_the_e2b_multimodal_config_has_the_catalog_towers(tmp_path: Path) -> None:
    model = resolve_model("gemma-4-e2b")
    written = write_tiny_gemma4_mm(tmp_path, model.geometry, weights=False)
    config = json.loads((tmp_path / "config.json").read_text())
    assert not (tmp_path / "model.safetensors").exists() and written.weight_bytes == 0
    assert (tmp_path / "processor_config.json").exists() and (tmp_path / "tokenizer.json").exists()
    text, vision, audio = config["text_config"], config["vision_config"], config["audio_config"]
    assert (text["num_hidden_layers"], text["hidden_size"], text["vocab_size"], text["num_kv_shared_layers"]) == (
        35,
        1536,
        262144,
        20,
    )
    assert (vision["hidden_size"], vision["intermediate_size"], vision["num_hidden_layers"]) == (768, 3072, 16)
    assert (vision["patch_size"], vision["pooling_kernel_size"], vision["use_clipped_linears"]) == (16, 3, True)
    assert (model.geometry.vision_hidden_size, model.geometry.vision_intermediate_size) == (768, 3072)
    assert (audio["hidden_size"], audio["num_hidden_layers"], audio["output_proj_dims"]) == (1024, 12, 1536)
    parts = resolve_encoding(model, "bf16").parts_bytes  # the catalog's tower bytes of google/gemma-4-E2B-it
    assert written.vision_bytes == pytest.approx(parts["vision_tower"], rel=1e-3)
    assert written.audio_bytes == pytest.approx(parts["audio_tower"], rel=1e-3)
    assert written.text_bytes == expected_weight_bytes(model.geometry)


def test_the_cli_writes_the_multimodal_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "e2b"), "--geometry", "gemma-4-e2b", "--no-weights", "--multimodal"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["architecture"], result["vision_layers"], result["audio_layers"], result["weight_bytes"]) == (
        "Gemma4ForConditionalGeneration",
        16,
        12,
        0,
    )
    assert main([str(tmp_path / "tiny"), "--multimodal"]) == 0
    assert json.loads(capsys.readouterr().out)["weight_bytes"] > 0
    config = json.loads((tmp_path / "tiny" / "config.json").read_text())
    assert config["architectures"] == ["Gemma4ForConditionalGeneration"]
    with pytest.raises(ValueError, match="below the tokenizer"):
        write_tiny_gemma4_mm(tmp_path / "small", TINY_GEOMETRY)  # 263 tokens: no room for the multimodal ones
    wide_vision = TINY_MM_GEOMETRY.model_copy(update={"vision_hidden_size": 1152, "vision_intermediate_size": 4304})
    with pytest.raises(ValueError, match="pass towers="):
        write_tiny_gemma4_mm(tmp_path / "wide", wide_vision)  # 31B's tower: not guessed from E2B's
