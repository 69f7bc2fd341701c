"""Measured speeds for ``gemmaserve plan --from-bench DIR``: each result file's decode rate and stream levels,
keyed by the catalog model, encoding and GPU it records. Reads files; computes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gemmaserve.errors import ResultFileInvalid, UsageError
from gemmaserve.measurements.schema import load_result
from gemmaserve.speed import MeasuredSpeed


@dataclass
class BenchSpeeds:
    by_row: dict[tuple[str, str, str], MeasuredSpeed] = field(default_factory=dict)
    unused: list[str] = field(default_factory=list)  # "file: why", for every file that could not be used


def read_bench_speeds(directory: str) -> BenchSpeeds:
    """Every ``*.json`` result in ``directory`` that names its catalog model, encoding and GPU and measured a
    decode rate. A file that is not a result, or lacks those, is listed in ``unused`` with the reason.

    Raises:
        UsageError: when ``directory`` is not a directory or holds no JSON file.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise UsageError(f"--from-bench {directory}: not a directory", hint="Name the --out DIR of `bench measure`.")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise UsageError(f"--from-bench {directory}: no result files (*.json) there")
    speeds = BenchSpeeds()
    for path in files:
        try:
            result = load_result(path)
        except ResultFileInvalid as exc:
            speeds.unused.append(f"{path.name}: {exc}")
            continue
        key = (result.target.catalog_model, result.target.encoding, result.hardware.gpu)
        rate = result.decode.rate_tokens_per_s if result.decode else None
        if None in key:
            speeds.unused.append(f"{path.name}: no catalog model, encoding and GPU recorded (bench measure --model …)")
            continue
        if rate is None or rate <= 0:
            speeds.unused.append(f"{path.name}: no decode rate measured")
            continue
        levels = {
            level.concurrency: level.median_output_tokens_per_s
            for level in result.load
            if level.median_output_tokens_per_s and level.failed_requests == 0
        }
        row_key = (str(key[0]), str(key[1]), str(key[2]))
        if row_key in speeds.by_row:
            speeds.unused.append(f"{path.name}: a second result for {' '.join(row_key)} (the first file is used)")
            continue
        speeds.by_row[row_key] = MeasuredSpeed(rate, levels, f"measured: {path.name}")
    return speeds
