"""Small real Gemma-4-shaped checkpoints, generated at test time with numpy, torch and safetensors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from gemmaserve.checkpoint import grid

HIDDEN, LAYERS, VOCAB, PLE, INTER = 64, 2, 96, 32, 128
PREFIX = "model.language_model"


def qat_values(rows: int, cols: int, rng: np.random.Generator, *, peak_elsewhere: bool = False) -> np.ndarray:
    """bf16 values on the q4_0 grid: levels -8..7 times a signed bf16 step per group of 32."""
    groups = cols // 32
    levels = rng.integers(-8, 8, size=(rows, groups, 32))
    if peak_elsewhere:
        levels = rng.integers(-5, 6, size=(rows, groups, 32))
    else:
        levels[..., 0] = -8
    steps = grid.round_to_dtype(
        (rng.uniform(0.002, 0.05, size=(rows, groups)) * rng.choice([-1, 1], size=(rows, groups))).astype(np.float32),
        "BF16",
    )
    return grid.reconstruct(levels.astype(np.float32), steps, "BF16").reshape(rows, cols)


def to_bf16(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(grid.f32_to_bf16_bits(values).view(np.int16).copy()).view(torch.bfloat16)


def linear_shapes() -> dict[str, tuple[int, int]]:
    shapes = {}
    for layer in range(LAYERS):
        base = f"{PREFIX}.layers.{layer}"
        shapes.update({
            f"{base}.self_attn.q_proj": (HIDDEN, HIDDEN), f"{base}.self_attn.k_proj": (32, HIDDEN),
            f"{base}.self_attn.v_proj": (32, HIDDEN), f"{base}.self_attn.o_proj": (HIDDEN, HIDDEN),
            f"{base}.mlp.gate_proj": (INTER, HIDDEN), f"{base}.mlp.up_proj": (INTER, HIDDEN),
            f"{base}.mlp.down_proj": (HIDDEN, INTER), f"{base}.per_layer_input_gate": (PLE, HIDDEN),
        })  # fmt: skip
    return shapes


def config(*, tied: bool = True) -> dict:
    return {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "torch_dtype": "bfloat16",
        "image_token_id": 5,
        "audio_token_id": 6,
        "vision_config": {"hidden_size": 32},
        "audio_config": {"hidden_size": 32},
        "text_config": {
            "model_type": "gemma4_text", "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "vocab_size": VOCAB,
            "hidden_size_per_layer_input": PLE // LAYERS * LAYERS // LAYERS, "vocab_size_per_layer_input": VOCAB,
            "intermediate_size": INTER, "tie_word_embeddings": tied, "torch_dtype": "bfloat16",
        },
        "google_field": "kept",
    }  # fmt: skip


def write_unquantized(root: Path, seed: int = 0, *, zero_groups: bool = True, peak_elsewhere: bool = True) -> Path:
    """A -qat-q4_0-unquantized-style directory: 3 shards (body, embeddings, towers) and an index."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    body: dict[str, torch.Tensor] = {}
    for i, (module, (rows, cols)) in enumerate(sorted(linear_shapes().items())):
        values = qat_values(rows, cols, rng, peak_elsewhere=peak_elsewhere and i == 1)
        if zero_groups and i == 0:
            values[0, :32] = 0.0
        body[f"{module}.weight"] = to_bf16(values)
    for layer in range(LAYERS):
        body[f"{PREFIX}.layers.{layer}.input_layernorm.weight"] = to_bf16(
            rng.standard_normal(HIDDEN).astype(np.float32)
        )
    body[f"{PREFIX}.norm.weight"] = to_bf16(np.ones(HIDDEN, np.float32))
    body[f"{PREFIX}.per_layer_model_projection.weight"] = to_bf16(rng.standard_normal((PLE, HIDDEN)).astype(np.float32))
    embeddings = {
        f"{PREFIX}.embed_tokens.weight": to_bf16(rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32)),
        f"{PREFIX}.embed_tokens_per_layer.weight": to_bf16(qat_values(VOCAB, PLE * 1, rng)),
    }
    towers = {
        "model.vision_tower.encoder.layers.0.mlp.fc1.weight": to_bf16(rng.standard_normal((64, 32)).astype(np.float32)),
        "model.embed_vision.embedding_projection.weight": to_bf16(rng.standard_normal((HIDDEN, 32)).astype(np.float32)),
        "model.audio_tower.conformer.0.ffw.weight": to_bf16(rng.standard_normal((64, 32)).astype(np.float32)),
        "model.embed_audio.embedding_projection.weight": to_bf16(rng.standard_normal((HIDDEN, 32)).astype(np.float32)),
    }
    shards = {"model-00001-of-00003.safetensors": body, "model-00002-of-00003.safetensors": embeddings,
              "model-00003-of-00003.safetensors": towers}  # fmt: skip
    weight_map = {}
    for shard, tensors in shards.items():
        save_file(tensors, str(root / shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, shard))
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    cfg = config()
    cfg["text_config"]["hidden_size_per_layer_input"] = PLE // LAYERS
    (root / "config.json").write_text(json.dumps(cfg))
    (root / "tokenizer.json").write_text("{}")
    return root


