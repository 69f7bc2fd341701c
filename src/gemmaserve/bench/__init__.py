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

from typing import TYPE_CHECKING

from gemmaserve.exports import lazy_exports

if TYPE_CHECKING:
    from gemmaserve.bench.analysis import combine_files as combine_files
    from gemmaserve.bench.analysis import comparison_document as comparison_document
    from gemmaserve.bench.analysis import import_vllm_file as import_vllm_file
    from gemmaserve.bench.analysis import write_report as write_report
    from gemmaserve.bench.measure import measure_endpoints as measure_endpoints
    from gemmaserve.bench.requests import CombineRequest as CombineRequest
    from gemmaserve.bench.requests import ImportRequest as ImportRequest
    from gemmaserve.bench.requests import MeasureReport as MeasureReport
    from gemmaserve.bench.requests import MeasureRequest as MeasureRequest
    from gemmaserve.bench.requests import ReportRequest as ReportRequest

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".measure": ("measure_endpoints",),
        ".analysis": ("combine_files", "comparison_document", "write_report", "import_vllm_file"),
        ".requests": ("MeasureRequest", "MeasureReport", "CombineRequest", "ReportRequest", "ImportRequest"),
    },
)
