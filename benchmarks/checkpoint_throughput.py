"""Throughput, CPU time and peak RSS of `checkpoint repack` and `grid-check` on a multi-GB synthetic checkpoint,
beside the disk-limited figures (`cat` of the same files to /dev/null; writing the repack's output size and
fsyncing it), before and after, in one run;
grid-check over a (loopback) hub with the bytes it fetched; and the bytes `checkpoint inspect` fetches.

    .venv/bin/python benchmarks/checkpoint_throughput.py --gb 1.0 --rounds 3 --before 422b3a1

Writes a -qat-q4_0-unquantized-style checkpoint (bf16 values on the q4_0 grid) under --workdir. Each
measurement runs in a fresh child interpreter (so VmHWM is that phase's peak RSS), and rounds
interleave every implementation (the machine is shared: compare within a round, quote medians):
``before`` is --before REV's src/ (git archive), ``numpy``, ``numba`` and ``numba-dispatch`` are this
tree with GEMMASERVE_CHECKPOINT_KERNEL set (``numba``: the one-pass kernels loaded from their cached
object through llvmlite, no numba import; ``numba-dispatch``: through numba's dispatchers, as before).
Every repack's files must hash the same and every grid-check must report the same counts, else the run
fails; every ``numba`` run must have loaded the cached object and not imported numba. Each round also
runs every implementation on a one-tensor (32 MiB) checkpoint: a run's fixed cost (interpreter work,
loading the kernels), so that ``marginal_gb_per_s`` (the GB beyond that tensor over the seconds beyond it)
is what a 50 GB checkpoint sees; ``process_s`` is the child's whole life (interpreter start and imports
included). ``--impls numba --no-hub`` for quick runs. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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
    names = [
        f"model.language_model.layers.{i // 4}.mlp.{('gate', 'up', 'down', 'x')[i % 4]}_proj.weight"
        for i in range(n_tensors)
    ]
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
                steps = grid.round_to_dtype(
                    rng.uniform(0.002, 0.05, size=(ROWS, COLS // 32)).astype(np.float32), "BF16"
                )
                values = grid.reconstruct(levels.astype(np.float32), steps, "BF16")
                handle.write(grid.f32_to_bf16_bits(values).tobytes())
                weight_map[name] = shard
        total += offset
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    config = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
              "text_config": {"hidden_size": COLS, "num_hidden_layers": (n_tensors + 3) // 4, "tie_word_embeddings": True}}  # fmt: skip
    (root / "config.json").write_text(json.dumps(config))
    return total


def run_phase(code: str, *, pythonpath: str | None = None, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` in a child interpreter; return its JSON result plus wall time, CPU time and peak RSS."""
    prelude = (
        "import resource, time, json; import gemmaserve.checkpoint\n"
        "u0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()\n"
    )
    epilogue = (
        "\nu1 = resource.getrusage(resource.RUSAGE_SELF); t1 = time.perf_counter(); import sys\n"
        "from gemmaserve.checkpoint import grid as _grid\n"
        "print(json.dumps({'work_s': t1 - t0,"
        " 'cpu_s': (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime),"
        " 'module': gemmaserve.__file__, 'numba_imported': 'numba' in sys.modules,"
        " 'loader': type(_grid.kernels()).__name__,"
        " 'peak_rss_mib': int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]) / 1024}))"
    )
    child_env = dict(os.environ, **(env or {}))
    if pythonpath:
        child_env["PYTHONPATH"] = pythonpath
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", prelude + code + epilogue], check=True, capture_output=True, text=True, env=child_env
    ).stdout
    process_s = time.perf_counter() - started
    lines = out.strip().splitlines()
    result = json.loads(lines[0])
    measured = json.loads(lines[-1])
    result.update(
        wall_s=round(measured["work_s"], 3), cpu_s=round(measured["cpu_s"], 3), process_s=round(process_s, 3),
        peak_rss_mib=round(measured["peak_rss_mib"], 1), module=measured["module"],
        numba_imported=measured["numba_imported"], loader=measured["loader"],
    )  # fmt: skip
    return result


