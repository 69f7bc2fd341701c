"""Write a random-weight multimodal Gemma 4 checkpoint (``Gemma4ForConditionalGeneration``).

The multimodal sibling of :mod:`gemmaserve.testing.tiny_gemma4`: ``config.json`` with
``model_type`` ``gemma4`` and its ``text_config`` (the text model of
:mod:`gemmaserve.testing.tiny_gemma4_parts`, from a catalog :class:`Geometry`),
``vision_config`` and ``audio_config``; bf16 weights under the Hugging
Face names (``model.language_model.*``, ``model.vision_tower.*``, ``model.audio_tower.*``,
``model.embed_vision.*``, ``model.embed_audio.*``; the LM head is tied and not stored); and
the processor files vLLM loads offline: the byte-level tokenizer with the image, audio and
video tokens the Gemma4 processor reads (``boi_token`` ``<|image>``, ``eoi_token``
``<image|>``, ``image_token`` ``<|image|>``, ``boa_token`` ``<|audio>``, ``eoa_token``
``<audio|>``, ``audio_token`` ``<|audio|>``, ``<|video|>``: the strings of the published
tokenizer, here at ids 263-269, after the text writer's 263 tokens), ``processor_config.json``
(transformers 5's one file holding the image processor, the audio feature extractor, the
video processor and the processor's own settings) and a chat template that renders image,
audio and video parts as those tokens. Needs numpy only; never reaches the network.

Where the tower settings come from:

- **transformers' defaults** (``Gemma4VisionConfig`` / ``Gemma4AudioConfig`` of transformers
  5.19, read from its source): vision ``hidden_size`` 768, ``intermediate_size`` 3072,
  ``num_hidden_layers`` 16, 12 heads of 64 (12 KV heads), ``patch_size`` 16,
  ``pooling_kernel_size`` 3, ``position_embedding_size`` 10240, RMS eps 1e-6,
  ``gelu_pytorch_tanh``, axial RoPE with theta 100 (left out of the file, so each
  transformers version fills in its own); audio ``hidden_size`` 1024, ``num_hidden_layers`` 12, 8 heads,
  ``subsampling_conv_channels`` [128, 32], ``conv_kernel_size`` 5, chunked attention
  (chunk 12, left context 13, right 0, logit cap 50), ``use_clipped_linears`` true,
  ``output_proj_dims`` 1536; the token ids' names (``boi_token_id`` …) and the
  processor's ``audio_seq_length`` 750 / ``audio_ms_per_token`` 40, and the feature
  extractor's defaults (128 mel bins, 16 kHz, 20 ms frames, 10 ms hop).
- **transformers' conversion script** (``convert_gemma4_weights.py``, the config the
  published E2B/E4B checkpoints were written with, ``_ON_DEVICE_VISION_CONFIG``): vision
  ``use_clipped_linears`` true (the class default is false), ``default_output_length``
  280 (no class default; vLLM's ``gemma4_mm.py`` reads it), ``global_head_dim`` 64, and
  ``vision_soft_tokens_per_image`` 280; the image processor's ``max_soft_tokens`` 280,
  ``do_normalize`` false.
- **chosen here** for the tiny towers (``tiny_towers()``): vision 2 layers, width 32, MLP
  64, 2 heads of 16; audio 2 layers, width 32, 2 heads of 16. Everything else as above.

The published checkpoints' own ``vision_config`` / ``audio_config`` were not available
offline; the E2B tower sizes written here reproduce the catalog's tower bytes
(``gemma-4-e2b`` bf16 ``vision_tower`` 337 MB, ``audio_tower`` 614 MB) to within 0.1%. The
token strings are those of transformers' conversion script; their ids here are not the
published ones (258880 …), and ``config.json`` names the tokenizer's.

Serving it needs torchvision: vLLM's ``gemma4_mm`` imports transformers' ``Gemma4Processor``,
whose module (transformers 5.19) imports the torchvision image processor, and whose video
processor needs torchvision in any version. Where torchvision does not import (the CPU
engine venv of CONTRIBUTING.md), vLLM stops at "Model architectures
['Gemma4ForConditionalGeneration'] failed to be inspected", with or without
``--language-model-only``.

    python -m gemmaserve.testing.tiny_gemma4 OUT_DIR --multimodal [--geometry tiny|gemma-4-e2b] [--no-weights]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from gemmaserve.catalog import Geometry
from gemmaserve.fileio import write_atomic
from gemmaserve.testing import tiny_gemma4_parts as text
from gemmaserve.testing.tiny_gemma4_parts import (
    BOS_ID,
    END_OF_TURN_ID,
    EOS_ID,
    PAD_ID,
    TOKENIZER_SIZE,
    WEIGHT_STD,
    Init,
    tensor_bytes,
)

# The published Gemma 4 tokenizer's multimodal tokens, appended after the text tokenizer's.
MM_TOKENS: dict[str, str] = {
    "boi_token": "<|image>",
    "eoi_token": "<image|>",
    "image_token": "<|image|>",
    "boa_token": "<|audio>",
    "eoa_token": "<audio|>",
    "audio_token": "<|audio|>",
    "video_token": "<|video|>",
}
MM_TOKEN_IDS: dict[str, int] = {name: TOKENIZER_SIZE + i for i, name in enumerate(MM_TOKENS)}
MM_TOKENIZER_SIZE = TOKENIZER_SIZE + len(MM_TOKENS)

TINY_MM_GEOMETRY = text.TINY_GEOMETRY.model_copy(
    update={
        "vocab_size": MM_TOKENIZER_SIZE,
        "source": "gemmaserve.testing.tiny_gemma4_mm: a tiny random multimodal test model",
    }
)

IMAGE_SOFT_TOKENS = 280  # convert_gemma4_weights.py: default_output_length / max_soft_tokens

# Gemma's turn format; image, audio and video parts become the processor's placeholder tokens,
# which vLLM expands to <|image> + N x <|image|> + <image|> (and the audio/video equivalents).
# Looping over message['content'] makes vLLM pass content parts as OpenAI-style dicts.
MM_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] | trim }}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{ '" + MM_TOKENS["image_token"] + "' }}"
    "{%- elif item['type'] == 'audio' -%}{{ '" + MM_TOKENS["audio_token"] + "' }}"
    "{%- elif item['type'] == 'video' -%}{{ '" + MM_TOKENS["video_token"] + "' }}"
    "{%- elif item['type'] == 'text' -%}{{ item['text'] | trim }}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{ '<end_of_turn>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)


class VisionTower(BaseModel):
    """A ``Gemma4VisionConfig``'s shape-deciding fields (defaults: the E2B/E4B tower)."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 16
    num_attention_heads: int = 12
    num_key_value_heads: int = 12
    head_dim: int = 64
    patch_size: int = 16
    pooling_kernel_size: int = 3
    position_embedding_size: int = 10 * 1024
    use_clipped_linears: bool = True
    default_output_length: int = IMAGE_SOFT_TOKENS


