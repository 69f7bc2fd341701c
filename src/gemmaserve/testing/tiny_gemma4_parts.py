"""The pieces both tiny Gemma 4 checkpoint writers assemble: tokenizer, text model, file writers.

The byte-level tokenizer (:func:`tokenizer_json`, :func:`tokenizer_config`, written as JSON: no
training, no network) with Gemma's turn template; the ``gemma4_text`` model's ``config.json``
(:func:`model_config`) and its tensors under the Hugging Face names (:func:`tensor_shapes`) for a
catalog :class:`Geometry`, :data:`TINY_GEOMETRY` the tiny one; and the writers of bf16 safetensors
(:func:`write_safetensors_bf16`) and of the config and tokenizer files (:func:`write_text_files`).
:mod:`gemmaserve.testing.tiny_gemma4` (the text checkpoint and the command) and
:mod:`gemmaserve.testing.tiny_gemma4_mm` (the multimodal one) both build on them. Needs numpy only.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

import numpy as np

from gemmaserve.catalog import Geometry
from gemmaserve.fileio import write_atomic

SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<mask>")
PAD_ID, EOS_ID, BOS_ID, END_OF_TURN_ID = 0, 1, 2, 5
TOKENIZER_SIZE = len(SPECIAL_TOKENS) + 256  # the specials, then one token per byte
WEIGHT_STD = 0.02

# The four RMS norms around attention and the MLP in each decoder layer (text and vision alike).
LAYER_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")

# How a tensor starts: random normal (std WEIGHT_STD), or filled with one value.
Init = Literal["normal", "ones", "zeros", "-inf", "inf"]

TINY_GEOMETRY = Geometry(
    num_hidden_layers=4,
    layer_pattern="SF",
    sliding_window=64,
    num_attention_heads=2,
    sliding_kv_heads=1,
    full_kv_heads=1,
    sliding_head_dim=256,
    full_head_dim=512,
    num_kv_shared_layers=2,  # layers 2 (S) and 3 (F) reuse the KV of layers 0 and 1
    hidden_size=64,
    intermediate_size=128,
    vocab_size=TOKENIZER_SIZE,
    per_layer_input_size=16,
    max_position_embeddings=8192,
    source="gemmaserve.testing.tiny_gemma4: a tiny random test model",
)

# Gemma's turn format; list contents keep their text parts (what OpenAI clients may send).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{%- if message['content'] is string -%}{%- set text = message['content'] -%}"
    "{%- else -%}{%- set text = message['content'] | selectattr('type', 'equalto', 'text')"
    " | map(attribute='text') | join('') -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\\n' + text | trim + '<end_of_turn>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)


def byte_to_unicode() -> dict[int, str]:
    """The byte-level alphabet of GPT-2 style tokenizers (``tokenizers``' ByteLevel).

    Printable bytes stand for themselves; the others are moved to code points from 256 on,
    in byte order, so every byte has a visible one-character name.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in mapping:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return mapping


def added_token(index: int, token: str) -> dict[str, object]:
    """One special token of ``tokenizer.json``'s ``added_tokens``."""
    return {
        "id": index,
        "content": token,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


def decoder_token(token: str) -> dict[str, object]:
    """One special token of ``tokenizer_config.json``'s ``added_tokens_decoder``."""
    return {
        "content": token,
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
        "special": True,
    }


def tokenizer_json() -> dict[str, object]:
    """A byte-level BPE tokenizer with no merges: one token per byte, specials first."""
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for byte, char in sorted(byte_to_unicode().items()):
        vocab[char] = len(SPECIAL_TOKENS) + byte
    added = [added_token(index, token) for index, token in enumerate(SPECIAL_TOKENS)]
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    bos = SPECIAL_TOKENS[BOS_ID]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", **byte_level},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {bos: {"id": bos, "ids": [BOS_ID], "tokens": [bos]}},
        },
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def tokenizer_config() -> dict[str, object]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
        "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"],
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1_000_000,
        "padding_side": "left",
        "added_tokens_decoder": {str(index): decoder_token(token) for index, token in enumerate(SPECIAL_TOKENS)},
        "chat_template": CHAT_TEMPLATE,
    }


