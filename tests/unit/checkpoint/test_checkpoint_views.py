"""The checkpoint results' views: what each says when a field is empty, None or bad, and ``ok`` from the result."""

from __future__ import annotations

from gemmaserve.checkpoint.gridcheck import GridCheckReport, TensorGridResult
from gemmaserve.checkpoint.inspect import InspectReport, PartSummary, QuantizationSummary
from gemmaserve.checkpoint.validate import ValidateReport
from gemmaserve.cli.errors import EXIT_FAILED, EXIT_OK, exit_code_for
from gemmaserve.findings import Finding, Status
from gemmaserve.views import page_for, summary_for
from gemmaserve.views.page import Line, Table, plain_lines

Q_PROJ = "model.language_model.layers.0.self_attn.q_proj"


def _tensor(*, off: int = 0, not_finite: int = 0) -> TensorGridResult:
    measured = not not_finite
    return TensorGridResult(
        tensor=Q_PROJ,
        build_format="pack-quantized",
        shape=[128, 32],
        build_group_size=None,
        reference_group_size=32,
        reference_dtype="F32",
        reference_grid_dtype="BF16",
        values=4096,
        values_bit_identical=4096 - off - not_finite,
        groups=128,
        groups_bit_identical=0 if off or not_finite else 128,
        values_off_by_a_level_or_more=off,
        share_off_by_a_level_or_more=off / 4096,
        values_nearest_level_differs=off,
        share_nearest_level_differs=off / 4096,
        max_abs_diff=0.0 if measured else None,
        mean_abs_diff=0.0 if measured else None,
        values_not_finite=not_finite,
        reference_groups_on_grid=128,
        reference_groups_peak_not_at_8=0,
    )


def _report(tensor: TensorGridResult, verdict: str) -> GridCheckReport:
    return GridCheckReport(
        build="build",
        reference="reference",
        reference_group_size=None,
        reference_group_size_source="detected",
        tensors=[tensor],
        values=tensor.values,
        values_bit_identical=tensor.values_bit_identical,
        groups=tensor.groups,
        groups_bit_identical=tensor.groups_bit_identical,
        values_off_by_a_level_or_more=tensor.values_off_by_a_level_or_more,
        share_off_by_a_level_or_more=tensor.share_off_by_a_level_or_more,
        values_nearest_level_differs=tensor.values_nearest_level_differs,
        share_nearest_level_differs=tensor.share_nearest_level_differs,
        max_abs_diff=tensor.max_abs_diff,
        mean_abs_diff=tensor.mean_abs_diff,
        values_not_finite=tensor.values_not_finite,
        verdict=verdict,
        build_bytes_fetched=0,
        reference_bytes_fetched=0,
    )


def test_bad_values_make_an_invalid_verdict_not_ok_with_a_column_and_no_difference_measured() -> None:
    report = _report(_tensor(not_finite=4096), "invalid")
    assert report.ok is False and exit_code_for(report) == EXIT_FAILED
    lines = plain_lines(page_for(report))
    assert lines[0] == (
        "build vs reference (reference grid: group sizes per tensor, detected; bf16 values stored as F32)"
    )
    assert lines[1].split()[-1] == "NaN/inf"
    row = lines[2].split()
    assert row[0] == Q_PROJ and row[2:5] == ["-", "/", "32"] and row[-4:] == ["-", "/", "-", "4,096"]
    assert lines[-1] == (
        f"verdict: invalid: 4,096 of 4,096 values are NaN or infinite in the build or the reference, in {Q_PROJ} "
        "(4,096); nothing is measured on them"
    )
    text = summary_for(report)
    assert "\n" not in text and text.startswith("invalid: ") and text.endswith("(nothing measured on them)")


def test_a_value_off_by_a_level_is_not_ok_and_an_exact_build_is() -> None:
    off = _report(_tensor(off=7), "off-grid")
    assert off.ok is False and exit_code_for(off) == EXIT_FAILED
    verdict = page_for(off).blocks[-1]
    assert isinstance(verdict, Line) and verdict.style == "bad"
    assert verdict.text.startswith("verdict: off-grid: 7 of 4,096 values (0.2%) off by one reference-grid level")
    assert "NaN/inf" not in plain_lines(page_for(off))[1]
    exact = _report(_tensor(), "bit-identical")
    assert exact.ok is True and exit_code_for(exact) == EXIT_OK
    assert exact.model_dump(mode="json")["ok"] is True


def test_inspect_without_quantization_or_parts_still_says_what_was_read() -> None:
    report = InspectReport(
        source="empty",
        shards=0,
        tensors=0,
        total_bytes=0,
        total_parameters=0,
        bytes_fetched=1234,
        architectures=[],
        tie_word_embeddings=None,
        parts=[],
        quantization=None,
        findings=["no shards"],
    )
    assert plain_lines(page_for(report)) == [
        "empty: 0 shard(s), 0 tensors, 0 B",
        "part  bytes  share  stored as  parameters",
        "(no rows)",
        "bytes read: 1,234",
        "note: no shards",
    ]


def test_inspect_names_the_first_ignored_modules_and_says_more_are_left_out() -> None:
    part = PartSummary(part="transformer_body", bytes=38_912, share=1.0, parameters=80_064, tensors=3,
                       storage={"BF16": 9_344, "packed int4": 29_568})  # fmt: skip
    quantization = QuantizationSummary(quant_method="compressed-tensors", format="pack-quantized", scheme=None,
                                       num_bits=4, group_size=32, symmetric=True, targets=["Linear"],
                                       ignore=[f"m{index}" for index in range(9)])  # fmt: skip
    report = InspectReport(source="ct", shards=1, tensors=3, total_bytes=38_912, total_parameters=80_064,
                           bytes_fetched=10, architectures=[], tie_word_embeddings=True, parts=[part],
                           quantization=quantization, findings=[])  # fmt: skip
    lines = plain_lines(page_for(report))
    assert lines[2].split() == ["transformer_body", "38.912", "kB", "100.0%", "packed", "int4", "29.568", "kB,",
                                "BF16", "9.344", "kB", "80,064"]  # fmt: skip
    assert lines[3] == (
        "quantization: compressed-tensors pack-quantized  group 32; ignore (9): m0, m1, m2, m3, m4, m5, m6, m7 …"
    )


def test_validate_passes_a_warning_and_fails_a_failed_finding() -> None:
    warned = ValidateReport(source="ct", tensors=3, findings=[
        Finding(check="dtype", status=Status.WARN, detail="one tensor is F16", fix=None)])  # fmt: skip
    assert warned.ok is True and exit_code_for(warned) == EXIT_OK
    assert plain_lines(page_for(warned)) == ["ct: 3 tensors, ok", "warn: [dtype] one tensor is F16"]
    failed = ValidateReport(source="ct", tensors=3, findings=[
        Finding(check="ignore", status=Status.FAIL, detail="x is 16-bit", fix="Add x.")])  # fmt: skip
    assert failed.ok is False and failed.model_dump(mode="json")["ok"] is False
    assert plain_lines(page_for(failed)) == ["ct: 3 tensors, problems found", "fail: [ignore] x is 16-bit",
                                             "  fix: Add x."]  # fmt: skip
    assert ValidateReport.model_validate(failed.model_dump(mode="json")).ok is False
    assert not any(isinstance(block, Table) for block in page_for(failed).blocks)