class AudioTower(BaseModel):
    """A ``Gemma4AudioConfig``'s shape-deciding fields (defaults: transformers', the E2B/E4B tower)."""

    hidden_size: int = 1024
    num_hidden_layers: int = 12
    num_attention_heads: int = 8
    subsampling_conv_channels: tuple[int, int] = (128, 32)
    conv_kernel_size: int = 5
    output_proj_dims: int = 1536
    use_clipped_linears: bool = True


class Towers(BaseModel):
    vision: VisionTower = VisionTower()
    audio: AudioTower | None = AudioTower()


def tiny_towers() -> Towers:
    """Two-layer, 32-wide towers: 1.9 MB of weights (1.3 MB of it the vision position table), run on a CPU."""
    return Towers(
        vision=VisionTower(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=16,
        ),
        audio=AudioTower(hidden_size=32, num_hidden_layers=2, num_attention_heads=2),
    )


class TinyMultimodalCheckpoint(BaseModel):
    path: str
    architecture: str
    layer_types: list[str]
    vocab_size: int
    tokenizer_size: int
    token_ids: dict[str, int]
    vision_layers: int
    vision_hidden_size: int
    audio_layers: int  # 0 without an audio tower
    audio_hidden_size: int
    tensors: int
    weight_bytes: int  # 0 when written without weights
    text_bytes: int
    vision_bytes: int  # the vision tower and its embedder (embed_vision)
    audio_bytes: int  # the audio tower and its embedder (embed_audio)