def hf_layer_types(geometry: Geometry) -> list[str]:
    return [f"{kind}_attention" for kind in geometry.layer_types()]


def check_geometry(geometry: Geometry) -> None:
    """Refuse shapes Gemma 4's text model cannot express (ValueError)."""
    types = geometry.layer_types()
    first_shared = geometry.num_hidden_layers - geometry.num_kv_shared_layers
    if types[-1] != "full":
        raise ValueError("Gemma 4's last layer must use full attention (the pattern must end in F)")
    if geometry.sliding_kv_heads != geometry.full_kv_heads:
        raise ValueError("this writer keeps one num_key_value_heads for both layer types")
    if geometry.num_experts:
        raise ValueError("mixture-of-experts geometries are not written here")
    for kind in set(types[first_shared:]):
        if kind not in types[:first_shared]:
            raise ValueError(f"a KV-shared {kind} layer has no earlier {kind} layer to share with")


def model_config(geometry: Geometry) -> dict[str, object]:
    """``config.json`` of a ``Gemma4ForCausalLM`` (``model_type`` ``gemma4_text``), tied embeddings."""
    check_geometry(geometry)
    return {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        "vocab_size": geometry.vocab_size,
        "hidden_size": geometry.hidden_size,
        "intermediate_size": geometry.intermediate_size,
        "num_hidden_layers": geometry.num_hidden_layers,
        "num_attention_heads": geometry.num_attention_heads,
        "num_key_value_heads": geometry.sliding_kv_heads,
        "head_dim": geometry.sliding_head_dim,
        "global_head_dim": geometry.full_head_dim,
        "layer_types": hf_layer_types(geometry),
        "sliding_window": geometry.sliding_window,
        "num_kv_shared_layers": geometry.num_kv_shared_layers,
        "use_double_wide_mlp": geometry.num_kv_shared_layers > 0,
        "hidden_size_per_layer_input": geometry.per_layer_input_size,
        "vocab_size_per_layer_input": geometry.vocab_size,
        "attention_k_eq_v": geometry.full_attention_k_eq_v,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": geometry.max_position_embeddings,
        "rms_norm_eps": 1e-6,
        "initializer_range": WEIGHT_STD,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "final_logit_softcapping": None,
        "use_bidirectional_attention": None,
        "enable_moe_block": False,
        "num_experts": None,
        "top_k_experts": None,
        "moe_intermediate_size": None,
        "tie_word_embeddings": True,
        "use_cache": True,
        "pad_token_id": PAD_ID,
        "eos_token_id": EOS_ID,
        "bos_token_id": BOS_ID,
        "dtype": "bfloat16",
    }


def tensor_shapes(geometry: Geometry) -> Iterator[tuple[str, tuple[int, ...], Init]]:
    """(Hugging Face name, shape, init) of every stored tensor; norms and scalars start at 1.

    KV-shared layers store no k_proj/v_proj/k_norm (they read an earlier layer's cache), as
    transformers saves them; the LM head is tied to the embedding and not stored.
    """
    hidden, per_layer = geometry.hidden_size, geometry.per_layer_input_size
    layers, vocab = geometry.num_hidden_layers, geometry.vocab_size
    first_shared = layers - geometry.num_kv_shared_layers
    yield "model.embed_tokens.weight", (vocab, hidden), "normal"
    if per_layer:
        yield "model.embed_tokens_per_layer.weight", (vocab, layers * per_layer), "normal"
        yield "model.per_layer_model_projection.weight", (layers * per_layer, hidden), "normal"
        yield "model.per_layer_projection_norm.weight", (per_layer,), "ones"
    for index, kind in enumerate(geometry.layer_types()):
        prefix = f"model.layers.{index}."
        head_dim = geometry.full_head_dim if kind == "full" else geometry.sliding_head_dim
        kv_heads = geometry.full_kv_heads if kind == "full" else geometry.sliding_kv_heads
        shared = index >= first_shared
        mlp = geometry.intermediate_size * (2 if shared else 1)  # double-wide MLP in KV-shared layers
        yield prefix + "layer_scalar", (1,), "ones"
        yield prefix + "self_attn.q_proj.weight", (geometry.num_attention_heads * head_dim, hidden), "normal"
        yield prefix + "self_attn.q_norm.weight", (head_dim,), "ones"
        if not shared:
            yield prefix + "self_attn.k_proj.weight", (kv_heads * head_dim, hidden), "normal"
            yield prefix + "self_attn.v_proj.weight", (kv_heads * head_dim, hidden), "normal"
            yield prefix + "self_attn.k_norm.weight", (head_dim,), "ones"
        yield prefix + "self_attn.o_proj.weight", (hidden, geometry.num_attention_heads * head_dim), "normal"
        yield prefix + "mlp.gate_proj.weight", (mlp, hidden), "normal"
        yield prefix + "mlp.up_proj.weight", (mlp, hidden), "normal"
        yield prefix + "mlp.down_proj.weight", (hidden, mlp), "normal"
        for norm in LAYER_NORMS:
            yield prefix + norm + ".weight", (hidden,), "ones"
        if per_layer:
            yield prefix + "per_layer_input_gate.weight", (per_layer, hidden), "normal"
            yield prefix + "per_layer_projection.weight", (hidden, per_layer), "normal"
            yield prefix + "post_per_layer_input_norm.weight", (hidden,), "ones"
    yield "model.norm.weight", (hidden,), "ones"


