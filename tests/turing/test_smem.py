"""The real compiler (Triton for sm_75, no GPU) against the rule's shared-memory model; one small case."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gemmaserve.turing.rule import kernel_smem_bytes

pytest.importorskip("triton")


def test_sm75_head512_stock_fails_and_clamped_fits_exactly(vllm_kernel_files: dict[str, Path]) -> None:
    from gemmaserve.turing import smem

    kernel = vllm_kernel_files["0.34.0"]
    module = smem.load_kernel_module(kernel)
    import triton

    figures = {tile: smem._compile_one(module, triton, 75, 512, tile, False, 0, 4) for tile in (32, 16)}
    for tile, (smem_bytes, registers, _, _) in figures.items():
        assert smem_bytes == kernel_smem_bytes(512, tile, 16, 2)
        assert registers is not None and registers > 0
    assert figures[32][0] > smem.SMEM_OPTIN_BYTES[75] >= figures[16][0]


def test_missing_triton_names_the_extra(vllm_kernel_files: dict[str, Path]) -> None:
    code = ("import sys; sys.modules['triton'] = None; from gemmaserve.cli import main; "
            f"main(['turing', 'smem', '--vllm-file', {str(vllm_kernel_files['0.34.0'])!r}])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and 'pip install "gemmaserve[kernel]"' in done.stderr
    assert "Traceback" not in done.stderr