def reference_linears(reference: Path) -> dict[str, np.ndarray]:
    from safetensors.torch import load_file

    found = {}
    for shard in sorted(reference.glob("*.safetensors")):
        for name, tensor in load_file(str(shard)).items():
            if name[: -len(".weight")] in linear_shapes() and name.endswith(".weight"):
                bits = tensor.view(torch.int16).numpy().view(np.uint16)
                found[name[: -len(".weight")]] = grid.bf16_bits_to_f32(bits)
    return found


def write_awq_build(reference: Path, root: Path, *, clip_ratio: float = 0.7, group_size: int = 32) -> Path:
    """An AutoAWQ-GEMM-layout build of the reference: asymmetric min-max groups with AWQ's range clipping."""
    root.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for module, weight in reference_linears(reference).items():
        w_t = weight.T.astype(np.float32)  # AutoAWQ stores [in, out]
        k, n = w_t.shape
        g = w_t.reshape(k // group_size, group_size, n)
        hi, lo = g.max(axis=1) * clip_ratio, g.min(axis=1) * clip_ratio
        scale = np.maximum(((hi - lo) / 15).astype(np.float16).astype(np.float32), np.float32(2**-14))
        zero = np.clip(np.rint(-lo / scale), 0, 15)
        q = np.clip(np.rint(g / scale[:, None, :]) + zero[:, None, :], 0, 15).reshape(k, n).astype(np.uint8)
        tensors[f"{module}.qweight"] = torch.from_numpy(grid.pack_awq(q))
        tensors[f"{module}.qzeros"] = torch.from_numpy(grid.pack_awq(zero.astype(np.uint8)))
        tensors[f"{module}.scales"] = torch.from_numpy(np.ascontiguousarray(scale, dtype=np.float16))
    save_file(tensors, str(root / "model.safetensors"))
    cfg = config()
    cfg["quantization_config"] = {
        "quant_method": "awq",
        "bits": 4,
        "group_size": group_size,
        "zero_point": True,
        "version": "gemm",
    }
    (root / "config.json").write_text(json.dumps(cfg))
    return root


def write_observer_build(reference: Path, root: Path) -> Path:
    """A compressed-tensors pack-quantized build whose scales come from its absmax/7.5 observer rule."""
    from compressed_tensors.compressors.pack_quantized.base import (
        PackedQuantizationCompressor,
    )
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    scheme = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=32),
    )
    root.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for module, weight in reference_linears(reference).items():
        absmax = np.abs(weight.reshape(weight.shape[0], -1, 32)).max(axis=-1)
        scale = to_bf16(grid.round_to_dtype((absmax / 7.5).astype(np.float32), "BF16"))
        state = PackedQuantizationCompressor.compress({"weight": to_bf16(weight), "weight_scale": scale}, scheme)
        tensors.update({f"{module}.{k}": v for k, v in state.items()})
    save_file(tensors, str(root / "model.safetensors"))
    cfg = config()
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": scheme.weights.model_dump()}}, "ignore": ["lm_head"],
    }  # fmt: skip
    (root / "config.json").write_text(json.dumps(cfg))
    return root


def write_gguf_build(reference: Path, path: Path, *, shift_levels: bool = False) -> Path:
    """A GGUF v3 file of q4_0 tensors made from the reference's own grid (optionally one level off)."""
    import struct as st

    from gemmaserve.checkpoint.gguf import encode_q4_0

    def string(text: str) -> bytes:
        data = text.encode()
        return st.pack("<Q", len(data)) + data

    hf_to_gguf = {"self_attn.q_proj": "attn_q", "mlp.down_proj": "ffn_down"}
    tensors = []
    for module, weight in sorted(reference_linears(reference).items()):
        leaf = module.split(".layers.")[1].split(".", 1)
        if leaf[1] not in hf_to_gguf:
            continue
        fit = grid.recover_grid(weight, model_dtype="BF16")
        levels = fit.levels.astype(np.int16)
        if shift_levels:
            levels = np.clip(levels + (levels % 3 == 0), -8, 7)
        blob = encode_q4_0(levels, fit.steps.astype(np.float16))
        tensors.append((f"blk.{leaf[0]}.{hf_to_gguf[leaf[1]]}.weight", (weight.shape[1], weight.shape[0]), blob))
    head = (
        b"GGUF"
        + st.pack("<IQQ", 3, len(tensors), 1)
        + string("general.architecture")
        + st.pack("<I", 8)
        + string("gemma4")
    )
    offset, infos, data = 0, b"", b""
    for name, dims, blob in tensors:
        infos += string(name) + st.pack("<I", 2) + st.pack("<QQ", *dims) + st.pack("<IQ", 2, offset)
        data += blob + b"\0" * (-len(blob) % 32)
        offset = len(data)
    header = head + infos
    path.write_bytes(header + b"\0" * (-len(header) % 32) + data)
    return path


# --- references on a grid of any group size, and builds re-quantized from them --------------------

GRID_MODULES = {
    f"{PREFIX}.layers.0.self_attn.q_proj": (64, 256),
    f"{PREFIX}.layers.0.mlp.down_proj": (96, 512),
    f"{PREFIX}.layers.1.self_attn.q_proj": (64, 256),
    f"{PREFIX}.layers.1.mlp.gate_proj": (128, 256),
}


