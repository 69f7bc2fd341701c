"""Write a random-weight Gemma 4 text checkpoint that a real vLLM serves offline.

For tests and GPU-machine checks of the real engine: ``config.json`` in the Hugging Face
``gemma4_text`` format (``Gemma4ForCausalLM``), bf16 weights in one safetensors file under
the Hugging Face names, and a byte-level tokenizer written as JSON (no training, no
network) with a Gemma-style chat template (the pieces: :mod:`gemmaserve.testing.tiny_gemma4_parts`).
The geometry is a catalog :class:`Geometry`: :data:`TINY_GEOMETRY` (4 layers, sliding 256-wide and
full-attention 512-wide heads, KV sharing, per-layer inputs) or a catalog model's real one with
``weights=False`` (serve it with ``--load-format dummy``). Needs numpy only; never reaches the network.
``--multimodal`` writes a ``Gemma4ForConditionalGeneration`` with vision and audio towers and
the processor files instead (:mod:`gemmaserve.testing.tiny_gemma4_mm`).

    python -m gemmaserve.testing.tiny_gemma4 OUT_DIR [--geometry tiny|gemma-4-e2b] [--no-weights] [--multimodal]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import BaseModel

from gemmaserve.catalog import Geometry, resolve_model
from gemmaserve.testing.tiny_gemma4_mm import TINY_MM_GEOMETRY, write_tiny_gemma4_mm
from gemmaserve.testing.tiny_gemma4_parts import (
    CHAT_TEMPLATE,
    TINY_GEOMETRY,
    TOKENIZER_SIZE,
    model_config,
    tensor_bytes,
    tensor_shapes,
    tokenizer_config,
    tokenizer_json,
    write_random_weights,
    write_text_files,
)


class TinyCheckpoint(BaseModel):
    path: str
    layer_types: list[str]
    head_dims: list[int]
    kv_shared_layers: list[int]
    vocab_size: int
    tokenizer_size: int
    tensors: int
    weight_bytes: int  # 0 when written without weights


def write_tiny_gemma4(
    out_dir: str | Path, geometry: Geometry = TINY_GEOMETRY, *, seed: int = 0, weights: bool = True
) -> TinyCheckpoint:
    """Write config, generation config, tokenizer and (unless ``weights=False``) random bf16 weights.

    Raises:
        ValueError: a geometry Gemma 4's text model cannot express, or a vocabulary smaller than the tokenizer.
    """
    if geometry.vocab_size < TOKENIZER_SIZE:
        raise ValueError(f"vocab_size {geometry.vocab_size} is below the tokenizer's {TOKENIZER_SIZE} tokens")
    config = model_config(geometry)
    out = Path(out_dir)
    write_text_files(out, config, tokenizer_json(), tokenizer_config(), CHAT_TEMPLATE)
    shapes = list(tensor_shapes(geometry))
    weight_bytes = write_random_weights(out / "model.safetensors", shapes, seed) if weights else 0
    types = geometry.layer_types()
    first_shared = geometry.num_hidden_layers - geometry.num_kv_shared_layers
    return TinyCheckpoint(
        path=str(out),
        layer_types=list(config["layer_types"]),  # type: ignore[call-overload]
        head_dims=[geometry.full_head_dim if kind == "full" else geometry.sliding_head_dim for kind in types],
        kv_shared_layers=list(range(first_shared, geometry.num_hidden_layers)),
        vocab_size=geometry.vocab_size,
        tokenizer_size=TOKENIZER_SIZE,
        tensors=len(shapes),
        weight_bytes=weight_bytes,
    )


def expected_weight_bytes(geometry: Geometry) -> int:
    return tensor_bytes(tensor_shapes(geometry))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--geometry", default="tiny", help="'tiny' or a catalog model key (e.g. gemma-4-e2b)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-weights", action="store_true", help="config and tokenizer only (--load-format dummy)")
    parser.add_argument(
        "--multimodal",
        action="store_true",
        help="Gemma4ForConditionalGeneration with vision and audio towers and the processor files "
        "(gemmaserve.testing.tiny_gemma4_mm): tiny towers for 'tiny', the E2B/E4B towers otherwise",
    )
    args = parser.parse_args(argv)
    result: BaseModel
    if args.multimodal:
        geometry = TINY_MM_GEOMETRY if args.geometry == "tiny" else resolve_model(args.geometry).geometry
        result = write_tiny_gemma4_mm(args.out, geometry, seed=args.seed, weights=not args.no_weights)
    else:
        geometry = TINY_GEOMETRY if args.geometry == "tiny" else resolve_model(args.geometry).geometry
        result = write_tiny_gemma4(args.out, geometry, seed=args.seed, weights=not args.no_weights)
    sys.stdout.write(result.model_dump_json() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
