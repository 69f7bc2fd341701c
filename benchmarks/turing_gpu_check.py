"""Run vLLM's real unified-attention kernel on a GPU with the stock and the Turing-clamped tiles.

For Gemma 4's shapes (head 256 with sliding window 512, head 512 global; 8 query heads per KV
head; paged KV in blocks of 16; a batch of mixed prefill and decode, and a decode-only batch on
the 3D split-KV path) it compares each launch against a float64 reference on fresh random
inputs, and times stock vs clamped with triton.testing.do_bench. Needs torch + triton and a CUDA
GPU; gemmaserve itself is not imported (the rule's function is read from rule.py's source).

    python benchmarks/turing_gpu_check.py --vllm-dir DIR --out results.json
"""

from __future__ import annotations

import argparse
import ast
import enum
import importlib.util
import json
import logging
import sys
import types
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

RULE_FILE = Path(__file__).resolve().parent.parent / "src" / "gemmaserve" / "turing" / "rule.py"
T4_MAJOR, T4_SMEM_OPTIN_BYTES = 7, 65_536
NUM_Q_HEADS, NUM_KV_HEADS, BLOCK_SIZE, SEGMENTS = 8, 1, 16, 16


def load_rule() -> Any:
    tree = ast.parse(RULE_FILE.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "clamp_tile_size")
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(RULE_FILE), "exec"), namespace)
    return namespace["clamp_tile_size"]


