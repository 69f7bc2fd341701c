"""Throughput and peak RSS of `checkpoint repack` and `grid-check` on a multi-GB synthetic checkpoint,
and the bytes `checkpoint inspect` fetches from a (local, fake) hub.

    /work/venv/bin/python benchmarks/checkpoint_throughput.py --gb 2.5 --workdir /tmp/gs-ckpt-bench

Writes a -qat-q4_0-unquantized-style checkpoint (bf16 values on the q4_0 grid) under --workdir,
runs each phase in a fresh child process (so ru_maxrss is that phase's peak), and prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

ROWS, COLS = 4096, 4096  # 32 MiB of bf16 per tensor
TENSORS_PER_SHARD = 8


def write_synthetic(root: Path, total_gb: float, seed: int = 0) -> int:
    from gemmaserve.checkpoint import grid

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    n_tensors = max(1, int(total_gb * 1e9 // (ROWS * COLS * 2)))
    weight_map: dict[str, str] = {}
    names = [f"model.language_model.layers.{i // 4}.mlp.{('gate', 'up', 'down', 'x')[i % 4]}_proj.weight" for i in range(n_tensors)]
    names = [n.replace("x_proj", "o_proj").replace("mlp.o_proj", "self_attn.o_proj") for n in names]
    shards = [names[i : i + TENSORS_PER_SHARD] for i in range(0, n_tensors, TENSORS_PER_SHARD)]
    total = 0
    for s, shard_names in enumerate(shards):
        shard = f"model-{s + 1:05d}-of-{len(shards):05d}.safetensors"
        header, offset = {}, 0
        for name in sorted(shard_names):
            header[name] = {"dtype": "BF16", "shape": [ROWS, COLS], "data_offsets": [offset, offset + ROWS * COLS * 2]}
            offset += ROWS * COLS * 2
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(root / shard, "wb") as handle:
            handle.write(struct.pack("<Q", len(text)) + text)
            for name in sorted(shard_names):
                levels = rng.integers(-8, 8, size=(ROWS, COLS // 32, 32), dtype=np.int8)
                levels[..., 0] = -8
                steps = grid.round_to_dtype(rng.uniform(0.002, 0.05, size=(ROWS, COLS // 32)).astype(np.float32), "BF16")
                values = grid.reconstruct(levels.astype(np.float32), steps, "BF16")
                handle.write(grid.f32_to_bf16_bits(values).tobytes())
                weight_map[name] = shard
        total += offset
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    config = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
              "text_config": {"hidden_size": COLS, "num_hidden_layers": (n_tensors + 3) // 4, "tie_word_embeddings": True}}  # fmt: skip
    (root / "config.json").write_text(json.dumps(config))
    return total


def run_phase(code: str) -> dict:
    """Run ``code`` in a child interpreter; return its JSON result plus wall time and peak RSS."""
    prelude = "import resource, time, json; import gemmaserve.checkpoint; t0 = time.perf_counter()\n"
    epilogue = (
        "\nprint(json.dumps({'work_s': time.perf_counter() - t0,"
        " 'peak_rss_mib': int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]) / 1024}))"
    )
    out = subprocess.run([sys.executable, "-c", prelude + code + epilogue], check=True, capture_output=True, text=True).stdout
    lines = out.strip().splitlines()
    result = json.loads(lines[0])
    measured = json.loads(lines[-1])
    result.update(wall_s=round(measured["work_s"], 2), peak_rss_mib=round(measured["peak_rss_mib"], 1))
    return result


def serve(root: Path) -> tuple[ThreadingHTTPServer, dict[str, int]]:
    sent: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            name = self.path.split("/resolve/main/", 1)[-1].split("?")[0]
            file = root / name
            if not file.is_file():
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            size = file.stat().st_size
            start, end, status = 0, size, 200
            if (rng := self.headers.get("Range", "")).startswith("bytes="):
                lo, _, hi = rng[6:].partition("-")
                start, end, status = int(lo), min(size, int(hi) + 1 if hi else size), 206
            with open(file, "rb") as handle:
                handle.seek(start)
                body = handle.read(end - start)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.end_headers()
            self.wfile.write(body)
            sent[name] = sent.get(name, 0) + len(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, sent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=2.5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gemmaserve-checkpoint-bench"))
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    src, out = args.workdir / "src", args.workdir / "w4a16"
    t0 = time.perf_counter()
    total = write_synthetic(src, args.gb)
    results: dict = {"input_bytes": total, "generate_s": round(time.perf_counter() - t0, 1), "cpus": os.cpu_count()}
    os.system("sync")
    repack = run_phase(
        "import json; from gemmaserve.checkpoint import repack_checkpoint as r;"
        f"x = r({str(src)!r}, {str(out)!r}); print(json.dumps({{'values': x.values_quantized, 'bit_exact': x.values_bit_exact}}))"
    )
    repack["gb_per_s"] = round(total / 1e9 / repack["wall_s"], 3)
    results["repack"] = repack
    check = run_phase(
        "import json; from gemmaserve.checkpoint import grid_check as g;"
        f"x = g({str(out)!r}, {str(src)!r}); print(json.dumps({{'values': x.values, 'bit_identical': x.values_bit_identical, 'verdict': x.verdict}}))"
    )
    check["reference_gb_per_s"] = round(total / 1e9 / check["wall_s"], 3)
    results["grid_check"] = check
    server, sent = serve(out)
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    os.environ.pop("HF_HUB_OFFLINE", None)
    from huggingface_hub import HfApi

    from gemmaserve.checkpoint import inspect_checkpoint

    report = inspect_checkpoint("bench/synthetic-w4a16", hub_api=HfApi(endpoint=endpoint, token=False))
    shards = {k: v for k, v in sent.items() if k.endswith(".safetensors")}
    results["inspect_hub"] = {
        "shards": len(shards),
        "checkpoint_bytes": sum((out / k).stat().st_size for k in shards),
        "bytes_fetched_per_shard_max": max(shards.values()),
        "bytes_fetched_total": sum(sent.values()),
        "parts": {p.part: p.bytes for p in report.parts},
    }
    server.shutdown()
    print(json.dumps(results, indent=2))
    if not args.keep:
        shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
