"""The benchmark: measure deployed targets, then combine and report from saved files.

The result file's format, its statistics and the question sets live below this
package, in :mod:`gemmaserve.measurements`; ``cost_table``, ``combine``, ``report``
and ``vllm_import`` analyse result files (pure or file I/O only); the engine modules
(transports, measure) produce them. The actions, each taking its
request model from ``requests``::

    from gemmaserve.bench import MeasureRequest, measure_endpoints
    report = measure_endpoints(MeasureRequest(targets=["http://127.0.0.1:8000"], out="results"))

are imported on first use: importing the package loads neither aiohttp nor numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gemmaserve.bench.analysis import combine_files, comparison_document, import_vllm_file, write_report
    from gemmaserve.bench.measure import measure_endpoints
    from gemmaserve.bench.requests import (
        CombineRequest,
        ImportRequest,
        MeasureReport,
        MeasureRequest,
        ReportRequest,
    )

_EXPORTS = {
    "measure_endpoints": "gemmaserve.bench.measure",
    "combine_files": "gemmaserve.bench.analysis",
    "comparison_document": "gemmaserve.bench.analysis",
    "write_report": "gemmaserve.bench.analysis",
    "import_vllm_file": "gemmaserve.bench.analysis",
    "MeasureRequest": "gemmaserve.bench.requests",
    "MeasureReport": "gemmaserve.bench.requests",
    "CombineRequest": "gemmaserve.bench.requests",
    "ReportRequest": "gemmaserve.bench.requests",
    "ImportRequest": "gemmaserve.bench.requests",
}

__all__ = [
    "CombineRequest",
    "ImportRequest",
    "MeasureReport",
    "MeasureRequest",
    "ReportRequest",
    "combine_files",
    "comparison_document",
    "import_vllm_file",
    "measure_endpoints",
    "write_report",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
