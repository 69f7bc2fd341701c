"""The benchmark: measure deployed targets, then combine and report from saved files.

``schema`` defines the result file; ``stats``, ``questions``, ``cost``,
``combine``, ``report`` and ``vllm_import`` analyse it (pure or file I/O only);
the engine modules (transports, measure) produce it. Nothing heavy is imported here.
"""

from __future__ import annotations
