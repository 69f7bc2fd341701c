"""The warps table is what the committed launch search found: every entry compiled, every change it made tabled.

``docs/turing-search/sm75-vllm-<version>.json`` is ``gemmaserve turing smem --search --json`` for sm_75 on
the real kernel file of each distinct vLLM source in the supported range (docs/turing.md says how to rebuild it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmaserve.turing.rule import STOCK_NUM_WARPS, warps_table
from gemmaserve.turing.smem import LaunchSearch
from gemmaserve.turing.versions import TESTED_VLLM_VERSIONS

RECORDS = Path(__file__).resolve().parents[3] / "docs" / "turing-search"


def _searches() -> dict[str, LaunchSearch]:
    found = {}
    for path in sorted(RECORDS.glob("sm75-vllm-*.json")):
        version = path.stem.removeprefix("sm75-vllm-")
        found[version] = LaunchSearch.model_validate_json(path.read_text(encoding="utf-8"))
    return found


def _changed_picks(search: LaunchSearch) -> dict[tuple[int, int, int, int, int, bool], int]:
    """{table key: warps} of every launch the search changed (vLLM's own did not fit)."""
    changed = {}
    for pick in search.picks:
        if pick.picked is not None and pick.picked != pick.stock:
            key = (
                pick.head_size,
                pick.picked.tile_size,
                pick.picked.block_m,
                pick.num_queries_per_kv,
                pick.sliding_window,
                pick.layout == "3D",
            )
            changed[key] = pick.picked.num_warps
    return changed


def test_there_is_a_committed_search_for_sm75() -> None:
    searches = _searches()
    assert searches and all(s.arch == "sm_75" and s.smem_limit_bytes == 65_536 for s in searches.values())
    assert set(searches) <= set(TESTED_VLLM_VERSIONS)


@pytest.mark.parametrize("version", sorted(_searches()))
def test_every_table_entry_is_a_launch_the_search_compiled_and_picked(version: str) -> None:
    search = _searches()[version]
    assert search.rule_agrees, [p for p in search.picks if not p.rule_agrees]
    changed = _changed_picks(search)
    table = warps_table()
    assert {key: warps for key, warps in changed.items() if warps != STOCK_NUM_WARPS} == table
    for key, warps in table.items():
        head, tile, block_m, per_kv, window, is_3d = key
        rows = [
            row
            for row in search.rows
            if (row.head_size, row.tile_size, row.block_m, row.num_queries_per_kv, row.sliding_window)
            == (head, tile, block_m, per_kv, window)
            and (row.layout == "3D") == is_3d
        ]
        assert {row.num_warps for row in rows} >= {STOCK_NUM_WARPS, warps}  # compiled, with its alternatives
        assert all(row.chosen == (row.num_warps == warps) for row in rows)


@pytest.mark.parametrize("version", sorted(_searches()))
def test_every_launch_that_fits_is_vllms_and_what_it_costs_is_recorded(version: str) -> None:
    for pick in _searches()[version].picks:
        if pick.stock_fits:
            assert pick.picked == pick.stock == pick.rule, pick
            assert pick.picked_spill_bytes == pick.stock_spill_bytes is not None
        else:
            assert pick.picked is not None and pick.picked_spill_bytes is not None, pick
            assert pick.stages_checked and pick.stages_independent, pick


def test_the_searches_cover_every_distinct_kernel_source(vllm_kernel_files: dict[str, Path]) -> None:
    def source(version: str) -> tuple[bytes, bytes]:
        kernel = vllm_kernel_files[version]
        return kernel.read_bytes(), kernel.with_name("triton_attention_helpers.py").read_bytes()

    recorded = {source(version) for version in _searches()}
    missing = [version for version in TESTED_VLLM_VERSIONS if source(version) not in recorded]
    assert not missing, f"no committed sm_75 search for the kernel source of vLLM {missing}"


def test_the_record_is_what_the_compiler_says_now(vllm_kernel_files: dict[str, Path]) -> None:
    """Two compiles of the newest record's changed launch, at 4 and at its warps, against the record."""
    triton = pytest.importorskip("triton")
    from gemmaserve.turing.kernel_compile import LaunchSpec, kernel_compiler
    from gemmaserve.turing.smem import load_kernel_module

    version = max(_searches(), key=lambda v: tuple(map(int, v.split("."))))
    search = _searches()[version]
    if search.triton_version != triton.__version__:
        pytest.skip(f"recorded with Triton {search.triton_version}, this is {triton.__version__}")
    (head, tile, _, per_kv, window, is_3d), warps = next(iter(warps_table().items()))
    compile_launch = kernel_compiler(load_kernel_module(vllm_kernel_files[version]), triton, 75)
    for count in (STOCK_NUM_WARPS, warps):
        row = next(
            r
            for r in search.rows
            if (r.head_size, r.tile_size, r.num_queries_per_kv, r.sliding_window, r.num_warps, r.layout == "3D")
            == (head, tile, per_kv, window, count, is_3d)
        )
        figures = compile_launch(
            LaunchSpec(
                head_size=head,
                tile_size=tile,
                is_3d=is_3d,
                sliding_window=window,
                num_query_heads=row.num_query_heads,
                num_queries_per_kv=per_kv,
                num_warps=count,
                num_stages=row.num_stages,
            )
        )
        assert (figures.smem_bytes, figures.registers, figures.spill_store_bytes, figures.spill_load_bytes) == (
            row.smem_bytes,
            row.registers,
            row.spill_store_bytes,
            row.spill_load_bytes,
        )
