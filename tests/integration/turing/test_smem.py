"""The real compiler (Triton for sm_75, no GPU) against the rule's shared-memory model; one small case."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gemmaserve.turing.kernel_compile import LaunchFigures, LaunchSpec, kernel_compiler
from gemmaserve.turing.rule import kernel_smem_bytes
from tests.support.turing.launches import e2b_global_launch

pytest.importorskip("triton")


def test_sm75_head512_stock_fails_and_clamped_fits_exactly(vllm_kernel_files: dict[str, Path]) -> None:
    from gemmaserve.turing import smem

    kernel = vllm_kernel_files["0.34.0"]
    module = smem.load_kernel_module(kernel)
    import triton

    compile_launch = kernel_compiler(module, triton, 75)
    figures = {tile: compile_launch(e2b_global_launch(tile, 4)) for tile in (32, 16)}
    for tile, found in figures.items():
        assert found.smem_bytes == kernel_smem_bytes(512, tile, 16, 2)
        assert found.registers is not None and found.registers > 0
    assert figures[32].smem_bytes > smem.SMEM_OPTIN_BYTES[75] >= figures[16].smem_bytes


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

    e2b_global = next(g for g in smem.layer_geometries((512,)) if g.models == ("gemma-4-e2b",))
    found = smem.search_launches(
        smem.KernelTarget(str(vllm_kernel_files["0.26.0"]), head_sizes=(512,)),
        smem.SearchSpace(warps=(4, 8), geometries=(e2b_global,)),
    )
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
    found = kernel_compiler(module, triton, 90)(e2b_global_launch(16, 4))
    assert found.registers is not None and found.registers > 0  # Triton's PTX targets sm_90a there, not sm_90
    assert found.spill_bytes == 0 and found.smem_bytes <= smem.SMEM_OPTIN_BYTES[90]


COMPILED: list[LaunchSpec] = []


def _modelled(module: object, triton: object, capability: int) -> Callable[[LaunchSpec], LaunchFigures]:
    """A stand-in compiler: the shared-memory model's bytes, and spills only at 4 warps (nothing is compiled)."""

    def compile_launch(spec: LaunchSpec) -> LaunchFigures:
        COMPILED.append(spec)
        smem_bytes = kernel_smem_bytes(spec.head_size, spec.tile_size, 16, 2)
        spills = 100 if spec.num_warps == 4 else 0
        return LaunchFigures(smem_bytes=smem_bytes, registers=255, spill_store_bytes=spills, spill_load_bytes=spills)

    return compile_launch


@pytest.mark.parametrize("search", [False, True])
def test_smem_reports_every_compile_and_ends_at_its_total(vllm_kernel_files: dict[str, Path], search: bool) -> None:
    from gemmaserve.progress import ProgressEvent
    from gemmaserve.turing.requests import SmemRequest
    from gemmaserve.turing.smem import compile_smem

    events: list[ProgressEvent] = []
    COMPILED.clear()
    ticks = iter(range(0, 10_000, 3))
    request = SmemRequest(vllm_file=str(vllm_kernel_files["0.34.0"]), search=search)
    result = compile_smem(request, progress=events.append, compiler=_modelled, clock=lambda: float(next(ticks)))
    assert events and [e.done for e in events] == list(range(1, len(events) + 1))
    assert events[-1].done == events[-1].total and "left" not in events[-1].message
    assert all("about" in e.message for e in events[:-1])  # 3 s a compile on this clock: every ETA is shown
    assert len(COMPILED) == len(set(COMPILED)) == len(events)  # each launch compiled once, each compile reported
    assert {(r.head_size, r.tile_size, r.num_warps) for r in result.rows} <= {
        (c.head_size, c.tile_size, c.num_warps) for c in COMPILED
    }
