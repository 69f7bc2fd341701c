"""The Turing clamp in a real vLLM engine: clamped (diagnostic T4 limit) and stock, same weights, same prompts.

Usage (on the GPU machine, vLLM and gemmaserve installed so the `vllm.general_plugins` entry point is live):
    python3 benchmarks/turing_engine_check.py --out $OUT [--preset tiny|e2b] [--vllm "vllm serve"]
Writes a random-weight Gemma 4 with a byte-level tokenizer: by default real weights drawn from
N(0, 0.02) with norms at 1 (a safetensors file from a fixed seed), because vLLM's ``--load-format
dummy`` draws every weight, norms included, from ±1e-3, which makes the logits flat and greedy
answers equal whatever attention computes (``--weights dummy`` keeps that mode). Then it starts the engine
twice: once with GEMMASERVE_TURING_DIAG_SMEM_LIMIT=65536 (the plugin treats the GPU as a T4) and
once without (stock). From each engine's own log it reads which processes ran the plugin and what
it changed; it sends the same prompts with temperature 0 and top-5 logprobs, and compares: identical
token ids, or the first differing token and the logprob gap between the two candidates. Results
(JSON and the raw logs, tarred) land in --out as they come; every server started is stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

DIAG_ENV = "GEMMASERVE_TURING_DIAG_SMEM_LIMIT"
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<mask>"]
PAD, EOS, BOS = 0, 1, 2
#: Gemma 4 text geometries. "tiny": both layer kinds (head 256 sliding, head 512 global), KV sharing,
#: and E2B's 8 query heads per KV head (so unified_attention's BLOCK_M is 16, as in every Gemma 4).
#: "e2b": google/gemma-4-E2B-it's text decoder (gemmaserve's catalog/models.toml).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "vocab_size": 512,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "global_head_dim": 512,
        "sliding_window": 512,
        "num_kv_shared_layers": 2,
        "hidden_size_per_layer_input": 64,
        "max_position_embeddings": 8192,
    },
    "e2b": {
        "vocab_size": 262144,
        "hidden_size": 1536,
        "intermediate_size": 6144,
        "num_hidden_layers": 35,
        "layer_types": ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(35)],
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "global_head_dim": 512,
        "sliding_window": 512,
        "num_kv_shared_layers": 20,
        "hidden_size_per_layer_input": 256,
        "max_position_embeddings": 131072,
    },
}
PROMPTS = [
    "The cache stores the weights",
    "Count from one to ten: one, two, three,",
    "Gemma 4 on a Tesla T4 needs a smaller attention tile because",
    # Over the 512-token sliding window (one token per byte), so both layer kinds see long contexts.
    " ".join(f"item {i} costs {i * 7 % 100} dollars;" for i in range(60)),
]
_PREFIX = re.compile(r"^\((?P<process>[^\s)]+) pid=(?P<pid>\d+)\)")
_PLUGIN = re.compile(r"gemmaserve turing plugin \(pid (?P<pid>\d+)\): (?P<what>.*)$")


def write_checkpoint(folder: Path, preset: str) -> dict[str, Any]:
    """config.json, generation_config.json and a byte-level tokenizer; no weights (the engine draws them)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    geometry = PRESETS[preset]
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {token: index for index, token in enumerate(SPECIALS)}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[char] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIALS)
    tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", BOS)])
    tokenizer.save(str(folder / "tokenizer.json"))
    assert len(vocab) <= geometry["vocab_size"]
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<bos>",
                "eos_token": "<eos>",
                "pad_token": "<pad>",
                "unk_token": "<unk>",
                "add_bos_token": True,
                "add_eos_token": False,
                "model_max_length": geometry["max_position_embeddings"],
                "chat_template": "{{ bos_token }}{% for m in messages %}{{ '<start_of_turn>' + m['role'] + '\\n' + "
                "m['content'] + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
                "{{ '<start_of_turn>model\\n' }}{% endif %}",
            },
            indent=1,
        )
    )
    config = {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        "dtype": "bfloat16",
        **{
            key: geometry[key]
            for key in (
                "vocab_size",
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "head_dim",
                "global_head_dim",
                "sliding_window",
                "layer_types",
                "num_kv_shared_layers",
                "hidden_size_per_layer_input",
                "max_position_embeddings",
            )
        },
        "vocab_size_per_layer_input": geometry["vocab_size"],
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "use_cache": True,
        "pad_token_id": PAD,
        "eos_token_id": EOS,
        "bos_token_id": BOS,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "final_logit_softcapping": None,
        "use_bidirectional_attention": None,
        "attention_k_eq_v": False,
        "enable_moe_block": False,
        "use_double_wide_mlp": True,
        "num_experts": None,
        "top_k_experts": None,
        "moe_intermediate_size": None,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
        },
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": BOS, "eos_token_id": [EOS], "pad_token_id": PAD})
    )
    return config


