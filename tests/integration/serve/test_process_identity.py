"""Process identity: a server started through its shebang still matches its record; a reused pid never does."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from gemmaserve.serve.records import (
    ServerRecord,
    process_matches,
    process_start_ticks,
    wait_until_identifiable,
)


def _record(pid: int, argv: list[str], start_ticks: int) -> ServerRecord:
    return ServerRecord(
        port=8000,
        gpu_index=0,
        pid=pid,
        start_ticks=start_ticks,
        argv=argv,
        log_path="/dev/null",
        started_at=time.time(),
        model="gemma-4-e2b",
        served_model_name="gemma-4-e2b",
    )


def test_a_console_script_started_through_its_shebang_matches(tmp_path: Path) -> None:
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    script.chmod(0o755)
    argv = [str(script), "serve", "google/gemma-4-E2B-it"]
    process = subprocess.Popen(argv)
    try:
        ticks = process_start_ticks(process.pid)
        assert ticks is not None
        # Right after exec the kernel may still show the parent's command line; the launcher
        # waits for this before it hands the record out.
        assert wait_until_identifiable(_record(process.pid, argv, ticks))
        # /proc shows [interpreter, script, args…]; the recorded argv is its tail.
        assert process_matches(_record(process.pid, argv, ticks))
        # Same pid, another start time: a reused pid is not our server.
        assert not process_matches(_record(process.pid, argv, ticks + 1))
        # Same pid and start time, other arguments: not our server either.
        assert not process_matches(_record(process.pid, [str(script), "serve", "other"], ticks))
    finally:
        process.kill()
        process.wait()
    assert not process_matches(_record(process.pid, argv, ticks))
