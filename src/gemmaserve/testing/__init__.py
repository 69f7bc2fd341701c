"""Test helpers that ship with gemmaserve: a local OpenAI-compatible streaming server.

:mod:`.mock_server` streams tokens with known timing (TTFT, inter-token interval,
per-call fixed cost) and injects faults; :mod:`.runner` starts it in a thread or
in its own process. Nothing here reaches the network beyond the address it binds.
"""

from __future__ import annotations