def weight_shapes(config: dict[str, Any]) -> list[tuple[str, tuple[int, ...], bool]]:
    """(name, shape, is_norm) of every tensor of a text-only Gemma 4 in Hugging Face naming.

    KV-shared layers keep their k/v projections and k_norm: vLLM 0.26 builds them and its loader
    insists every parameter it built is loaded.
    """
    hidden, layers, per_layer = (
        config["hidden_size"],
        config["num_hidden_layers"],
        config["hidden_size_per_layer_input"],
    )
    vocab, heads, kv_heads = config["vocab_size"], config["num_attention_heads"], config["num_key_value_heads"]
    first_shared = layers - config["num_kv_shared_layers"]
    shapes: list[tuple[str, tuple[int, ...], bool]] = [
        ("model.embed_tokens.weight", (vocab, hidden), False),
        ("model.embed_tokens_per_layer.weight", (vocab, layers * per_layer), False),
        ("model.per_layer_model_projection.weight", (layers * per_layer, hidden), False),
        ("model.per_layer_projection_norm.weight", (per_layer,), True),
        ("model.norm.weight", (hidden,), True),
    ]
    for index, kind in enumerate(config["layer_types"]):
        prefix = f"model.layers.{index}."
        head = config["global_head_dim"] if kind == "full_attention" else config["head_dim"]
        wide = 2 if index >= first_shared and config["use_double_wide_mlp"] else 1
        inner = config["intermediate_size"] * wide
        shapes += [
            (prefix + "layer_scalar", (1,), True),
            (prefix + "self_attn.q_proj.weight", (heads * head, hidden), False),
            (prefix + "self_attn.q_norm.weight", (head,), True),
            (prefix + "self_attn.k_proj.weight", (kv_heads * head, hidden), False),
            (prefix + "self_attn.v_proj.weight", (kv_heads * head, hidden), False),
            (prefix + "self_attn.k_norm.weight", (head,), True),
            (prefix + "self_attn.o_proj.weight", (hidden, heads * head), False),
            (prefix + "mlp.gate_proj.weight", (inner, hidden), False),
            (prefix + "mlp.up_proj.weight", (inner, hidden), False),
            (prefix + "mlp.down_proj.weight", (hidden, inner), False),
            (prefix + "per_layer_input_gate.weight", (per_layer, hidden), False),
            (prefix + "per_layer_projection.weight", (hidden, per_layer), False),
            *[
                (prefix + f"{norm}.weight", (hidden,), True)
                for norm in (
                    "input_layernorm",
                    "post_attention_layernorm",
                    "pre_feedforward_layernorm",
                    "post_feedforward_layernorm",
                    "post_per_layer_input_norm",
                )
            ],
        ]
    return shapes


def write_weights(folder: Path, config: dict[str, Any], seed: int = 0) -> int:
    """model.safetensors with N(0, 0.02) bf16 weights and norms of 1, from ``seed``; returns bytes written."""
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, shape, is_norm in weight_shapes(config):
        values = torch.ones(shape) if is_norm else torch.randn(shape, generator=generator) * 0.02
        tensors[name] = values.to(torch.bfloat16)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.numel() * 2 for t in tensors.values())


def _get(url: str, timeout_s: float) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return int(response.status)
    except (urllib.error.URLError, OSError):
        return 0