def cat_seconds(files: list[Path]) -> float:
    """Wall seconds for `cat FILES > /dev/null`: what reading the bytes costs here (page cache when warm)."""
    with open(os.devnull, "wb") as devnull:
        t0 = time.perf_counter()
        subprocess.run(["cat", *map(str, files)], stdout=devnull, check=True)
        return time.perf_counter() - t0


def write_seconds(nbytes: int, path: Path) -> float:
    """Wall seconds to write ``nbytes`` and fsync them: what writing the repack's output durably costs here."""
    chunk = bytes(8 << 20)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        left = nbytes
        while left > 0:
            left -= os.write(fd, chunk[: min(left, len(chunk))])
        os.fsync(fd)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - t0
    path.unlink()
    return seconds


def tree_digest(root: Path) -> dict[str, str]:
    manifest = json.loads((root / "gemmaserve-manifest.json").read_text())
    return {name: f["sha256"] for name, f in manifest["files"].items()}


def export_tree(rev: str, into: Path) -> Path:
    """``git archive REV src`` unpacked under ``into``: the code before, importable by PYTHONPATH."""
    into.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parent.parent
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "src"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


REPACK = (
    "import json, shutil; from gemmaserve.checkpoint import repack_checkpoint as r\n"
    "x = r({src!r}, {out!r})\n"
    "print(json.dumps({{'values': x.values_quantized, 'bit_exact': x.values_bit_exact}}))"
)
CHECK = (
    "import json; from gemmaserve.checkpoint import grid_check as g\n"
    "x = g({build!r}, {ref!r}{extra})\n"
    "print(json.dumps({{'values': x.values, 'bit_identical': x.values_bit_identical, 'off': x.values_off_by_a_level_or_more,"
    " 'verdict': x.verdict, 'build_bytes_fetched': x.build_bytes_fetched, 'reference_bytes_fetched': x.reference_bytes_fetched}}))"
)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def serve(repos: dict[str, Path]) -> tuple[ThreadingHTTPServer, dict[str, int]]:
    """A loopback hub: GET /{owner}/{name}/resolve/{rev}/{file} with Range support; counts bytes sent per file."""
    sent: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            repo, _, name = self.path.split("?")[0].lstrip("/").partition("/resolve/main/")
            root = repos.get(repo)
            file = root / name if root else Path("/nonexistent")
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
            # Counted before sending: the client may read the counter as soon as it has the body.
            sent[f"{repo}/{name}"] = sent.get(f"{repo}/{name}", 0) + len(body)
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, sent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gemmaserve-checkpoint-bench"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=None, help="git revision whose src/ is measured as 'before'")
    parser.add_argument("--reuse", action="store_true", help="reuse a checkpoint already generated under --workdir")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--impls",
        default="before,numpy,numba-dispatch,numba",
        help="which of before, numpy, numba-dispatch, numba to measure (comma-separated)",
    )
    parser.add_argument("--no-hub", action="store_true", help="skip the loopback hub and inspect measurements")
    args = parser.parse_args()
    src, out = args.workdir / "src", args.workdir / "w4a16"
    if not (args.reuse and src.is_dir()):
        shutil.rmtree(args.workdir, ignore_errors=True)
        write_synthetic(src, args.gb)
    shutil.rmtree(out, ignore_errors=True)
    here = str(Path(__file__).resolve().parent.parent / "src")
    wanted = set(args.impls.split(","))
    impls: dict[str, tuple[str, dict[str, str]]] = {}
    if args.before and "before" in wanted:
        impls["before"] = (str(export_tree(args.before, args.workdir / "before")), {})
    if "numpy" in wanted:
        impls["numpy"] = (here, {"GEMMASERVE_CHECKPOINT_KERNEL": "numpy"})
    if "numba-dispatch" in wanted:
        impls["numba-dispatch"] = (here, {"GEMMASERVE_CHECKPOINT_KERNEL": "numba-dispatch"})
    numba = (here, {"GEMMASERVE_CHECKPOINT_KERNEL": "numba"})
    if "numba" in wanted:
        impls["numba"] = numba
    # One tensor (32 MiB) and its build: what a run costs whatever the size (interpreter work, loading the
    # kernels), so that the throughput per extra GB (what a 50 GB checkpoint sees) can be told apart.
    one_src, one_out = args.workdir / "one" / "src", args.workdir / "one" / "w4a16"
    if not (args.reuse and one_out.is_dir()):
        shutil.rmtree(args.workdir / "one", ignore_errors=True)
        write_synthetic(one_src, ROWS * COLS * 2 / 1e9)
        run_phase(REPACK.format(src=str(one_src), out=str(one_out)), pythonpath=here, env=numba[1])
    one_bytes = sum(f.stat().st_size for f in one_src.glob("*.safetensors"))
    src_files = sorted(src.glob("*.safetensors"))
    total = sum(f.stat().st_size for f in src_files)
    results: dict = {"input_bytes": total, "cpus": os.cpu_count(), "rounds": args.rounds, "before": args.before}
    # Untimed: compile (or load) the numba kernels, and the reference output every repack must match.
    t0 = time.perf_counter()
    run_phase(REPACK.format(src=str(src), out=str(out)), pythonpath=here, env=numba[1])
    results["first_numba_repack_s_including_compile"] = round(time.perf_counter() - t0, 2)
    expected_digest = tree_digest(out)
    out_files = sorted(out.glob("*.safetensors"))
    for name, (path, env) in impls.items():  # untimed: every tree compiles its own kernels once
        target = args.workdir / f"warm-{name}"
        run_phase(REPACK.format(src=str(one_src), out=str(target)), pythonpath=path, env=env)
        run_phase(CHECK.format(build=str(one_out), ref=str(one_src), extra=""), pythonpath=path, env=env)
        shutil.rmtree(target)
    build_bytes = sum(f.stat().st_size for f in out_files)
    cat_seconds(src_files + out_files)  # warm the page cache
    walls: dict[str, list[float]] = {}
    processes: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    rss: dict[str, float] = {}
    answers: dict[str, set[str]] = {"repack": set(), "grid_check": set()}
    for _ in range(args.rounds):
        walls.setdefault("cat_src", []).append(cat_seconds(src_files))
        walls.setdefault("cat_src_and_build", []).append(cat_seconds(src_files + out_files))
        for name, (path, env) in impls.items():
            target = args.workdir / f"out-{name}"
            shutil.rmtree(target, ignore_errors=True)
            r = run_phase(REPACK.format(src=str(src), out=str(target)), pythonpath=path, env=env)
            assert r["module"].startswith(path), r["module"]
            if tree_digest(target) != expected_digest:
                raise SystemExit(f"repack by {name} wrote different files")
            shutil.rmtree(target)
            answers["repack"].add(json.dumps({k: r[k] for k in ("values", "bit_exact")}))
            c = run_phase(CHECK.format(build=str(out), ref=str(src), extra=""), pythonpath=path, env=env)
            answers["grid_check"].add(json.dumps({k: c[k] for k in ("values", "bit_identical", "off", "verdict")}))
            target = args.workdir / f"one-out-{name}"
            shutil.rmtree(target, ignore_errors=True)
            r1 = run_phase(REPACK.format(src=str(one_src), out=str(target)), pythonpath=path, env=env)
            shutil.rmtree(target)
            c1 = run_phase(CHECK.format(build=str(one_out), ref=str(one_src), extra=""), pythonpath=path, env=env)
            for phase, m in (
                (f"repack_{name}", r), (f"grid_check_{name}", c),
                (f"repack_{name}_one_tensor", r1), (f"grid_check_{name}_one_tensor", c1),
            ):  # fmt: skip
                if name == "numba" and (m["numba_imported"] or m["loader"] != "NativeKernels"):
                    raise SystemExit(f"{phase} did not run on the cached object: {m}")
                walls.setdefault(phase, []).append(m["wall_s"])
                processes.setdefault(phase, []).append(m["process_s"])
                cpus.setdefault(phase, []).append(m["cpu_s"])
                rss[phase] = max(rss.get(phase, 0.0), m["peak_rss_mib"])
        # Last in the round (it drains the disk's write allowance): writing the build's bytes durably.
        walls.setdefault("write_build_fsync", []).append(write_seconds(build_bytes, args.workdir / "write-test"))
    if len(answers["repack"]) != 1 or len(answers["grid_check"]) != 1:
        raise SystemExit(f"implementations disagree: {answers}")
    results["results_identical"] = {k: json.loads(next(iter(v))) for k, v in answers.items()}
    phases = {}
    for phase, ws in walls.items():
        gb = (total + (sum(f.stat().st_size for f in out_files) if phase == "cat_src_and_build" else 0)) / 1e9
        gb = one_bytes / 1e9 if phase.endswith("_one_tensor") else gb
        gb = build_bytes / 1e9 if phase == "write_build_fsync" else gb  # its GB/s: of output written
        entry = {
            "wall_s_median": _median(ws),
            "wall_s": [round(w, 3) for w in ws],
            "gb_per_s": round(gb / statistics.median(ws), 3),
        }
        if phase in processes:
            entry["process_s_median"] = _median(processes[phase])
        if phase in cpus:
            entry.update(cpu_s_median=_median(cpus[phase]), cpu_s_per_gb=round(statistics.median(cpus[phase]) / gb, 3),
                         peak_rss_mib=rss[phase])  # fmt: skip
        phases[phase] = entry
    for phase, entry in phases.items():  # the GB beyond one tensor over the seconds beyond it
        if (one := phases.get(f"{phase}_one_tensor")) is not None:
            extra_s = entry["wall_s_median"] - one["wall_s_median"]
            entry["marginal_gb_per_s"] = round((total - one_bytes) / 1e9 / extra_s, 3) if extra_s > 0 else None
            entry["marginal_cpu_s_per_gb"] = round(
                (entry["cpu_s_median"] - one["cpu_s_median"]) / ((total - one_bytes) / 1e9), 3
            )
    results["phases"] = phases  # gb_per_s: input (reference) bytes per second
    if args.no_hub:
        print(json.dumps(results, indent=2))
        return
    # Grid-check over a loopback hub: only the tensors' byte ranges, blocks in flight while others compute.
    server, sent = serve({"bench/ref": src, "bench/build": out})
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    hub_env = {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": endpoint}
    extra = f", hub_api=__import__('huggingface_hub').HfApi(endpoint={endpoint!r}, token=False)"
    hub = run_phase(
        CHECK.format(build="bench/build", ref="bench/ref", extra=extra),
        pythonpath=here,
        env={**numba[1], **hub_env},
    )
    checkpoint_bytes = total + sum(f.stat().st_size for f in out_files)
    results["grid_check_hub_numba"] = {
        **{
            k: hub[k]
            for k in ("verdict", "wall_s", "cpu_s", "peak_rss_mib", "build_bytes_fetched", "reference_bytes_fetched")
        },
        "bytes_sent_by_server": sum(sent.values()),
        "checkpoint_bytes": checkpoint_bytes,
        "gb_per_s_fetched": round(sum(sent.values()) / 1e9 / hub["wall_s"], 3),
    }
    sent.clear()
    from huggingface_hub import HfApi

    from gemmaserve.checkpoint import inspect_checkpoint

    os.environ.pop("HF_HUB_OFFLINE", None)
    report = inspect_checkpoint("bench/build", hub_api=HfApi(endpoint=endpoint, token=False))
    shards = {k: v for k, v in sent.items() if k.endswith(".safetensors")}
    results["inspect_hub"] = {
        "shards": len(shards),
        "checkpoint_bytes": sum(f.stat().st_size for f in out_files),
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
