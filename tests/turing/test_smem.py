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
    code = (
        "import sys; sys.modules['triton'] = None; from gemmaserve.cli import main; "
        f"main(['turing', 'smem', '--vllm-file', {str(vllm_kernel_files['0.34.0'])!r}])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and 'pip install "gemmaserve[kernel]"' in done.stderr
    assert "Traceback" not in done.stderr


def test_search_picks_what_the_rule_launches_for_head_512(vllm_kernel_files: dict[str, Path]) -> None:
    from gemmaserve.turing import smem

    found = smem.search_launches(vllm_file=str(vllm_kernel_files["0.26.0"]), head_sizes=(512,), warps=(4, 8))
    assert found.rule_agrees, found.picks
    by_layout = {pick.layout: pick for pick in found.picks}
    assert not by_layout["2D"].stock_fits and by_layout["3D"].stock_fits
    two_d, three_d = by_layout["2D"], by_layout["3D"]
    assert two_d.picked is not None and (two_d.picked.tile_size, two_d.picked.num_warps) == (16, 8)
    assert two_d.picked_spill_bytes == 0 and two_d.stages_independent
    assert three_d.picked == three_d.stock  # it fits: vLLM's own launch, whatever it spills
    assert three_d.stock_spill_bytes is not None and three_d.stock_spill_bytes > 0


def test_hopper_figures_come_from_ptxas_for_its_own_target(vllm_kernel_files: dict[str, Path]) -> None:
    import triton

    from gemmaserve.turing import smem

    module = smem.load_kernel_module(vllm_kernel_files["0.26.0"])
    smem_bytes, registers, spill_store, spill_load = smem._compile_one(module, triton, 90, 512, 16, False, 0, 4)
    assert registers is not None and registers > 0  # Triton's PTX targets sm_90a there, not sm_90
    assert (spill_store, spill_load) == (0, 0) and smem_bytes <= smem.SMEM_OPTIN_BYTES[90]
