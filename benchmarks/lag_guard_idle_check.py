"""Does the lag guard leave a plain ``bench measure`` alone when nothing competes with it? Run it N times.

A one-stream step uses a few percent of a core; the guard must not stop it on a machine with cores to
spare. This script starts the mock server (its own process, known timing: TTFT 50 ms, 5 ms per token),
runs the real command ``gemmaserve bench measure URL --out DIR --json`` with its defaults N times, each
on a pseudo-terminal (``--terminal``, the default: the progress display a person sees is part of what
runs) or with stderr to a pipe, and prints one line per run: exit status, outcome, the guard's message
if it stopped the run, wall time, the first ETA the progress showed against the time the run then took,
and the load average. ``--client-cpus``/``--server-cpus`` pin the two sides with ``os.sched_setaffinity``
(as ``taskset`` does); ``--src`` runs another tree's ``src`` (an older version, to compare).

    python benchmarks/lag_guard_idle_check.py --runs 20 [--client-cpus 1 --server-cpus 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import start_mock_process

ETA = re.compile(r"(\d+)s elapsed, (?:about |ETA )((?:\d+h)?(?:\d+m)?\d+s)")


def seconds(text: str) -> float:
    """``1m05s`` → 65.0."""
    total = 0.0
    for value, unit in re.findall(r"(\d+)([hms])", text):
        total += int(value) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total


def cpus(text: str | None) -> set[int] | None:
    if not text:
        return None
    chosen: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        chosen.update(range(int(low), int(high or low) + 1))
    return chosen


def run_once(url: str, out: Path, *, terminal: bool, src: Path, client_cpus: set[int] | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "gemmaserve", "bench", "measure", url, "--out", str(out), "--json"]
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "120"}
    captured: list[bytes] = []
    started = time.monotonic()
    load_before = os.getloadavg()[0]

    def pin() -> None:
        if client_cpus:
            os.sched_setaffinity(0, client_cpus)

    if terminal:
        primary, secondary = pty.openpty()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=secondary, env=env, preexec_fn=pin)
        os.close(secondary)

        def drain() -> None:  # a pseudo-terminal nobody reads fills up and blocks the writer
            while True:
                try:
                    data = os.read(primary, 65536)
                except OSError:
                    return
                if not data:
                    return
                captured.append(data)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        stdout, _ = process.communicate()
        reader.join(5)
        os.close(primary)
    else:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=pin)
        stdout, stderr = process.communicate()
        captured.append(stderr)
    wall_s = time.monotonic() - started
    text = b"".join(captured).decode(errors="replace")
    etas = [(float(elapsed), seconds(left)) for elapsed, left in ETA.findall(text)]
    first_eta = etas[0] if etas else None
    # --json: the report, or the error as data ({"error": "ClientSaturated", "message": …, "hint": …})
    document = json.loads(stdout) if stdout.strip().startswith(b"{") else {}
    stopped = document.get("error") == "ClientSaturated"
    return {
        "exit_code": process.returncode,
        "status": document.get("status") or document.get("error") or "no output",
        "guard_message": document.get("message") if stopped else None,
        "guard_hint": document.get("hint") if stopped else None,
        "wall_s": round(wall_s, 2),
        # (elapsed when the first ETA was shown, the ETA, the time the run really had left then)
        "first_eta": None if first_eta is None else [first_eta[0], first_eta[1], round(wall_s - first_eta[0], 1)],
        "load_average_before": load_before,
        "load_average_after": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--terminal", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--client-cpus", help="e.g. 1 or 2-3 (as taskset -c)")
    parser.add_argument("--server-cpus")
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/lag_guard_idle_check.json"))
    args = parser.parse_args()
    before = os.sched_getaffinity(0)
    server_cpus = cpus(args.server_cpus)
    if server_cpus:
        os.sched_setaffinity(0, server_cpus)  # the server's processes inherit the mask
    server = start_mock_process(MockConfig(ttft_s=0.05, itl_s=0.005))
    os.sched_setaffinity(0, before)
    rows = []
    with server, tempfile.TemporaryDirectory() as scratch:
        for index in range(args.runs):
            row = run_once(
                server.url,
                Path(scratch) / f"run{index}",
                terminal=args.terminal,
                src=args.src,
                client_cpus=cpus(args.client_cpus),
            )
            row["run"] = index + 1
            print(json.dumps(row), flush=True)
            rows.append(row)
    stopped = [row for row in rows if row["guard_message"]]
    document = {
        "server": {"ttft_s": 0.05, "itl_s": 0.005},
        "terminal": args.terminal,
        "client_cpus": args.client_cpus,
        "server_cpus": args.server_cpus,
        "cpu_count": os.cpu_count(),
        "runs": rows,
        "stopped_by_guard": len(stopped),
        "succeeded": sum(row["status"] == "success" for row in rows),
    }
    print(f"{len(stopped)} of {len(rows)} runs stopped by the guard; {document['succeeded']} succeeded")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
