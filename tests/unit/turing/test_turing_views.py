"""The turing results' views: status, patch, verify and smem pages, with unknown figures and failing verdicts."""

from __future__ import annotations

from gemmaserve.cli.errors import EXIT_FAILED, EXIT_OK, exit_code_for
from gemmaserve.turing.filepatch import PatchResult, PatchTarget, PatchVerdict, VerifyResult
from gemmaserve.turing.rule import LaunchParams
from gemmaserve.turing.smem import LaunchSearch, SearchPick, SearchRow, SmemReport, SmemResult, SmemRow
from gemmaserve.turing.status import Delivery, TuringStatus
from gemmaserve.views import page_for, summary_for
from gemmaserve.views.page import Line, plain_lines

TARGET = PatchTarget(path="/site/vllm/triton_unified_attention.py", vllm_version="0.34.0", python="/venv/bin/python")


def _status(*, would_start: bool) -> TuringStatus:
    return TuringStatus(python="/venv/bin/python", gpu_name=None, capability="7.5", capability_source="stated",
                        clamp_needed=True, vllm_version="0.34.0", vllm_supported=True, supported_range="0.29.0-0.34.0",
                        kernel_file=None, plugin_registered=False, plugin_importable=False, plugins_allowed=True,
                        file_patch=None, source_recognised=True, active_delivery=Delivery.NONE,
                        engine_would_start=would_start, reasons=["no clamp: the head-512 launch overflows"])  # fmt: skip


def test_a_status_where_vllm_would_not_start_is_not_ok_and_says_so() -> None:
    refused = _status(would_start=False)
    assert refused.ok is False and exit_code_for(refused) == EXIT_FAILED
    lines = plain_lines(page_for(refused))
    assert lines[0] == "GPU                 ? (compute 7.5, stated)"
    assert lines[3:8] == ["kernel file         -", "plugin              not available", "file patch          -",
                          "active delivery     none", "engine would start  NO"]  # fmt: skip
    assert lines[-1] == "  - no clamp: the head-512 launch overflows"
    assert summary_for(refused) == (
        "GPU ? (compute 7.5): clamp needed; active delivery none; vLLM would NOT start\n"
        "- no clamp: the head-512 launch overflows"
    )
    fine = _status(would_start=True)
    assert fine.ok is True and exit_code_for(fine) == EXIT_OK
    assert fine.model_dump(mode="json")["ok"] is True


def test_verify_is_ok_only_when_present_and_recognised() -> None:
    present = VerifyResult(target=TARGET, verdict=PatchVerdict.PRESENT, recognised=True, detail="one intact block")
    assert present.ok and exit_code_for(present) == EXIT_OK
    odd = VerifyResult(target=TARGET, verdict=PatchVerdict.PRESENT, recognised=False, detail="one intact block")
    assert not odd.ok and exit_code_for(odd) == EXIT_FAILED
    assert plain_lines(page_for(odd)) == [
        "present (source not recognised): one intact block",
        f"  {TARGET.path}",
    ]
    document = odd.model_dump(mode="json")
    assert document["ok"] is False and VerifyResult.model_validate(document).ok is False


def test_a_dry_run_shows_its_diff_before_what_it_would_do_and_the_summary_the_other_way_round() -> None:
    diff = "--- a\n+++ b\n@@ -1 +1,2 @@\n x\n+clamp\n"
    dry = PatchResult(target=TARGET, action="would-apply", changed=False, dry_run=True, diff=diff, detail="1 block")
    shown = page_for(dry)
    assert plain_lines(shown) == ["--- a", "+++ b", "@@ -1 +1,2 @@", " x", "+clamp", "would-apply: 1 block",
                                  f"  {TARGET.path}"]  # fmt: skip
    assert [block.style for block in shown.blocks if isinstance(block, Line)][:5] == [
        "bold",
        "bold",
        None,
        None,
        "good",
    ]
    assert summary_for(dry).splitlines()[0] == f"would-apply: 1 block ({TARGET.path})"
    applied = PatchResult(target=TARGET, action="applied", changed=True, dry_run=False, diff=diff, detail="1 block",
                          backup="/site/x.orig")  # fmt: skip
    assert plain_lines(page_for(applied)) == ["applied: 1 block", f"  {TARGET.path}", "  backup: /site/x.orig"]