def write_grid_reference(root: Path, *, group_size: int, seed: int = 11) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A one-file bf16 reference whose values sit on a 4-bit grid of ``group_size`` (level -8 at each group's start).

    Returns module -> (values float32 [rows, cols], signed bf16 steps float32 [rows, cols / group_size]).
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    truth, tensors = {}, {}
    for module, (rows, cols) in GRID_MODULES.items():
        groups = cols // group_size
        levels = rng.integers(-8, 8, size=(rows, groups, group_size))
        levels[..., 0] = -8
        magnitude = rng.uniform(0.002, 0.05, size=(rows, groups)) * rng.choice([-1, 1], size=(rows, groups))
        steps = grid.round_to_dtype(magnitude.astype(np.float32), "BF16")
        values = grid.reconstruct(levels.astype(np.float32), steps, "BF16").reshape(rows, cols)
        truth[module] = (values, steps)
        tensors[f"{module}.weight"] = to_bf16(values)
    save_file(tensors, str(root / "model.safetensors"), metadata={"format": "pt"})
    (root / "config.json").write_text(json.dumps(config()))
    return truth


def ct_scheme(group_size: int | None) -> object:
    """compressed-tensors W4A16 symmetric: strategy "group" of ``group_size``, or "channel" when None."""
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    strategy = {"strategy": "group", "group_size": group_size} if group_size else {"strategy": "channel"}
    return QuantizationScheme(
        targets=["Linear"], weights=QuantizationArgs(num_bits=4, type="int", symmetric=True, **strategy)
    )


def write_requantized_build(
    values: dict[str, np.ndarray], root: Path, *, group_size: int | None, steps: dict[str, np.ndarray] | None = None
) -> Path:
    """A compressed-tensors pack-quantized build made by compressed-tensors' own compressor.

    Scales are the observer's absmax/7.5 per group (per output row when ``group_size`` is None), in bf16,
    unless ``steps`` gives them (a lossless build).
    """
    from compressed_tensors.compressors.pack_quantized.base import (
        PackedQuantizationCompressor,
    )

    scheme = ct_scheme(group_size)
    root.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for module, weight in values.items():
        rows, cols = weight.shape
        size = group_size or cols
        if steps is not None:
            scale_values = steps[module]
        else:
            absmax = np.abs(weight.reshape(rows, cols // size, size)).max(axis=-1)
            scale_values = grid.round_to_dtype((absmax / 7.5).astype(np.float32), "BF16")
        state = PackedQuantizationCompressor.compress(
            {"weight": to_bf16(weight), "weight_scale": to_bf16(scale_values)},
            scheme,  # type: ignore[arg-type]
        )
        tensors.update({f"{module}.{k}": v for k, v in state.items()})
    save_file(tensors, str(root / "model.safetensors"))
    cfg = config()
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": scheme.weights.model_dump()}},  # type: ignore[attr-defined]
        "ignore": ["lm_head"],
    }  # fmt: skip
    (root / "config.json").write_text(json.dumps(cfg))
    return root


def write_weight_reference(
    root: Path, *, seed: int = 5, channel_spread: float = 0.75, dtype: str = "BF16"
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A QAT-style export of random weights: bf16 weights (input channels of log-normally spread scale, as trained
    weights have) quantized to the group-32 4-bit grid, each group's step bf16(peak / -8), stored as ``dtype`` (the
    same bf16 values widened, for F16 or F32). Returns module -> (values float32, signed steps float32)."""
    from safetensors.numpy import save_file as save_numpy

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    truth, tensors = {}, {}
    for module, (rows, cols) in GRID_MODULES.items():
        spread = np.exp(channel_spread * rng.standard_normal(cols))
        weight = grid.round_to_dtype((rng.standard_normal((rows, cols)) * 0.02 * spread).astype(np.float32), "BF16")
        groups = weight.reshape(rows, cols // 32, 32)
        peaks = np.take_along_axis(groups, np.abs(groups).argmax(axis=-1)[..., None], axis=-1)[..., 0]
        steps = grid.round_to_dtype((peaks / np.float32(-8)).astype(np.float32), "BF16")
        levels = np.clip(np.rint(groups / steps[..., None]), -8, 7) + 0.0  # a level has no sign: no -0.0
        values = grid.reconstruct(levels.astype(np.float32), steps, "BF16").reshape(rows, cols)
        truth[module] = (values, steps)
        tensors[f"{module}.weight"] = grid.encode_values(values, dtype)  # BF16: the bits, as uint16
    if dtype == "BF16":  # safetensors.numpy has no bfloat16: write through torch
        save_file({n: torch.from_numpy(t.view(np.int16).copy()).view(torch.bfloat16) for n, t in tensors.items()},
                  str(root / "model.safetensors"), metadata={"format": "pt"})  # fmt: skip
    else:
        save_numpy(tensors, str(root / "model.safetensors"), metadata={"format": "pt"})
    (root / "config.json").write_text(json.dumps(config()))
    return truth
