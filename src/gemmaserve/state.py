"""Where gemmaserve keeps its own state on this host (server pid files, logs, locks).

``GEMMASERVE_STATE_DIR`` overrides the location (tests point it at a temporary
directory); otherwise ``$XDG_STATE_HOME/gemmaserve`` or ``~/.local/state/gemmaserve``.
"""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """The state directory, created on first use."""
    override = os.environ.get("GEMMASERVE_STATE_DIR")
    if override:
        path = Path(override)
    else:
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        path = Path(base) / "gemmaserve"
    path.mkdir(parents=True, exist_ok=True)
    return path
