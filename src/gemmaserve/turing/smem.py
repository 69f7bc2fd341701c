"""Proof from the compiler: build vLLM's real unified-attention kernel for a target GPU, no GPU needed.

Loads the kernel file (and its helpers file beside it) with small stand-ins for vLLM's own
imports, compiles with ``triton.compile(..., target=GPUTarget("cuda", major*10+minor, 32))`` for
Gemma 4's launches, stock and clamped (the rule's tile and num_warps), and reads shared memory
(Triton's metadata) and registers and spills (``ptxas -v`` on the PTX). ``search_launches`` compiles
every candidate (tile, num_warps; BLOCK_M and stages stock) and picks with ``rule.pick_launch``.
Needs the ``kernel`` extra (triton) only: torch is used when installed, else a stand-in answers the
kernel file's one module-level question (kernel_source.py). ``compile_smem`` is the action.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import tempfile
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from gemmaserve.errors import MissingExtra, UsageError
from gemmaserve.turing.rule import (
    DEFAULT_BLOCK_M,
    STOCK_NUM_WARPS,
    LaunchParams,
    MeasuredLaunch,
    choose_launch,
    pick_launch,
)
from gemmaserve.turing.shape import recognise

if TYPE_CHECKING:
    from gemmaserve.turing.requests import SmemRequest

#: Opt-in shared memory per block by architecture (CUDA programming guide, compute capabilities table).
SMEM_OPTIN_BYTES = {75: 65_536, 80: 166_912, 86: 101_376, 89: 101_376, 90: 232_448}
NUM_QUERIES_PER_KV = 8  # Gemma 4 E2B: 8 query heads, 1 KV head → BLOCK_M 16
NUM_WARPS = STOCK_NUM_WARPS
NUM_STAGES = 3  # Triton's default, which unified_attention launches with
#: Candidates the search compiles: tiles from 16 up to the stock tile, and these warps.
SEARCH_WARPS = (4, 8, 16)
SEARCH_TILES = (16, 32, 64)
_PTXAS_LINE = re.compile(r"Used (\d+) registers")
_PTX_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.MULTILINE)
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


class SearchRow(BaseModel):
    """One compiled candidate launch."""

    head_size: int
    layout: str  # "2D" (prefill and large decode batches) | "3D" (split-KV decode)
    tile_size: int
    block_m: int
    num_warps: int
    num_stages: int
    smem_bytes: int
    fits: bool
    registers: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None
    stock: bool
    chosen: bool


class SearchPick(BaseModel):
    """Per head size and layout: the compiler's best candidate and what the rule launches."""

    head_size: int
    layout: str
    stock: LaunchParams
    picked: LaunchParams | None
    picked_spill_bytes: int | None
    stock_spill_bytes: int | None
    stock_fits: bool
    rule: LaunchParams
    rule_agrees: bool
    stages_checked: list[int]  # stages compiled for the pick: same smem and spills at each (no pipelining)
    stages_independent: bool


class LaunchSearch(BaseModel):
    vllm_file: str
    arch: str
    triton_version: str
    smem_limit_bytes: int
    rows: list[SearchRow]
    picks: list[SearchPick]
    rule_agrees: bool


class SmemReport(BaseModel):
    vllm_file: str
    arch: str
    triton_version: str
    rows: list[SmemRow]
    stock_fits: bool
    clamped_fits: bool
    clamp_changes_launch: bool


class SmemResult(BaseModel):
    """The output schema of the MCP tool: a :class:`SmemReport`, or with ``search`` a :class:`LaunchSearch`.

    Both front ends return the very same document (the CLI's ``--json``); this model only describes the
    two shapes as one object, as MCP needs: the fields either has, then each one's own as optional.
    """

    vllm_file: str
    arch: str
    triton_version: str
    rows: list[SmemRow] | list[SearchRow]
    stock_fits: bool | None = None
    clamped_fits: bool | None = None
    clamp_changes_launch: bool | None = None
    smem_limit_bytes: int | None = None
    picks: list[SearchPick] | None = None
    rule_agrees: bool | None = None


def compile_smem(request: SmemRequest) -> SmemReport | LaunchSearch:
    """``turing smem``: the compile report (or with ``search`` the launch search) a request asks for.

    Raises MissingExtra, UsageError (no kernel file: the hint names --vllm-file).
    """
    path = request.vllm_file or _installed_kernel_file(request.python)
    if request.search:
        return search_launches(vllm_file=path, arch=request.arch, head_sizes=request.head_size)
    return compile_report(vllm_file=path, arch=request.arch, head_sizes=request.head_size, num_warps=request.num_warps)