def to_bf16_bytes(values: np.ndarray) -> bytes:
    """float32 → bfloat16 (round to nearest even), as little-endian bytes."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def random_weights(
    shapes: Iterable[tuple[str, tuple[int, ...], Init]], seed: int
) -> list[tuple[str, tuple[int, ...], bytes]]:
    """bf16 bytes of each tensor: random normal draws in tensor order from ``seed``, or filled with one value."""
    rng = np.random.default_rng(seed)
    fill = {"ones": 1.0, "zeros": 0.0, "-inf": -np.inf, "inf": np.inf}
    return [
        (
            name,
            shape,
            to_bf16_bytes(
                rng.normal(0.0, WEIGHT_STD, size=shape).astype(np.float32)
                if init == "normal"
                else np.full(shape, fill[init], np.float32)
            ),
        )
        for name, shape, init in shapes
    ]


def tensor_bytes(tensors: Iterable[tuple[str, tuple[int, ...], Init]]) -> int:
    """bf16 bytes of the tensors (2 per element)."""
    return sum(math.prod(shape) * 2 for _, shape, _ in tensors)


def write_random_weights(path: Path, shapes: Iterable[tuple[str, tuple[int, ...], Init]], seed: int) -> int:
    """One bf16 safetensors file of :func:`random_weights`; returns its data bytes."""
    return write_safetensors_bf16(path, random_weights(shapes, seed))


def write_safetensors_bf16(path: Path, tensors: list[tuple[str, tuple[int, ...], bytes]]) -> int:
    """One safetensors file of bf16 tensors (8-byte header length, JSON header, data); returns data bytes."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)))
        handle.write(encoded)
        for _, _, data in tensors:
            handle.write(data)
    partial.replace(path)
    return offset


def write_text_files(
    out: Path,
    config: dict[str, object],
    tokenizer: dict[str, object],
    tokenizer_settings: dict[str, object],
    chat_template: str,
    extra_specials: tuple[str, ...] = (),
) -> None:
    """config.json, generation config, tokenizer files and chat template: what every checkpoint here carries."""
    out.mkdir(parents=True, exist_ok=True)

    def dump(name: str, value: object) -> None:
        write_atomic(out / name, json.dumps(value, indent=2) + "\n")

    dump("config.json", config)
    dump(
        "generation_config.json",
        {"bos_token_id": BOS_ID, "eos_token_id": [EOS_ID, END_OF_TURN_ID], "pad_token_id": PAD_ID},
    )
    dump("tokenizer.json", tokenizer)
    dump("tokenizer_config.json", tokenizer_settings)
    dump(
        "special_tokens_map.json",
        {
            "bos_token": "<bos>",
            "eos_token": "<eos>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "mask_token": "<mask>",
            "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>", *extra_specials],
        },
    )
    write_atomic(out / "chat_template.jinja", chat_template)