def vision_config(vision: VisionTower) -> dict[str, object]:
    """``vision_config`` of ``config.json`` (``model_type`` ``gemma4_vision``)."""
    return {
        "model_type": "gemma4_vision",
        "hidden_size": vision.hidden_size,
        "intermediate_size": vision.intermediate_size,
        "num_hidden_layers": vision.num_hidden_layers,
        "num_attention_heads": vision.num_attention_heads,
        "num_key_value_heads": vision.num_key_value_heads,
        "head_dim": vision.head_dim,
        "global_head_dim": vision.head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 131_072,
        "attention_bias": False,
        "attention_dropout": 0.0,
        # rope_parameters left out: each transformers version fills its own (5.19: axial, theta 100)
        "pooling_kernel_size": vision.pooling_kernel_size,
        "patch_size": vision.patch_size,
        "position_embedding_size": vision.position_embedding_size,
        "use_clipped_linears": vision.use_clipped_linears,
        "standardize": False,
        "default_output_length": vision.default_output_length,
        "initializer_range": WEIGHT_STD,
        "dtype": "bfloat16",
    }


def audio_config(audio: AudioTower) -> dict[str, object]:
    """``audio_config`` of ``config.json`` (``model_type`` ``gemma4_audio``)."""
    if audio.hidden_size % audio.num_attention_heads:
        raise ValueError("the audio tower's hidden_size must be a multiple of its num_attention_heads")
    return {
        "model_type": "gemma4_audio",
        "hidden_size": audio.hidden_size,
        "num_hidden_layers": audio.num_hidden_layers,
        "num_attention_heads": audio.num_attention_heads,
        "hidden_act": "silu",
        "subsampling_conv_channels": list(audio.subsampling_conv_channels),
        "conv_kernel_size": audio.conv_kernel_size,
        "residual_weight": 0.5,
        "attention_chunk_size": 12,
        "attention_context_left": 13,
        "attention_context_right": 0,
        "attention_logit_cap": 50.0,
        "attention_invalid_logits_value": -1.0e9,
        "use_clipped_linears": audio.use_clipped_linears,
        "rms_norm_eps": 1e-6,
        "gradient_clipping": 1e10,
        "output_proj_dims": audio.output_proj_dims,
        "initializer_range": WEIGHT_STD,
        "dtype": "bfloat16",
    }


def mm_model_config(geometry: Geometry, towers: Towers) -> dict[str, object]:
    """``config.json`` of a ``Gemma4ForConditionalGeneration`` (``model_type`` ``gemma4``)."""
    text_config = text.model_config(geometry)
    del text_config["architectures"]
    config: dict[str, object] = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": text_config,
        "vision_config": vision_config(towers.vision),
        "audio_config": audio_config(towers.audio) if towers.audio else None,
        "boi_token_id": MM_TOKEN_IDS["boi_token"],
        "eoi_token_id": MM_TOKEN_IDS["eoi_token"],
        "image_token_id": MM_TOKEN_IDS["image_token"],
        "video_token_id": MM_TOKEN_IDS["video_token"],
        "boa_token_id": MM_TOKEN_IDS["boa_token"],
        "eoa_token_index": MM_TOKEN_IDS["eoa_token"],
        "eoa_token_id": MM_TOKEN_IDS["eoa_token"],  # vLLM reads this before eoa_token_index
        "audio_token_id": MM_TOKEN_IDS["audio_token"],
        "vision_soft_tokens_per_image": towers.vision.default_output_length,
        "initializer_range": WEIGHT_STD,
        "tie_word_embeddings": True,
        "pad_token_id": PAD_ID,
        "bos_token_id": BOS_ID,
        "eos_token_id": [EOS_ID, END_OF_TURN_ID],
        "dtype": "bfloat16",
    }
    return config