def _installed_kernel_file(python: str | None) -> str:
    """The kernel file of the vLLM installed for ``python``; without one, how to compile with no vLLM at all."""
    from gemmaserve.turing.filepatch import resolve_target

    try:
        return resolve_target(file=None, python=python).path
    except UsageError as error:
        raise UsageError(
            f"No vLLM kernel file to compile: {error.message}",
            hint="Pass --vllm-file PATH: a copy of vllm/v1/attention/ops/triton_unified_attention.py with "
            "triton_attention_helpers.py beside it, from any vLLM release (unzip both from its wheel: "
            "pip download vllm==VERSION --no-deps); no vLLM install is needed. Or pass --python PATH of "
            "an interpreter that has vLLM.",
            **error.fields,
        ) from None


def launches(head_size: int) -> list[tuple[str, str, bool]]:
    """(phase, layout, is_prefill tile) for the launches vLLM makes: the 2D path reads the prefill tile."""
    return [("prefill", "2D", True), ("decode", "2D", True), ("decode", "3D", False)]


def compile_report(
    *, vllm_file: str, arch: str = "sm_75", head_sizes: tuple[int, ...] = (256, 512), num_warps: int = NUM_WARPS
) -> SmemReport:
    """Compile every Gemma 4 launch stock (``num_warps``) and as the rule launches it, for ``arch``.

    Raises MissingExtra, UsageError.
    """
    triton = _require_kernel_extra()
    capability, limit, module, path = _prepare(vllm_file, arch)
    rows: list[SmemRow] = []
    cache: dict[tuple[int, int, bool, int, int, int], tuple[int, int | None, int | None, int | None]] = {}
    for head in head_sizes:
        window = _window(head)
        for phase, layout, prefill_tile in launches(head):
            stock_tile = module._get_tile_size(head, window, 2, prefill_tile)
            stock = LaunchParams(
                tile_size=stock_tile, block_m=DEFAULT_BLOCK_M, num_stages=NUM_STAGES, num_warps=num_warps
            )
            rule = choose_launch(
                capability=(capability // 10, capability % 10),
                smem_limit_bytes=limit,
                head_size_padded=head,
                element_size=2,
                block_size=16,
                stock=stock,
                num_queries_per_kv=NUM_QUERIES_PER_KV,
                sliding_window=window,
                is_3d=layout == "3D",
            ).launch
            for variant, launch in (("stock", stock), ("clamped", rule)):
                key = (head, launch.tile_size, layout == "3D", window, launch.num_warps, launch.num_stages)
                if key not in cache:
                    cache[key] = _compile_one(
                        module,
                        triton,
                        capability,
                        head,
                        launch.tile_size,
                        layout == "3D",
                        window,
                        launch.num_warps,
                        launch.num_stages,
                    )
                smem, regs, spill_st, spill_ld = cache[key]
                rows.append(
                    SmemRow(
                        arch=arch,
                        head_size=head,
                        phase=phase,
                        layout=layout,
                        variant=variant,
                        tile_size=launch.tile_size,
                        block_m=DEFAULT_BLOCK_M,
                        num_warps=launch.num_warps,
                        smem_bytes=smem,
                        smem_limit_bytes=limit,
                        fits=smem <= limit,
                        registers=regs,
                        spill_store_bytes=spill_st,
                        spill_load_bytes=spill_ld,
                    )
                )
    return SmemReport(
        vllm_file=str(path),
        arch=arch,
        triton_version=triton.__version__,
        rows=rows,
        stock_fits=all(r.fits for r in rows if r.variant == "stock"),
        clamped_fits=all(r.fits for r in rows if r.variant == "clamped"),
        clamp_changes_launch=any(
            (a.tile_size, a.num_warps) != (b.tile_size, b.num_warps) for a, b in zip(rows[::2], rows[1::2], strict=True)
        ),
    )


def search_launches(
    *,
    vllm_file: str,
    arch: str = "sm_75",
    head_sizes: tuple[int, ...] = (256, 512),
    warps: tuple[int, ...] = SEARCH_WARPS,
    stage_checks: tuple[int, ...] = (1,),
) -> LaunchSearch:
    """Compile every candidate launch per head size and layout; pick the one that fits and spills least.

    Tiles run from 16 up to vLLM's own tile for that launch (the rule never raises a tile), warps over
    ``warps``; BLOCK_M stays 16 (it sets ``unified_attention``'s grid) and stages stay stock, and the
    pick is compiled again at ``stage_checks`` stages to show its figures do not depend on them.
    Raises MissingExtra, UsageError.
    """
    triton = _require_kernel_extra()
    capability, limit, module, path = _prepare(vllm_file, arch)
    rows: list[SearchRow] = []
    picks: list[SearchPick] = []
    for head in head_sizes:
        window = _window(head)
        for layout, prefill_tile in (("2D", True), ("3D", False)):
            is_3d = layout == "3D"
            stock_tile = module._get_tile_size(head, window, 2, prefill_tile)
            stock = LaunchParams(
                tile_size=stock_tile, block_m=DEFAULT_BLOCK_M, num_stages=NUM_STAGES, num_warps=STOCK_NUM_WARPS
            )
            measured: list[MeasuredLaunch] = []
            for tile in [t for t in SEARCH_TILES if t <= stock_tile]:
                for count in warps:
                    smem, regs, spill_st, spill_ld = _compile_one(
                        module, triton, capability, head, tile, is_3d, window, count, NUM_STAGES
                    )
                    launch = LaunchParams(
                        tile_size=tile, block_m=DEFAULT_BLOCK_M, num_stages=NUM_STAGES, num_warps=count
                    )
                    spills = None if spill_st is None or spill_ld is None else spill_st + spill_ld
                    measured.append(MeasuredLaunch(launch=launch, smem_bytes=smem, spill_bytes=spills))
                    rows.append(
                        SearchRow(
                            head_size=head,
                            layout=layout,
                            tile_size=tile,
                            block_m=DEFAULT_BLOCK_M,
                            num_warps=count,
                            num_stages=NUM_STAGES,
                            smem_bytes=smem,
                            fits=smem <= limit,
                            registers=regs,
                            spill_store_bytes=spill_st,
                            spill_load_bytes=spill_ld,
                            stock=launch == stock,
                            chosen=False,
                        )
                    )
            picked = pick_launch(measured, smem_limit_bytes=limit, stock=stock)
            rule = choose_launch(
                capability=(capability // 10, capability % 10),
                smem_limit_bytes=limit,
                head_size_padded=head,
                element_size=2,
                block_size=16,
                stock=stock,
                num_queries_per_kv=NUM_QUERIES_PER_KV,
                sliding_window=window,
                is_3d=is_3d,
            ).launch
            checked, independent = [], True
            if picked is not None:
                for row in rows[-len(measured) :]:
                    row.chosen = (row.tile_size, row.num_warps) == (picked.launch.tile_size, picked.launch.num_warps)
                for stages in stage_checks:
                    figures = _compile_one(
                        module,
                        triton,
                        capability,
                        head,
                        picked.launch.tile_size,
                        is_3d,
                        window,
                        picked.launch.num_warps,
                        stages,
                    )
                    checked.append(stages)
                    independent &= (figures[0], figures[2], figures[3]) == (
                        picked.smem_bytes,
                        *_spill_pair(rows, head, layout, picked.launch),
                    )
            stock_measured = next((m for m in measured if m.launch == stock), None)
            picks.append(
                SearchPick(
                    head_size=head,
                    layout=layout,
                    stock=stock,
                    picked=None if picked is None else picked.launch,
                    picked_spill_bytes=None if picked is None else picked.spill_bytes,
                    stock_spill_bytes=None if stock_measured is None else stock_measured.spill_bytes,
                    stock_fits=stock_measured is not None and stock_measured.smem_bytes <= limit,
                    rule=rule,
                    rule_agrees=picked is not None and picked.launch == rule,
                    stages_checked=checked,
                    stages_independent=independent,
                )
            )
    return LaunchSearch(
        vllm_file=str(path),
        arch=arch,
        triton_version=triton.__version__,
        smem_limit_bytes=limit,
        rows=rows,
        picks=picks,
        rule_agrees=all(p.rule_agrees for p in picks),
    )


def _spill_pair(rows: list[SearchRow], head: int, layout: str, launch: LaunchParams) -> tuple[int | None, int | None]:
    row = next(
        r
        for r in rows
        if (r.head_size, r.layout, r.tile_size, r.num_warps) == (head, layout, launch.tile_size, launch.num_warps)
    )
    return row.spill_store_bytes, row.spill_load_bytes


def _window(head: int) -> int:
    return 512 if head == 256 else 0  # Gemma 4: sliding layers head 256 window 512, global head 512


def _prepare(vllm_file: str, arch: str) -> tuple[int, int, types.ModuleType, Path]:
    capability = _arch_number(arch)
    limit = SMEM_OPTIN_BYTES.get(capability)
    if limit is None:
        raise UsageError(
            f"No shared-memory limit known for {arch}.",
            hint=f"Use one of {', '.join(f'sm_{a}' for a in SMEM_OPTIN_BYTES)}.",
        )
    path = Path(vllm_file)
    recognise(path.read_text(), where=str(path))
    return capability, limit, load_kernel_module(path), path


def _require_kernel_extra() -> Any:
    # Only triton: torch is not needed to compile (kernel_source.py stands in for it when it is missing).
    try:
        import triton
    except ImportError as error:
        raise MissingExtra(error.name or "triton", "kernel", "Compiling vLLM's attention kernel") from None
    return triton


def arch_number(arch: str) -> int | None:
    """``"sm_75"`` (or ``"sm75"``) → ``75``; None for anything else."""
    match = re.fullmatch(r"sm_?(\d{2,3})", arch.strip())
    return None if match is None else int(match[1])


def _arch_number(arch: str) -> int:
    number = arch_number(arch)
    if number is None:
        raise UsageError(f"{arch!r} is not an architecture.", hint="Use the form sm_75.")
    return number


def load_kernel_module(path: Path) -> types.ModuleType:
    """The kernel file as a module (its helpers file must sit beside it, as in an installed vLLM)."""
    from gemmaserve.turing.kernel_source import TorchStandInTooSmall
    from gemmaserve.turing.kernel_source import load_kernel_module as load

    try:
        return load(path)
    except FileNotFoundError as error:
        raise UsageError(
            f"{error}; the kernel imports it.",
            hint="Point --vllm-file at the file inside an "
            "installed vllm/v1/attention/ops/ (or a copy with its helpers beside it).",
        ) from None
    except TorchStandInTooSmall as error:
        # A newer kernel file asks torch for more than the stand-in knows, and torch is not installed.
        raise UsageError(
            f"{path} needs more of torch than gemmaserve's stand-in offers: {error}.",
            hint="pip install torch (the CPU build is enough: nothing runs on a GPU).",
            file=str(path),
        ) from None


_POINTER_TYPES = {
    "query_ptr": "*fp16",
    "key_cache_ptr": "*fp16",
    "value_cache_ptr": "*fp16",
    "output_ptr": "*fp16",
    "segm_output_ptr": "*fp32",
    "segm_max_ptr": "*fp32",
    "segm_expsum_ptr": "*fp32",
    "block_tables_ptr": "*i32",
    "seq_lens_ptr": "*i32",
    "query_start_len_ptr": "*i32",
    "sink_ptr": "*fp32",
    "q_scale": "*fp32",
    "k_scale": "*fp32",
    "v_scale": "*fp32",
    "out_scale": "*fp32",
}


def _constexprs(head: int, tile: int, is_3d: bool, window: int) -> dict[str, Any]:
    return {
        "num_query_heads": NUM_QUERIES_PER_KV,
        "num_queries_per_kv": NUM_QUERIES_PER_KV,
        "BLOCK_SIZE": 16,
        "TILE_SIZE": tile,
        "HEAD_SIZE": head,
        "HEAD_SIZE_PADDED": head,
        "SLIDING_WINDOW": window,
        "USE_CAUSAL": True,
        "MAX_MM_RANGES": 0,
        "R_SWA_WINDOW": 0,
        "stride_k_cache_3": 1,
        "stride_v_cache_3": 1,
        "BLOCK_Q": DEFAULT_BLOCK_M // NUM_QUERIES_PER_KV,
        "BLOCK_M": DEFAULT_BLOCK_M,
        "NUM_SEGMENTS_PER_SEQ": 16 if is_3d else 1,
        "USE_FP8": False,
        "IS_3D": is_3d,
    }


def _compile_one(
    module: types.ModuleType,
    triton: Any,
    capability: int,
    head: int,
    tile: int,
    is_3d: bool,
    window: int,
    num_warps: int,
    num_stages: int = NUM_STAGES,
) -> tuple[int, int | None, int | None, int | None]:
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
    compiled = triton.compile(
        source,
        target=GPUTarget("cuda", capability, 32),
        options={"num_warps": num_warps, "num_stages": num_stages, "enable_fp_fusion": True},
    )
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
        # Triton writes ".target sm_90a" for Hopper: ptxas must be given the PTX's own target.
        target = _PTX_TARGET.search(ptx)
        gpu_name = target[1] if target else f"sm_{capability}"
        done = subprocess.run(
            [binary, "-v", f"--gpu-name={gpu_name}", str(source), "-o", str(Path(folder) / "kernel.cubin")],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    text = done.stdout + done.stderr
    registers = _PTXAS_LINE.search(text)
    spills = _SPILL.search(text)
    return (
        int(registers[1]) if registers else None,
        int(spills[1]) if spills else None,
        int(spills[2]) if spills else None,
    )