def _smem_row(*, fits: bool, registers: int | None) -> SmemRow:
    return SmemRow(arch="sm_75", head_size=512, sliding_window=0, num_query_heads=8, num_queries_per_kv=8,
                   models=["e2b"], phase="prefill", layout="2D", variant="stock", tile_size=32, block_m=16,
                   num_warps=4, smem_bytes=81_920, smem_limit_bytes=65_536, fits=fits, registers=registers,
                   spill_store_bytes=None if registers is None else 0, spill_load_bytes=0)  # fmt: skip


def test_a_compile_report_shows_unknown_registers_and_spills_as_a_question_mark() -> None:
    report = SmemReport(vllm_file="k.py", arch="sm_75", triton_version="3.6.0",
                        rows=[_smem_row(fits=False, registers=None)], stock_fits=False, clamped_fits=True,
                        clamp_changes_launch=True)  # fmt: skip
    lines = plain_lines(page_for(report))
    assert lines[0] == "k.py  (triton 3.6.0, sm_75)"
    assert lines[1].split() == ["head", "heads", "q/kv", "window", "phase", "grid", "variant", "tile", "warps",
                                "smem", "B", "limit", "B", "fits", "regs", "spill", "st/ld", "B"]  # fmt: skip
    assert lines[2].split() == ["512", "8", "8", "global", "prefill", "2D", "stock", "32", "4", "81920", "65536",
                                "NO", "?", "?"]  # fmt: skip
    assert lines[3] == "stock fits: NO; clamped fits: yes; clamp changes the launch: yes"
    assert report.ok  # a measurement: what does not fit is its finding, not a failed command


def _search() -> LaunchSearch:
    stock = LaunchParams(tile_size=32, block_m=16, num_stages=1, num_warps=4)
    row = SearchRow(arch="sm_75", head_size=512, sliding_window=512, num_query_heads=8, num_queries_per_kv=2,
                    models=[], layout="3D", tile_size=32, block_m=16, num_warps=4, num_stages=1,
                    smem_bytes=81_920, fits=False, registers=255, spill_store_bytes=92, spill_load_bytes=92,
                    stock=True, chosen=False)  # fmt: skip
    pick = SearchPick(head_size=512, sliding_window=512, num_query_heads=8, num_queries_per_kv=2, models=[],
                      layout="3D", stock=stock, picked=None, picked_spill_bytes=None, stock_spill_bytes=184,
                      stock_fits=False, rule=stock, rule_agrees=False, stages_checked=[], stages_independent=True)  # fmt: skip
    return LaunchSearch(vllm_file="k.py", arch="sm_75", triton_version="3.6.0", smem_limit_bytes=65_536, rows=[row],
                        picks=[pick], rule_agrees=False)  # fmt: skip


def test_a_search_where_nothing_fits_says_none_fits_and_that_the_rule_differs() -> None:
    lines = plain_lines(page_for(_search()))
    assert lines[0] == "k.py  (triton 3.6.0, sm_75, limit 65,536 B)"
    assert lines[2].split() == ["512", "8", "2", "512", "3D", "32", "4", "1", "81920", "NO", "255", "92/92", "stock"]
    assert lines[3] == (
        "head 512 3D, 8 query heads, 2 per KV head, window 512 (no Gemma 4 model): none fits; "
        "rule launches tile 32, 4 warps: DIFFERS"
    )


def test_the_tool_schema_of_smem_is_drawn_as_the_shape_it_holds() -> None:
    search = _search()
    as_schema = SmemResult.model_validate(search.model_dump(mode="json"))
    assert plain_lines(page_for(as_schema)) == plain_lines(page_for(search))
    report = SmemReport(vllm_file="k.py", arch="sm_75", triton_version="3.6.0",
                        rows=[_smem_row(fits=True, registers=128)], stock_fits=True, clamped_fits=True,
                        clamp_changes_launch=False)  # fmt: skip
    as_schema = SmemResult.model_validate(report.model_dump(mode="json"))
    assert plain_lines(page_for(as_schema)) == plain_lines(page_for(report))
