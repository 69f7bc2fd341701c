"""Run the README's test command (its pytest part) while every core is kept busy; report pass or fail.

A test that passes on an idle machine and fails on a busy one asserts on the machine's speed. This
starts one busy-loop process per core, at normal priority, so pytest competes for every core as it
does on a shared CI runner, and runs the suite (or the paths given) that many times in a row:

    python tools/flake_check.py                      # the whole suite, three runs
    python tools/flake_check.py --runs 1 tests/unit # one run over some paths

Exit status 0 when every run passed, 1 at the first run that did not (its output is shown).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_pytest_command(readme: str) -> list[str]:
    """The pytest part of the Quick start's test command (its second bash block, after the last ``&&``)."""
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    test_command = re.findall(r"```bash\n(.*?)```", quick, re.S)[1].strip()
    pytest_part = shlex.split(test_command.split("&&")[-1])
    if pytest_part[0] != "pytest":
        raise SystemExit(f"the README's test command does not end in a pytest run: {test_command!r}")
    return pytest_part


def _spin() -> None:
    while True:
        pass


def start_busy_workers(count: int) -> list[multiprocessing.Process]:
    workers = [multiprocessing.Process(target=_spin, name=f"busy-{i}", daemon=True) for i in range(count)]
    for worker in workers:
        worker.start()
    return workers


def stop_busy_workers(workers: list[multiprocessing.Process]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs in a row that must all pass (default 3)")
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 1, help="busy processes (default: one a core)")
    parser.add_argument("paths", nargs="*", help="test paths or node ids (default: what the README's command runs)")
    args = parser.parse_args(argv)
    command = [sys.executable, "-m", *readme_pytest_command((ROOT / "README.md").read_text(encoding="utf-8"))]
    command += args.paths
    print(f"{args.runs} run(s) of: {shlex.join(command[2:])}, beside {args.busy} busy process(es)", flush=True)
    workers = start_busy_workers(args.busy)
    try:
        for run in range(1, args.runs + 1):
            load_before = os.getloadavg()[0]
            started = time.monotonic()
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
            wall_s = time.monotonic() - started
            lines = done.stdout.strip().splitlines()
            summary = lines[-1] if lines else "(no output)"
            verdict = "pass" if done.returncode == 0 else f"FAIL (exit {done.returncode})"
            print(
                f"run {run}: {verdict} in {wall_s:.0f} s, load average {load_before:.1f} → "
                f"{os.getloadavg()[0]:.1f}: {summary}",
                flush=True,
            )
            if done.returncode != 0:
                print(done.stdout[-20_000:], done.stderr[-5_000:], sep="\n", flush=True)
                return 1
    finally:
        stop_busy_workers(workers)
    print(f"{args.runs} run(s) in a row passed on a busy machine", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
