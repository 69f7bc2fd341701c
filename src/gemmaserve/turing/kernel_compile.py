"""Compile one launch of vLLM's unified-attention kernel for a target GPU and read the compiler's figures.

``compile_launch`` runs ``triton.compile(..., target=GPUTarget("cuda", capability, 32))`` (no GPU
needed) and reads shared memory from Triton's metadata and registers and spills from ``ptxas -v`` on
the PTX. ``CompileRun`` compiles a planned list of launches once each and reports each one with the
launches left and an ETA from the pace so far (``gemmaserve.progress``); its clock and compiler are
injectable. No rule and no policy here: smem.py decides what to compile.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from gemmaserve.progress import CancelToken, ProgressCallback, ProgressEvent, check, report
from gemmaserve.turing.rule import block_m_for

_PTXAS_LINE = re.compile(r"Used (\d+) registers")
_PTX_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.MULTILINE)
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
#: The KV cache block size the launches are compiled with (vLLM's default on CUDA).
KV_BLOCK_SIZE = 16
#: Split-KV segments of the 3D launch (vLLM's NUM_PAR_SOFTMAX_SEGMENTS).
SEGMENTS_3D = 16


class LaunchSpec(BaseModel):
    """One compile of the kernel: the compile-time constants that differ between Gemma 4's launches."""

    model_config = ConfigDict(frozen=True)

    head_size: int
    tile_size: int
    is_3d: bool
    sliding_window: int
    num_query_heads: int
    num_queries_per_kv: int
    num_warps: int
    num_stages: int

    def describe(self) -> str:
        return (
            f"head {self.head_size} {'3D' if self.is_3d else '2D'} tile {self.tile_size}, {self.num_warps} warps, "
            f"{self.num_query_heads} query heads, {self.num_queries_per_kv} per KV head"
            + (f", window {self.sliding_window}" if self.sliding_window else "")
            + (f", {self.num_stages} stage{'s' if self.num_stages != 1 else ''}" if self.num_stages != 3 else "")
        )


class LaunchFigures(BaseModel):
    """What the compiler says of one launch: shared memory (bytes per block), registers and spills per thread."""

    model_config = ConfigDict(frozen=True)

    smem_bytes: int
    registers: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None

    @property
    def spill_bytes(self) -> int | None:
        if self.spill_store_bytes is None or self.spill_load_bytes is None:
            return None
        return self.spill_store_bytes + self.spill_load_bytes


Compiler = Callable[[LaunchSpec], LaunchFigures]


class CompileRun:
    """Compiles each planned launch once, reporting each with the launches left and an ETA from the pace so far.

    ``planned`` is how many distinct launches the caller expects to compile (it may lower it with
    ``skip`` when a planned compile turns out not to be needed); a launch asked for again is answered
    from this run's memory without a compile and without an event. A cancel stops it before the next
    compile (:class:`~gemmaserve.progress.Cancelled`).
    """

    def __init__(
        self,
        compiler: Compiler,
        planned: int,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.compiler = compiler
        self.planned = planned
        self.progress = progress
        self.cancel = cancel
        self.clock = clock
        self.done = 0
        self.figures: dict[LaunchSpec, LaunchFigures] = {}
        self.started = clock()

    def __call__(self, spec: LaunchSpec) -> LaunchFigures:
        if spec in self.figures:
            return self.figures[spec]
        check(self.cancel)  # between two compiles: nothing is left half-made
        figures = self.compiler(spec)
        self.figures[spec] = figures
        self.done += 1
        self.planned = max(self.planned, self.done)
        left_s = (self.clock() - self.started) / self.done * (self.planned - self.done)
        eta = f", about {left_s:.0f} s left" if self.done < self.planned and left_s >= 1 else ""
        report(
            self.progress,
            ProgressEvent(
                "compiling",
                f"Compiled {spec.describe()} ({self.done}/{self.planned} launches{eta})",
                done=self.done,
                total=self.planned,
            ),
        )
        return figures

    def skip(self, count: int = 1) -> None:
        """``count`` planned compiles will not happen after all (the total shrinks, the ETA with it)."""
        self.planned = max(self.done, self.planned - count)


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


def constexprs(spec: LaunchSpec) -> dict[str, Any]:
    """The kernel's compile-time constants for ``spec``, as ``unified_attention`` passes them.

    BLOCK_M and BLOCK_Q follow the launcher (vLLM 0.34.0 triton_unified_attention.py:1073-1076):
    BLOCK_M 16 up to 16 query heads per KV head, BLOCK_Q = BLOCK_M // num_queries_per_kv.
    """
    block_m = block_m_for(spec.num_queries_per_kv)
    return {
        "num_query_heads": spec.num_query_heads,
        "num_queries_per_kv": spec.num_queries_per_kv,
        "BLOCK_SIZE": KV_BLOCK_SIZE,
        "TILE_SIZE": spec.tile_size,
        "HEAD_SIZE": spec.head_size,
        "HEAD_SIZE_PADDED": spec.head_size,
        "SLIDING_WINDOW": spec.sliding_window,
        "USE_CAUSAL": True,
        "MAX_MM_RANGES": 0,
        "R_SWA_WINDOW": 0,
        "stride_k_cache_3": 1,
        "stride_v_cache_3": 1,
        "BLOCK_Q": block_m // spec.num_queries_per_kv,
        "BLOCK_M": block_m,
        "NUM_SEGMENTS_PER_SEQ": SEGMENTS_3D if spec.is_3d else 1,
        "USE_FP8": False,
        "IS_3D": spec.is_3d,
    }


def kernel_compiler(module: types.ModuleType, triton: Any, capability: int) -> Compiler:
    """A :data:`Compiler` of ``module``'s kernel for ``capability`` (e.g. 75) with the real Triton and ptxas."""

    def compile_launch(spec: LaunchSpec) -> LaunchFigures:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        kernel = module.kernel_unified_attention
        fixed = constexprs(spec)
        signature: dict[str, str] = {}
        constants: dict[str, Any] = {}
        for param in kernel.params:
            name = param.name
            if name in fixed:
                signature[name], constants[name] = "constexpr", fixed[name]
            elif param.is_constexpr:
                default = param.default if param.default is not inspect.Parameter.empty else False
                signature[name], constants[name] = "constexpr", default
            elif param.default is None and name not in _POINTER_TYPES:
                signature[name], constants[name] = "constexpr", None
            elif name in _POINTER_TYPES or name.endswith("_ptr"):
                signature[name] = _POINTER_TYPES.get(name, "*fp32")
            elif "stride" in name:
                signature[name] = "i64"
            elif name == "num_seqs":
                signature[name] = "i32"
            else:
                signature[name] = "fp32"  # scale, softcap
        source = ASTSource(fn=kernel, signature=signature, constexprs=constants)
        compiled = triton.compile(
            source,
            target=GPUTarget("cuda", capability, 32),
            options={"num_warps": spec.num_warps, "num_stages": spec.num_stages, "enable_fp_fusion": True},
        )
        registers, spill_store, spill_load = ptxas_figures(compiled.asm["ptx"], capability)
        return LaunchFigures(
            smem_bytes=int(compiled.metadata.shared),
            registers=registers,
            spill_store_bytes=spill_store,
            spill_load_bytes=spill_load,
        )

    return compile_launch


def ptxas_figures(ptx: str, capability: int) -> tuple[int | None, int | None, int | None]:
    """(registers, spill store bytes, spill load bytes) per thread from ``ptxas -v``; None where it says nothing."""
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
