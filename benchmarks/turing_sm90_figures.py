"""sm_90 compiler figures of the launches docs/turing-gpu.md §2 times, with whichever Triton runs this script.

Compiles vLLM's real kernel (fp16, 8 query heads per KV head, 3 stages) for sm_90 with Triton and reads
shared memory, registers and spills (``ptxas -v`` for the PTX's own target, sm_90a), at 4 and 8 warps:
vLLM's head-512 2D launch (tile 32), the clamp's (tile 16), the head-512 3D and the head-256 launches.
No GPU needed. Run it with the GPU machine's Triton to quote that machine's figures:

    python3 -m venv /tmp/tri36 && /tmp/tri36/bin/pip install triton==3.6.0 pydantic
    PYTHONPATH=src /tmp/tri36/bin/python benchmarks/turing_sm90_figures.py DIR/0.26.0/triton_unified_attention.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import triton

from gemmaserve.turing.kernel_compile import LaunchSpec, kernel_compiler
from gemmaserve.turing.smem import load_kernel_module

#: (head, sliding window, 3D grid, tile)
LAUNCHES = [(512, 0, False, 32), (512, 0, False, 16), (512, 0, True, 16), (256, 512, False, 32), (256, 512, True, 16)]


def main(paths: list[str]) -> int:
    for path in paths:
        compile_launch = kernel_compiler(load_kernel_module(Path(path)), triton, 90)
        for head, window, is_3d, tile in LAUNCHES:
            for warps in (4, 8):
                spec = LaunchSpec(
                    head_size=head,
                    tile_size=tile,
                    is_3d=is_3d,
                    sliding_window=window,
                    num_query_heads=8,
                    num_queries_per_kv=8,
                    num_warps=warps,
                    num_stages=3,
                )
                figures = compile_launch(spec)
                print(
                    f"triton {triton.__version__} | {path} | head {head} {'3D' if is_3d else '2D'} tile {tile} | "
                    f"{warps} warps | smem {figures.smem_bytes} | regs {figures.registers} | "
                    f"spills {figures.spill_store_bytes}/{figures.spill_load_bytes}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