def _clip_buffers(prefix: str, clipped: bool) -> Iterator[tuple[str, tuple[int, ...], Init]]:
    if clipped:  # Gemma4ClippableLinear's persistent buffers, at their unclipped values
        yield prefix + "input_min", (), "-inf"
        yield prefix + "input_max", (), "inf"
        yield prefix + "output_min", (), "-inf"
        yield prefix + "output_max", (), "inf"


def _linear(prefix: str, out_in: tuple[int, int], clipped: bool) -> Iterator[tuple[str, tuple[int, ...], Init]]:
    yield from _clip_buffers(prefix, clipped)
    yield prefix + "linear.weight", out_in, "normal"


def vision_tensors(vision: VisionTower, text_hidden: int) -> Iterator[tuple[str, tuple[int, ...], Init]]:
    """(name, shape, init) of the vision tower and its embedder, as transformers' Gemma4VisionModel saves them."""
    h, clip = vision.hidden_size, vision.use_clipped_linears
    q_width, kv_width = vision.num_attention_heads * vision.head_dim, vision.num_key_value_heads * vision.head_dim
    tower = "model.vision_tower."
    yield tower + "patch_embedder.input_proj.weight", (h, 3 * vision.patch_size**2), "normal"
    yield tower + "patch_embedder.position_embedding_table", (2, vision.position_embedding_size, h), "normal"
    for index in range(vision.num_hidden_layers):
        layer = f"{tower}encoder.layers.{index}."
        yield from _linear(layer + "self_attn.q_proj.", (q_width, h), clip)
        yield from _linear(layer + "self_attn.k_proj.", (kv_width, h), clip)
        yield from _linear(layer + "self_attn.v_proj.", (kv_width, h), clip)
        yield from _linear(layer + "self_attn.o_proj.", (h, q_width), clip)
        yield layer + "self_attn.q_norm.weight", (vision.head_dim,), "ones"
        yield layer + "self_attn.k_norm.weight", (vision.head_dim,), "ones"
        yield from _linear(layer + "mlp.gate_proj.", (vision.intermediate_size, h), clip)
        yield from _linear(layer + "mlp.up_proj.", (vision.intermediate_size, h), clip)
        yield from _linear(layer + "mlp.down_proj.", (h, vision.intermediate_size), clip)
        for norm in text.LAYER_NORMS:
            yield layer + norm + ".weight", (h,), "ones"
    yield "model.embed_vision.embedding_projection.weight", (text_hidden, h), "normal"


