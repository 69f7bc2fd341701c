"""gemmaserve: put Gemma 4 into service with vLLM on the cheapest NVIDIA GPU that holds it.

The package is one library with thin front ends (``gemmaserve.cli``,
``gemmaserve.mcp_server``). Importing it must stay cheap: no torch, triton,
boto3 or aiohttp at import time.
"""

from __future__ import annotations

__version__ = "0.1.0"