class _Stand(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return False


def load_kernel(folder: Path) -> types.ModuleType:
    class Platform:
        def fp8_dtype(self) -> Any:
            return torch.float8_e4m3fn

        def __getattr__(self, name: str) -> Any:
            return lambda *a, **k: False

    class KVQuantMode(enum.IntEnum):
        NONE = 0
        FP8_PER_TENSOR = 1
        INT8_PER_TOKEN_HEAD = 2
        FP8_PER_TOKEN_HEAD = 3
        INT4_PER_TOKEN_HEAD = 4

    names = ["vllm", "vllm.envs", "vllm.logger", "vllm.platforms", "vllm.triton_utils", "vllm.v1",
             "vllm.v1.attention", "vllm.v1.attention.ops", "vllm.v1.kv_cache_interface"]
    stands = {n: _Stand(n) for n in names}
    for name, stand in stands.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(stands[parent], child, stand)
    stands["vllm.logger"].init_logger = logging.getLogger
    stands["vllm.platforms"].current_platform = Platform()
    stands["vllm.triton_utils"].tl = tl
    stands["vllm.triton_utils"].triton = triton
    stands["vllm.v1.kv_cache_interface"].KVQuantMode = KVQuantMode
    sys.modules.update(stands)
    for name, file in (("vllm.v1.attention.ops.triton_attention_helpers", "triton_attention_helpers.py"),
                       ("vllm.v1.attention.ops.triton_unified_attention", "triton_unified_attention.py")):
        spec = importlib.util.spec_from_file_location(name, folder / file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def make_batch(query_lens: list[int], context_lens: list[int], head: int, gen: torch.Generator) -> dict[str, Any]:
    dev = "cuda"
    total_q = sum(query_lens)
    blocks_per_seq = [(c + BLOCK_SIZE - 1) // BLOCK_SIZE for c in context_lens]
    num_blocks = sum(blocks_per_seq) + 8
    q = torch.randn(total_q, NUM_Q_HEADS, head, generator=gen, device=dev, dtype=torch.float16)
    k = torch.randn(num_blocks, BLOCK_SIZE, NUM_KV_HEADS, head, generator=gen, device=dev, dtype=torch.float16)
    v = torch.randn(num_blocks, BLOCK_SIZE, NUM_KV_HEADS, head, generator=gen, device=dev, dtype=torch.float16)
    perm = torch.randperm(num_blocks, generator=gen, device=dev).to(torch.int32)
    table = torch.zeros(len(query_lens), max(blocks_per_seq), dtype=torch.int32, device=dev)
    used = 0
    for i, nb in enumerate(blocks_per_seq):
        table[i, :nb] = perm[used:used + nb]
        used += nb
    cu = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32, device=dev)
    return {"q": q, "k": k, "v": v, "table": table, "cu": cu, "query_lens": query_lens,
            "context_lens": context_lens, "seqused": torch.tensor(context_lens, dtype=torch.int32, device=dev)}


def reference(batch: dict[str, Any], head: int, window: int) -> torch.Tensor:
    out = torch.empty_like(batch["q"], dtype=torch.float64)
    scale = head ** -0.5
    for i, (ql, cl) in enumerate(zip(batch["query_lens"], batch["context_lens"])):
        nb = (cl + BLOCK_SIZE - 1) // BLOCK_SIZE
        blocks = batch["table"][i, :nb].long()
        keys = batch["k"][blocks].reshape(-1, NUM_KV_HEADS, head)[:cl].double()
        values = batch["v"][blocks].reshape(-1, NUM_KV_HEADS, head)[:cl].double()
        start = int(batch["cu"][i])
        q = batch["q"][start:start + ql].double()  # (ql, H, D)
        kv = keys[:, 0]  # one KV head shared by all query heads
        scores = torch.einsum("qhd,kd->hqk", q, kv) * scale
        qpos = torch.arange(cl - ql, cl, device=q.device)[:, None]
        kpos = torch.arange(cl, device=q.device)[None, :]
        allowed = kpos <= qpos
        if window:
            allowed &= (qpos - kpos) < window
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        out[start:start + ql] = torch.einsum("hqk,kd->qhd", scores.softmax(-1), values[:, 0])
    return out


def run_kernel(module: Any, batch: dict[str, Any], head: int, window: int, use_3d: bool) -> torch.Tensor:
    out = torch.empty_like(batch["q"])
    kwargs: dict[str, Any] = {}
    if use_3d:
        tokens = batch["q"].shape[0]
        padded = triton.next_power_of_2(head)
        kwargs = dict(seq_threshold_3D=1 << 20, num_par_softmax_segments=SEGMENTS,
                      softmax_segm_output=torch.empty(tokens, NUM_Q_HEADS, SEGMENTS, padded, dtype=torch.float32,
                                                      device="cuda"),
                      softmax_segm_max=torch.empty(tokens, NUM_Q_HEADS, SEGMENTS, dtype=torch.float32, device="cuda"),
                      softmax_segm_expsum=torch.empty(tokens, NUM_Q_HEADS, SEGMENTS, dtype=torch.float32,
                                                      device="cuda"))
    module.unified_attention(
        q=batch["q"], k=batch["k"], v=batch["v"], out=out, cu_seqlens_q=batch["cu"],
        max_seqlen_q=max(batch["query_lens"]), seqused_k=batch["seqused"], max_seqlen_k=max(batch["context_lens"]),
        softmax_scale=head ** -0.5, causal=True, window_size=(window - 1, 0) if window else (-1, -1),
        block_table=batch["table"], softcap=0, q_descale=None, k_descale=None, v_descale=None, **kwargs)
    return out


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.double() - ref).norm() / ref.norm())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vllm-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    module = load_kernel(args.vllm_dir)
    clamp = load_rule()
    stock_tile_fn = module._get_tile_size

    def clamped_tile_fn(head_size: int, sliding_window: int, element_size: int, is_prefill: bool) -> int:
        tile = stock_tile_fn(head_size, sliding_window, element_size, is_prefill)
        return clamp(T4_MAJOR, T4_SMEM_OPTIN_BYTES, triton.next_power_of_2(head_size), element_size, tile)

    variants = {"stock": stock_tile_fn, "clamped": clamped_tile_fn}
    gen = torch.Generator(device="cuda").manual_seed(1234)
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "triton": triton.__version__, "accuracy": [], "timing": []}
    accuracy_cases = [("mixed prefill+decode", [1, 1, 1, 1, 37, 128], [700, 1500, 64, 3000, 237, 1128], False),
                      ("decode only (3D split-KV)", [1] * 8, [513, 1000, 2047, 4096, 64, 777, 1500, 3333], True)]
    for head, window in ((256, 512), (512, 0)):
        for name, qls, cls, use_3d in accuracy_cases:
            batch = make_batch(qls, cls, head, gen)
            ref = reference(batch, head, window)
            row: dict[str, Any] = {"head_size": head, "window": window, "case": name,
                                   "fp16_rounding_rel_err": rel_err(ref.half(), ref)}
            for variant, fn in variants.items():
                module._get_tile_size = fn
                row[f"{variant}_tile_prefill"] = fn(head, window, 2, True)
                row[f"{variant}_tile_decode"] = fn(head, window, 2, False)
                try:
                    row[f"{variant}_rel_err"] = rel_err(run_kernel(module, batch, head, window, use_3d), ref)
                except Exception as error:  # noqa: BLE001 — record and go on
                    row[f"{variant}_error"] = f"{type(error).__name__}: {error}"[:500]
            results["accuracy"].append(row)
            print(json.dumps(row), flush=True)
    timing_cases = [("prefill 4x1024 tokens, ctx 2048", [1024] * 4, [2048] * 4, False),
                    ("mixed 32 decode + 2x512 prefill, ctx 4096", [1] * 32 + [512] * 2, [4096] * 34, False),
                    ("decode 64 seqs, ctx 4096 (3D)", [1] * 64, [4096] * 64, True)]
    for head, window in ((256, 512), (512, 0)):
        for name, qls, cls, use_3d in timing_cases:
            batch = make_batch(qls, cls, head, gen)
            row = {"head_size": head, "window": window, "case": name}
            for variant, fn in variants.items():
                module._get_tile_size = fn
                try:
                    row[f"{variant}_ms"] = triton.testing.do_bench(
                        lambda: run_kernel(module, batch, head, window, use_3d), warmup=50, rep=300)
                except Exception as error:  # noqa: BLE001
                    row[f"{variant}_error"] = f"{type(error).__name__}: {error}"[:500]
            if "stock_ms" in row and "clamped_ms" in row:
                row["clamped_over_stock"] = row["clamped_ms"] / row["stock_ms"]
            results["timing"].append(row)
            print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