def audio_tensors(audio: AudioTower, text_hidden: int) -> Iterator[tuple[str, tuple[int, ...], Init]]:
    """(name, shape, init) of the audio tower and its embedder, as transformers' Gemma4AudioModel saves them."""
    h, clip = audio.hidden_size, audio.use_clipped_linears
    first, second = audio.subsampling_conv_channels
    head_dim = h // audio.num_attention_heads
    tower = "model.audio_tower."
    sub = tower + "subsample_conv_projection."
    yield sub + "layer0.conv.weight", (first, 1, 3, 3), "normal"
    yield sub + "layer0.norm.weight", (first,), "ones"
    yield sub + "layer1.conv.weight", (second, first, 3, 3), "normal"
    yield sub + "layer1.norm.weight", (second,), "ones"
    # 128 mel bins after two stride-2 convolutions; transformers writes it as first // 4.
    yield sub + "input_proj_linear.weight", (h, (first // 4) * second), "normal"
    for index in range(audio.num_hidden_layers):
        layer = f"{tower}layers.{index}."
        for block in ("feed_forward1", "feed_forward2"):
            yield from _linear(f"{layer}{block}.ffw_layer_1.", (4 * h, h), clip)
            yield from _linear(f"{layer}{block}.ffw_layer_2.", (h, 4 * h), clip)
            yield f"{layer}{block}.pre_layer_norm.weight", (h,), "ones"
            yield f"{layer}{block}.post_layer_norm.weight", (h,), "ones"
        yield layer + "self_attn.per_dim_scale", (head_dim,), "zeros"
        for proj in ("q_proj", "k_proj", "v_proj"):
            yield from _linear(f"{layer}self_attn.{proj}.", (audio.num_attention_heads * head_dim, h), clip)
        yield from _linear(layer + "self_attn.post.", (h, h), clip)
        yield layer + "self_attn.relative_k_proj.weight", (audio.num_attention_heads * head_dim, h), "normal"
        yield from _linear(layer + "lconv1d.linear_start.", (2 * h, h), clip)
        yield from _linear(layer + "lconv1d.linear_end.", (h, h), clip)
        yield layer + "lconv1d.depthwise_conv1d.weight", (h, 1, audio.conv_kernel_size), "normal"
        yield layer + "lconv1d.pre_layer_norm.weight", (h,), "ones"
        yield layer + "lconv1d.conv_norm.weight", (h,), "ones"
        for norm in ("norm_pre_attn", "norm_post_attn", "norm_out"):
            yield layer + norm + ".weight", (h,), "ones"
    yield tower + "output_proj.weight", (audio.output_proj_dims, h), "normal"
    yield tower + "output_proj.bias", (audio.output_proj_dims,), "zeros"
    yield "model.embed_audio.embedding_projection.weight", (text_hidden, audio.output_proj_dims), "normal"


def text_tensors(geometry: Geometry) -> Iterator[tuple[str, tuple[int, ...], Init]]:
    """The text writer's tensors under ``model.language_model.`` (where Gemma4Model keeps its decoder)."""
    for name, shape, init in text.tensor_shapes(geometry):
        yield "model.language_model." + name.removeprefix("model."), shape, init


def mm_tensor_shapes(geometry: Geometry, towers: Towers) -> Iterator[tuple[str, tuple[int, ...], Init]]:
    yield from text_tensors(geometry)
    yield from vision_tensors(towers.vision, geometry.hidden_size)
    if towers.audio:
        yield from audio_tensors(towers.audio, geometry.hidden_size)


def mm_tokenizer_json() -> dict[str, object]:
    """The text writer's byte-level tokenizer plus the multimodal tokens (ids 263-269), all special."""
    tokenizer = text.tokenizer_json()
    model = tokenizer["model"]
    added = tokenizer["added_tokens"]
    assert isinstance(model, dict) and isinstance(added, list)
    for name, token in MM_TOKENS.items():
        model["vocab"][token] = MM_TOKEN_IDS[name]
        added.append(text.added_token(MM_TOKEN_IDS[name], token))
    return tokenizer


def mm_tokenizer_config() -> dict[str, object]:
    """tokenizer_config.json: the published Gemma 4 layout (named tokens at the top level)."""
    config = text.tokenizer_config()
    decoder = config["added_tokens_decoder"]
    assert isinstance(decoder, dict)
    for name, token in MM_TOKENS.items():
        decoder[str(MM_TOKEN_IDS[name])] = text.decoder_token(token)
        if name != "video_token":  # the processor adds <|video|> itself, as an extra special token
            config[name] = token
    config["additional_special_tokens"] = ["<start_of_turn>", "<end_of_turn>", MM_TOKENS["video_token"]]
    config["processor_class"] = "Gemma4Processor"
    config["chat_template"] = MM_CHAT_TEMPLATE
    return config


def processor_config(towers: Towers) -> dict[str, object]:
    """processor_config.json: transformers 5 keeps every sub-processor's settings in this one file."""
    vision = towers.vision
    # Images and video frames are prepared alike: RGB, resized, scaled to 0..1, not normalised.
    pixels = {
        "do_convert_rgb": True,
        "do_resize": True,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": False,
        "image_mean": [0.0, 0.0, 0.0],
        "image_std": [1.0, 1.0, 1.0],
        "resample": 3,  # bicubic
    }
    image_processor = {
        "image_processor_type": "Gemma4ImageProcessor",  # transformers picks its PIL twin without torchvision
        **pixels,
        "patch_size": vision.patch_size,
        "max_soft_tokens": vision.default_output_length,
        "pooling_kernel_size": vision.pooling_kernel_size,
        "image_seq_length": vision.default_output_length,
    }
    feature_extractor = {
        "feature_extractor_type": "Gemma4AudioFeatureExtractor",
        "feature_size": 128,
        "sampling_rate": 16_000,
        "padding_value": 0.0,
        "padding_side": "right",
        "return_attention_mask": True,
        "frame_length_ms": 20.0,
        "hop_length_ms": 10.0,
        "min_frequency": 0.0,
        "max_frequency": 8000.0,
        "preemphasis": 0.0,
        "preemphasis_htk_flavor": True,
        "fft_overdrive": False,
        "dither": 0.0,
        "input_scale_factor": 1.0,
        "mel_floor": 0.001,
        "per_bin_mean": None,
        "per_bin_stddev": None,
    }
    video_processor = {
        "video_processor_type": "Gemma4VideoProcessor",
        "patch_size": vision.patch_size,
        "max_soft_tokens": 70,
        "pooling_kernel_size": vision.pooling_kernel_size,
        "num_frames": 32,
        "do_sample_frames": True,
        **pixels,
        "return_metadata": True,
    }
    return {
        "processor_class": "Gemma4Processor",
        "image_seq_length": vision.default_output_length,
        "audio_seq_length": 750,
        "audio_ms_per_token": 40,
        "image_processor": image_processor,
        "feature_extractor": feature_extractor,
        "video_processor": video_processor,
    }


def write_tiny_gemma4_mm(
    out_dir: str | Path,
    geometry: Geometry = TINY_MM_GEOMETRY,
    towers: Towers | None = None,
    *,
    seed: int = 0,
    weights: bool = True,
) -> TinyMultimodalCheckpoint:
    """Write config, processor files, tokenizer, chat template and (unless ``weights=False``) bf16 weights.

    ``towers`` defaults to :func:`tiny_towers` for :data:`TINY_MM_GEOMETRY` and to the E2B/E4B
    towers (:class:`Towers`'s defaults) for any other geometry.

    Raises:
        ValueError: a geometry Gemma 4's text model cannot express, a vocabulary smaller than the tokenizer,
            or (without ``towers``) a catalog vision tower other than the E2B/E4B one.
    """
    if geometry.vocab_size < MM_TOKENIZER_SIZE:
        raise ValueError(f"vocab_size {geometry.vocab_size} is below the tokenizer's {MM_TOKENIZER_SIZE} tokens")
    if towers is None:
        if geometry == TINY_MM_GEOMETRY:
            towers = tiny_towers()
        elif (geometry.vision_hidden_size, geometry.vision_intermediate_size) in ((0, 0), (768, 3072)):
            towers = Towers()
        else:
            raise ValueError(
                f"the catalog's vision tower of this model ({geometry.vision_hidden_size} wide) is not the "
                "E2B/E4B one written by default: pass towers="
            )
    config = mm_model_config(geometry, towers)
    out = Path(out_dir)
    text.write_text_files(
        out, config, mm_tokenizer_json(), mm_tokenizer_config(), MM_CHAT_TEMPLATE, (MM_TOKENS["video_token"],)
    )
    write_atomic(out / "processor_config.json", json.dumps(processor_config(towers), indent=2) + "\n")
    shapes = list(mm_tensor_shapes(geometry, towers))
    weight_bytes = text.write_random_weights(out / "model.safetensors", shapes, seed) if weights else 0
    audio = towers.audio
    return TinyMultimodalCheckpoint(
        path=str(out),
        architecture="Gemma4ForConditionalGeneration",
        layer_types=[f"{kind}_attention" for kind in geometry.layer_types()],
        vocab_size=geometry.vocab_size,
        tokenizer_size=MM_TOKENIZER_SIZE,
        token_ids=dict(MM_TOKEN_IDS),
        vision_layers=towers.vision.num_hidden_layers,
        vision_hidden_size=towers.vision.hidden_size,
        audio_layers=audio.num_hidden_layers if audio else 0,
        audio_hidden_size=audio.hidden_size if audio else 0,
        tensors=len(shapes),
        weight_bytes=weight_bytes,
        text_bytes=tensor_bytes(text_tensors(geometry)),
        vision_bytes=tensor_bytes(vision_tensors(towers.vision, geometry.hidden_size)),
        audio_bytes=tensor_bytes(audio_tensors(audio, geometry.hidden_size)) if audio else 0,
    )
