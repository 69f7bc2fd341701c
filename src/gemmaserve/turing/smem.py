"""Proof from the compiler: build vLLM's real unified-attention kernel for a target GPU, no GPU needed.

Loads the kernel file (and its helpers file beside it) with small stand-ins for vLLM's own
imports, compiles with ``triton.compile(..., target=GPUTarget("cuda", major*10+minor, 32))`` for
Gemma 4's launches, stock and clamped, and reads shared memory (Triton's metadata) and registers
and spills (``ptxas -v`` on the PTX). Needs the ``kernel`` extra (triton) and torch.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import tempfile
import types
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gemmaserve.errors import MissingExtra, UsageError
from gemmaserve.turing.rule import DEFAULT_BLOCK_M, clamp_tile_size
from gemmaserve.turing.shape import recognise

#: Opt-in shared memory per block by architecture (CUDA programming guide, compute capabilities table).
SMEM_OPTIN_BYTES = {75: 65_536, 80: 166_912, 86: 101_376, 89: 101_376, 90: 232_448}
NUM_QUERIES_PER_KV = 8  # Gemma 4 E2B: 8 query heads, 1 KV head → BLOCK_M 16
NUM_WARPS = 4
NUM_STAGES = 3
_PTXAS_LINE = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


class SmemRow(BaseModel):
    arch: str
    head_size: int
    phase: str  # "prefill" | "decode"
    layout: str  # "2D" | "3D"
    variant: str  # "stock" | "clamped"
    tile_size: int
    block_m: int
    num_warps: int
    smem_bytes: int
    smem_limit_bytes: int
    fits: bool
    registers: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None


class SmemReport(BaseModel):
    vllm_file: str
    arch: str
    triton_version: str
    rows: list[SmemRow]
    stock_fits: bool
    clamped_fits: bool
    clamp_changes_launch: bool


def launches(head_size: int) -> list[tuple[str, str, bool]]:
    """(phase, layout, is_prefill tile) for the launches vLLM makes: the 2D path reads the prefill tile."""
    return [("prefill", "2D", True), ("decode", "2D", True), ("decode", "3D", False)]


def compile_report(*, vllm_file: str, arch: str = "sm_75", head_sizes: tuple[int, ...] = (256, 512),
                   num_warps: int = NUM_WARPS) -> SmemReport:
    """Compile every Gemma 4 launch stock and clamped for ``arch``. Raises MissingExtra, UsageError."""
    triton, _ = _require_kernel_extra()
    capability = _arch_number(arch)
    limit = SMEM_OPTIN_BYTES.get(capability)
    if limit is None:
        raise UsageError(f"No shared-memory limit known for {arch}.", hint=f"Use one of "
                         f"{', '.join(f'sm_{a}' for a in SMEM_OPTIN_BYTES)}.")
    path = Path(vllm_file)
    recognise(path.read_text(), where=str(path))
    module = load_kernel_module(path)
    rows: list[SmemRow] = []
    cache: dict[tuple[int, int, bool, int], tuple[int, int | None, int | None, int | None]] = {}
    for head in head_sizes:
        window = 512 if head == 256 else 0  # Gemma 4: sliding layers head 256 window 512, global head 512
        for phase, layout, prefill_tile in launches(head):
            stock_tile = module._get_tile_size(head, window, 2, prefill_tile)
            clamped_tile = clamp_tile_size(capability // 10, limit, head, 2, stock_tile, DEFAULT_BLOCK_M)
            for variant, tile in (("stock", stock_tile), ("clamped", clamped_tile)):
                key = (head, tile, layout == "3D", window)
                if key not in cache:
                    cache[key] = _compile_one(module, triton, capability, head, tile, layout == "3D", window,
                                              num_warps)
                smem, regs, spill_st, spill_ld = cache[key]
                rows.append(SmemRow(arch=arch, head_size=head, phase=phase, layout=layout, variant=variant,
                                    tile_size=tile, block_m=DEFAULT_BLOCK_M, num_warps=num_warps, smem_bytes=smem,
                                    smem_limit_bytes=limit, fits=smem <= limit, registers=regs,
                                    spill_store_bytes=spill_st, spill_load_bytes=spill_ld))
    return SmemReport(vllm_file=str(path), arch=arch, triton_version=triton.__version__, rows=rows,
                      stock_fits=all(r.fits for r in rows if r.variant == "stock"),
                      clamped_fits=all(r.fits for r in rows if r.variant == "clamped"),
                      clamp_changes_launch=any(a.tile_size != b.tile_size for a, b in zip(rows[::2], rows[1::2])))


def _require_kernel_extra() -> tuple[Any, Any]:
    try:
        import torch
        import triton
    except ImportError as error:
        raise MissingExtra(error.name or "triton", "kernel", "Compiling vLLM's attention kernel") from None
    return triton, torch


def _arch_number(arch: str) -> int:
    match = re.fullmatch(r"sm_?(\d{2,3})", arch.strip())
    if match is None:
        raise UsageError(f"{arch!r} is not an architecture.", hint="Use the form sm_75.")
    return int(match[1])


def load_kernel_module(path: Path) -> types.ModuleType:
    """The kernel file as a module (its helpers file must sit beside it, as in an installed vLLM)."""
    from gemmaserve.turing.kernel_source import load_kernel_module as load

    try:
        return load(path)
    except FileNotFoundError as error:
        raise UsageError(f"{error}; the kernel imports it.", hint="Point --vllm-file at the file inside an "
                         "installed vllm/v1/attention/ops/ (or a copy with its helpers beside it).") from None


_POINTER_TYPES = {"query_ptr": "*fp16", "key_cache_ptr": "*fp16", "value_cache_ptr": "*fp16",
                  "output_ptr": "*fp16", "segm_output_ptr": "*fp32", "segm_max_ptr": "*fp32",
                  "segm_expsum_ptr": "*fp32", "block_tables_ptr": "*i32", "seq_lens_ptr": "*i32",
                  "query_start_len_ptr": "*i32", "sink_ptr": "*fp32", "q_scale": "*fp32", "k_scale": "*fp32",
                  "v_scale": "*fp32", "out_scale": "*fp32"}


def _constexprs(head: int, tile: int, is_3d: bool, window: int) -> dict[str, Any]:
    return {"num_query_heads": NUM_QUERIES_PER_KV, "num_queries_per_kv": NUM_QUERIES_PER_KV, "BLOCK_SIZE": 16,
            "TILE_SIZE": tile, "HEAD_SIZE": head, "HEAD_SIZE_PADDED": head, "SLIDING_WINDOW": window,
            "USE_CAUSAL": True, "MAX_MM_RANGES": 0, "R_SWA_WINDOW": 0, "stride_k_cache_3": 1,
            "stride_v_cache_3": 1, "BLOCK_Q": DEFAULT_BLOCK_M // NUM_QUERIES_PER_KV, "BLOCK_M": DEFAULT_BLOCK_M,
            "NUM_SEGMENTS_PER_SEQ": 16 if is_3d else 1, "USE_FP8": False, "IS_3D": is_3d}


def _compile_one(module: types.ModuleType, triton: Any, capability: int, head: int, tile: int, is_3d: bool,
                 window: int, num_warps: int) -> tuple[int, int | None, int | None, int | None]:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = module.kernel_unified_attention
    fixed = _constexprs(head, tile, is_3d, window)
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    for param in kernel.params:
        name = param.name
        if name in fixed:
            signature[name], constexprs[name] = "constexpr", fixed[name]
        elif param.is_constexpr:
            default = param.default if param.default is not inspect.Parameter.empty else False
            signature[name], constexprs[name] = "constexpr", default
        elif param.default is None and name not in _POINTER_TYPES:
            signature[name], constexprs[name] = "constexpr", None
        elif name in _POINTER_TYPES or name.endswith("_ptr"):
            signature[name] = _POINTER_TYPES.get(name, "*fp32")
        elif "stride" in name:
            signature[name] = "i64"
        elif name == "num_seqs":
            signature[name] = "i32"
        else:
            signature[name] = "fp32"  # scale, softcap
    source = ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
    compiled = triton.compile(source, target=GPUTarget("cuda", capability, 32),
                              options={"num_warps": num_warps, "num_stages": NUM_STAGES, "enable_fp_fusion": True})
    smem = int(compiled.metadata.shared)
    registers, spill_store, spill_load = _ptxas_figures(compiled.asm["ptx"], capability)
    return smem, registers, spill_store, spill_load


def _ptxas_figures(ptx: str, capability: int) -> tuple[int | None, int | None, int | None]:
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(capability)
    binary = ptxas.path if hasattr(ptxas, "path") else str(ptxas[0])
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run([binary, "-v", f"--gpu-name=sm_{capability}", str(source), "-o",
                               str(Path(folder) / "kernel.cubin")], capture_output=True, text=True, timeout=300,
                              check=False)
    text = done.stdout + done.stderr
    registers = _PTXAS_LINE.search(text)
    spills = _SPILL.search(text)
    return (int(registers[1]) if registers else None, int(spills[1]) if spills else None,
            int(spills[2]) if spills else None)