def _post(url: str, body: dict[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer: dict[str, Any] = json.load(response)
            return answer
    except urllib.error.HTTPError as error:
        return {"http_error": error.code, "body": error.read().decode(errors="replace")[:2000]}


class Engine:
    """One `vllm serve` in its own process group, its log in a file; always stopped by `stop()`."""

    def __init__(self, label: str, command: list[str], env: dict[str, str], log: Path, port: int) -> None:
        self.label, self.log, self.port = label, log, port
        self.handle = open(log, "w")  # closed in stop()
        self.process = subprocess.Popen(
            command, env=env, stdout=self.handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.started = time.monotonic()

    def wait_healthy(self, timeout_s: float) -> float | None:
        while time.monotonic() - self.started < timeout_s:
            if self.process.poll() is not None:
                return None
            if _get(f"http://127.0.0.1:{self.port}/health", 2.0) == 200:
                return time.monotonic() - self.started
            time.sleep(1.0)
        return None

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # the API server shuts its engine core down itself
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        try:  # children that outlived the leader share its process group
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.handle.close()
        return self.process.returncode


def plugin_evidence(log_text: str, server_pid: int, serving_part: str) -> dict[str, Any]:
    """The plugin's own lines in the engine log, grouped by the process that wrote them.

    ``serving_part`` is the log up to the moment the engine was told to stop: errors are looked for there.
    """
    by_pid: dict[str, dict[str, Any]] = {}
    for line in log_text.splitlines():
        found = _PLUGIN.search(line)
        if found is None:
            continue
        prefix = _PREFIX.match(line)
        pid = found["pid"]
        if pid not in by_pid:
            process = prefix["process"] if prefix else ("APIServer" if int(pid) == server_pid else "unknown")
            by_pid[pid] = {"process": process, "lines": []}
        by_pid[pid]["lines"].append(found["what"])
    processes = list(by_pid.values())
    return {
        "processes": processes,
        "diagnostic_warning": f"DIAGNOSTIC {DIAG_ENV}" in log_text,
        "api_server_ran_plugin": any(p["process"].startswith("APIServer") for p in processes),
        "engine_core_ran_plugin": any(p["process"].startswith("EngineCore") for p in processes),
        "other_processes_ran_plugin": sorted(
            {p["process"] for p in processes if not p["process"].startswith(("APIServer", "EngineCore"))}
        ),
        "head512_tile_clamped": any(
            "head 512 prefill tile 32 -> 16" in line
            for p in processes
            for line in p["lines"]
            if "launch changed" in line
        ),
        "warps_changed": sorted(
            {
                line.split("launch changed: ", 1)[1]
                for p in processes
                for line in p["lines"]
                if "num_warps" in line and "launch changed" in line
            }
        ),
        "attention_backend_lines": [
            line[:300] for line in log_text.splitlines() if "TRITON_ATTN" in line or "attention backend" in line.lower()
        ][:6],
        "engine_errors": [
            line[:400]
            for line in serving_part.splitlines()
            if "OutOfResources" in line or "Traceback" in line or "TuringError" in line
        ][:10],
    }


def cuda_context_pids() -> list[int] | None:
    """PIDs holding a CUDA context now (nvidia-smi), or None where nvidia-smi cannot tell (no GPU, no tool)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [int(line) for line in done.stdout.split() if line.strip().isdigit()]


def ask(port: int, model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "logprobs": 5,
        "seed": 0,
        "ignore_eos": True,
        "return_tokens_as_token_ids": True,
    }
    answer = _post(f"http://127.0.0.1:{port}/v1/completions", body)
    if "choices" not in answer:
        return {"error": answer}
    choice = answer["choices"][0]
    logprobs = choice.get("logprobs") or {}
    return {
        "text": choice.get("text"),
        "tokens": logprobs.get("tokens") or [],
        "token_logprobs": logprobs.get("token_logprobs") or [],
        "top_logprobs": logprobs.get("top_logprobs") or [],
        "usage": answer.get("usage"),
    }


def compare(stock: dict[str, Any], clamped: dict[str, Any]) -> dict[str, Any]:
    """Identical token ids, or where they first differ and by how much each engine preferred its own token."""
    if "error" in stock or "error" in clamped:
        return {"comparable": False, "stock_error": stock.get("error"), "clamped_error": clamped.get("error")}
    a, b = stock["tokens"], clamped["tokens"]
    if a == b:
        worst = max(
            (
                abs(x - y)
                for x, y in zip(stock["token_logprobs"], clamped["token_logprobs"], strict=False)
                if x is not None and y is not None
            ),
            default=0.0,
        )
        return {"comparable": True, "identical": True, "tokens": len(a), "max_abs_logprob_difference": worst}
    index = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    result: dict[str, Any] = {"comparable": True, "identical": False, "tokens": len(a), "first_difference_at": index}
    if index < min(len(a), len(b)):
        top_stock = stock["top_logprobs"][index] or {}
        top_clamped = clamped["top_logprobs"][index] or {}
        result.update(
            stock_token=a[index],
            clamped_token=b[index],
            stock_logprobs_of_both=[top_stock.get(a[index]), top_stock.get(b[index])],
            clamped_logprobs_of_both=[top_clamped.get(a[index]), top_clamped.get(b[index])],
        )
        if None not in result["stock_logprobs_of_both"]:
            result["stock_gap"] = result["stock_logprobs_of_both"][0] - result["stock_logprobs_of_both"][1]
        if None not in result["clamped_logprobs_of_both"]:
            result["clamped_gap"] = result["clamped_logprobs_of_both"][1] - result["clamped_logprobs_of_both"][0]
    return result


def run_engine(
    label: str, args: argparse.Namespace, model_dir: Path, port: int, extra_env: dict[str, str], out: Path
) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", **extra_env}
    if DIAG_ENV not in extra_env:
        env.pop(DIAG_ENV, None)
    loading = ["--load-format", "dummy"] if args.weights == "dummy" else []
    command = [
        *shlex.split(args.vllm),
        str(model_dir),
        "--served-model-name",
        "m",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *loading,
        "--seed",
        "0",
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "2048",
        "--max-num-seqs",
        "16",
        *shlex.split(args.engine_args),
    ]
    log = out / f"engine_{label}.log"
    engine = Engine(label, command, env, log, port)
    result: dict[str, Any] = {
        "label": label,
        "command": command,
        "env": dict(extra_env),
        "server_pid": engine.process.pid,
    }
    try:
        healthy_after = engine.wait_healthy(args.start_timeout_s)
        result["healthy_after_s"] = None if healthy_after is None else round(healthy_after, 1)
        if healthy_after is not None:
            result["answers"] = [ask(port, "m", prompt, args.max_tokens) for prompt in PROMPTS]
            pids = cuda_context_pids()
            # The API server is the process we started; it must serve without a CUDA context of its own.
            result["cuda_context_pids"] = pids
            result["api_server_has_cuda_context"] = None if pids is None else engine.process.pid in pids
    finally:
        serving_part = log.read_text(errors="replace")
        result["exit_code"] = engine.stop()
    result["plugin"] = plugin_evidence(log.read_text(errors="replace"), engine.process.pid, serving_part)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument(
        "--weights",
        choices=("random", "dummy"),
        default="random",
        help="random: N(0, 0.02) written from a seed; dummy: vLLM's --load-format dummy (flat logits)",
    )
    parser.add_argument("--vllm", default="vllm serve", help="the command that serves (model dir appended)")
    parser.add_argument(
        "--engine-args", default="--attention-backend TRITON_ATTN --enforce-eager --gpu-memory-utilization 0.3"
    )
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--start-timeout-s", type=float, default=240.0)
    parser.add_argument("--port", type=int, default=8123)
    args = parser.parse_args()
    # A `timeout` around this script sends SIGTERM: turn it into SystemExit so every engine is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"gemmaserve-turing-gemma4-{args.preset}"
    config = write_checkpoint(model_dir, args.preset)
    (model_dir / "model.safetensors").unlink(missing_ok=True)
    weight_bytes = write_weights(model_dir, config) if args.weights == "random" else 0
    report: dict[str, Any] = {
        "preset": args.preset,
        "weights": args.weights,
        "weight_bytes": weight_bytes,
        "config": config,
        "prompts": PROMPTS,
        "runs": {},
    }
    summary = args.out / "engine_check.json"
    for label, extra, port in (("clamped", {DIAG_ENV: "65536"}, args.port), ("stock", {}, args.port + 1)):
        report["runs"][label] = run_engine(label, args, model_dir, port, extra, args.out)
        summary.write_text(json.dumps(report, indent=1))
        print(
            f"{label}: healthy after {report['runs'][label].get('healthy_after_s')} s; API server holds a CUDA "
            f"context: {report['runs'][label].get('api_server_has_cuda_context')}; plugin: "
            + json.dumps(
                {
                    k: v
                    for k, v in report["runs"][label]["plugin"].items()
                    if k not in ("processes", "attention_backend_lines")
                }
            ),
            flush=True,
        )
    runs = report["runs"]
    if "answers" in runs["clamped"] and "answers" in runs["stock"]:
        report["comparison"] = [
            compare(s, c) for s, c in zip(runs["stock"]["answers"], runs["clamped"]["answers"], strict=True)
        ]
        for prompt, verdict in zip(PROMPTS, report["comparison"], strict=True):
            print(f"{prompt[:40]!r}: {json.dumps(verdict)}", flush=True)
    summary.write_text(json.dumps(report, indent=1))
    with tarfile.open(args.out / "engine_logs.tar.gz", "w:gz") as archive:
        for label in runs:
            log = args.out / f"engine_{label}.log"
            archive.add(log, arcname=log.name)
            log.unlink()
    ok = all(runs[label].get("answers") for label in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
