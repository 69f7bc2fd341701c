"""Run vLLM's real unified-attention kernel: stock, blind tile 16, tile clamp and the new launch, vs float64.

Usage (on a CUDA machine with torch and triton; vLLM itself is not needed):
    python benchmarks/turing_gpu_graph_check.py --vllm-file DIR/triton_unified_attention.py --out result.json
The kernel file's `triton_attention_helpers.py` must lie beside it. Gemma 4's two layer kinds are
run: head 256 with a 512-token sliding window and head 512 global, on a mixed prefill+decode batch
(the 2D launch) and on a pure decode batch (the 3D split-KV launch), over paged KV blocks.
Variants: "stock" (vLLM's own launch), "tile16" (the blind halving of every tile to 16), "clamped"
(the tile-only clamp gemmaserve shipped first: tile rule, Triton's default 4 warps) and "launch"
(the plugin's delivery as on a T4: its tile wrapper and its kernel wrapper, which adds the rule's
num_warps). The sm_75 choices are forced on whatever GPU runs this, so numerics and cost compare;
an H200 is not a T4 (the JSON records both), so the times price the launch shapes on this GPU.
Times come from CUDA-graph replays in interleaved rounds, so Python's launch cost is not timed.
`--dry-run-cpu` runs small shapes through Triton's interpreter on the CPU (no graphs, no timing
worth reading): a check of the script itself before GPU time is spent.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from gemmaserve.turing.kernel_source import load_kernel_module
from gemmaserve.turing.plugin import CudaDevice, TuringLaunch
from gemmaserve.turing.plugin import clamped_tile_function as plugin_tile_function
from gemmaserve.turing.rule import clamp_tile_size, next_power_of_2

BLOCK_SIZE = 16
NUM_QUERY_HEADS = 8  # Gemma 4 E2B: 8 query heads share 1 KV head
NUM_KV_HEADS = 1
SEGMENTS = 16
#: The module-level function `unified_attention` looks up at call time (vLLM 0.29–0.34).
TILE_FUNCTION_NAME = "_get_tile_size"
KERNEL_NAME = "kernel_unified_attention"
T4_AS_THE_RULE_SEES_IT = CudaDevice(capability=(7, 5), smem_optin_bytes=65_536)
#: NVIDIA's T4 datasheet and CUDA's compute-capability table, for the record beside this GPU's own figures.
T4_FACTS = {
    "name": "Tesla T4",
    "capability": [7, 5],
    "shared_memory_per_block_optin": 65_536,
    "multi_processor_count": 40,
    "max_sm_clock_mhz": 1590,
    "memory_bandwidth_gb_s": 320,
    "registers_per_sm": 65_536,
    "source": "NVIDIA T4 datasheet; CUDA C++ Programming Guide",
}
TURING_SMEM_OPTIN_BYTES = 65_536
TURING_MAJOR = 7
BLOCK_M = 16  # unified_attention's BLOCK_M when <= 16 query heads share a KV head

TileFunction = Callable[[int, int, int, bool], int]
DEVICE = "cuda"  # "cpu" under --dry-run-cpu (Triton's interpreter)


def clamped_tile_function(stock_function: TileFunction) -> TileFunction:
    """vLLM's own tile choice passed through gemmaserve's rule as if on a T4 (sm_75, 64 KiB)."""

    def clamped(head_size: int, sliding_window: int, element_size: int, is_prefill: bool) -> int:
        stock = stock_function(head_size, sliding_window, element_size, is_prefill)
        return clamp_tile_size(
            TURING_MAJOR, TURING_SMEM_OPTIN_BYTES, next_power_of_2(head_size), element_size, stock, block_m=BLOCK_M
        )

    return clamped


def tile16_function(head_size: int, sliding_window: int, element_size: int, is_prefill: bool) -> int:
    """A blind halving to 16 everywhere (the hand-edit workaround), to price the small tile where not needed."""
    return 16


class LaunchSpy:
    """Between a variant's launch path and the real kernel: what the kernel was last launched with."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.last: dict[str, Any] = {}

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        launcher = self.kernel[grid]

        def launch(*args: Any, **kwargs: Any) -> Any:
            self.last = {
                "TILE_SIZE": kwargs.get("TILE_SIZE"),
                "num_warps": kwargs.get("num_warps"),
                "IS_3D": kwargs.get("IS_3D"),
                "BLOCK_M": kwargs.get("BLOCK_M"),
            }
            return launcher(*args, **kwargs)

        return launch


def make_batch(
    query_lens: list[int], context_lens: list[int], head: int, generator: torch.Generator
) -> tuple[torch.Tensor, ...]:
    device = DEVICE
    num_blocks_per_seq = [math.ceil(c / BLOCK_SIZE) for c in context_lens]
    total_blocks = sum(num_blocks_per_seq) + 8
    permutation = torch.randperm(total_blocks, generator=generator).tolist()  # scattered, paged blocks
    block_table = torch.zeros(len(query_lens), max(num_blocks_per_seq), dtype=torch.int32)
    cursor = 0
    for s, n in enumerate(num_blocks_per_seq):
        block_table[s, :n] = torch.tensor(permutation[cursor : cursor + n], dtype=torch.int32)
        cursor += n
    kv_shape = (total_blocks, BLOCK_SIZE, NUM_KV_HEADS, head)
    k = torch.randn(kv_shape, generator=generator).to(device, torch.float16)
    v = torch.randn(kv_shape, generator=generator).to(device, torch.float16)
    q = torch.randn(sum(query_lens), NUM_QUERY_HEADS, head, generator=generator).to(device, torch.float16)
    cu = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    return q, k, v, block_table.to(device), cu, torch.tensor(context_lens, dtype=torch.int32, device=device)


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_table: torch.Tensor,
    cu: torch.Tensor,
    seq_lens: torch.Tensor,
    window: int,
) -> torch.Tensor:
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    group = NUM_QUERY_HEADS // NUM_KV_HEADS
    scale = 1.0 / math.sqrt(q.shape[-1])
    for s in range(len(seq_lens)):
        start, end, context = int(cu[s]), int(cu[s + 1]), int(seq_lens[s])
        blocks = block_table[s, : math.ceil(context / BLOCK_SIZE)].long()
        keys = k[blocks].reshape(-1, NUM_KV_HEADS, q.shape[-1])[:context].double()
        values = v[blocks].reshape(-1, NUM_KV_HEADS, q.shape[-1])[:context].double()
        query = q[start:end].double()
        q_pos = torch.arange(context - (end - start), context, device=q.device)[:, None]
        k_pos = torch.arange(context, device=q.device)[None, :]
        visible = k_pos <= q_pos
        if window > 0:
            visible &= (q_pos - k_pos) < window
        for h in range(NUM_QUERY_HEADS):
            kv = h // group
            scores = (query[:, h] @ keys[:, kv].T) * scale
            scores = scores.masked_fill(~visible, float("-inf"))
            out[start:end, h] = torch.softmax(scores, dim=-1) @ values[:, kv]
    return out


def graph_of(call: Callable[[], None], repeats: int) -> torch.cuda.CUDAGraph:
    """A CUDA graph of `repeats` launches: replaying it times the GPU work, not Python's launch cost."""
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            call()
    return graph


def time_interleaved(
    calls: dict[str, Callable[[], None]], rounds: int = 15, repeats: int = 20
) -> dict[str, list[float]]:
    """Milliseconds per launch, per variant: rounds alternate the variants (A-B-C-A-B-C...) against drift."""
    if DEVICE == "cpu":  # the interpreter: one plain call each, for the script's sake only
        samples_cpu: dict[str, list[float]] = {}
        for label, call in calls.items():
            begin = time.perf_counter()
            call()
            samples_cpu[label] = [(time.perf_counter() - begin) * 1000]
        return samples_cpu
    graphs = {label: graph_of(call, repeats) for label, call in calls.items()}
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for graph in graphs.values():
        graph.replay()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for label, graph in graphs.items():
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            samples[label].append(start.elapsed_time(end) / repeats)
    return samples


def run_case(
    module: ModuleType,
    head: int,
    window: int,
    query_lens: list[int],
    context_lens: list[int],
    seed: int,
    seq_threshold_3d: int,
) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(seed)
    q, k, v, block_table, cu, seq_lens = make_batch(query_lens, context_lens, head, generator)
    head_padded = triton.next_power_of_2(head)
    max_q = max(query_lens)
    segm_rows = len(query_lens)
    segm: dict[str, Any] = {
        "seq_threshold_3D": seq_threshold_3d,
        "num_par_softmax_segments": SEGMENTS,
        "softmax_segm_output": torch.empty(
            segm_rows, NUM_QUERY_HEADS, SEGMENTS, head_padded, dtype=torch.float32, device=DEVICE
        ),
        "softmax_segm_max": torch.empty(segm_rows, NUM_QUERY_HEADS, SEGMENTS, dtype=torch.float32, device=DEVICE),
        "softmax_segm_expsum": torch.empty(segm_rows, NUM_QUERY_HEADS, SEGMENTS, dtype=torch.float32, device=DEVICE),
    }
    scales = torch.ones(len(query_lens), NUM_KV_HEADS, dtype=torch.float32, device=DEVICE)
    expected = reference(q, k, v, block_table, cu, seq_lens, window)
    stock_function: TileFunction = getattr(module, TILE_FUNCTION_NAME)
    uses_3d = max_q == 1 and len(query_lens) <= seq_threshold_3d
    result: dict[str, Any] = {
        "head_size": head,
        "sliding_window": window,
        "query_lens": query_lens,
        "context_lens": context_lens,
        "seq_threshold_3d": seq_threshold_3d,
        "layout": "3D" if uses_3d else "2D",
    }
    calls: dict[str, Callable[[], None]] = {}
    outputs: dict[str, torch.Tensor] = {}
    real_kernel = getattr(module, KERNEL_NAME)
    spies = {label: LaunchSpy(real_kernel) for label in ("stock", "tile16", "clamped", "launch")}
    variants: tuple[tuple[str, TileFunction, Any], ...] = (
        ("stock", stock_function, spies["stock"]),
        ("tile16", tile16_function, spies["tile16"]),
        ("clamped", clamped_tile_function(stock_function), spies["clamped"]),
        (
            "launch",
            plugin_tile_function(stock_function, T4_AS_THE_RULE_SEES_IT),
            TuringLaunch(spies["launch"], T4_AS_THE_RULE_SEES_IT, stock_tile=stock_function),
        ),
    )
    for label, tile_function, kernel in variants:
        out = torch.empty_like(q)

        # Bind this variant's functions and output now: the call runs again later, inside
        # graph capture, when the loop variables have moved on.
        def call(tile_function: TileFunction = tile_function, out: torch.Tensor = out, kernel: Any = kernel) -> None:
            setattr(module, TILE_FUNCTION_NAME, tile_function)
            setattr(module, KERNEL_NAME, kernel)
            module.unified_attention(
                q=q,
                k=k,
                v=v,
                out=out,
                cu_seqlens_q=cu,
                max_seqlen_q=max_q,
                seqused_k=seq_lens,
                max_seqlen_k=max(context_lens),
                softmax_scale=1.0 / math.sqrt(head),
                causal=True,
                window_size=(window - 1, 0) if window > 0 else (-1, -1),
                block_table=block_table,
                softcap=0,
                q_descale=None,
                k_descale=scales,
                v_descale=scales,
                **segm,
            )

        call()  # compiles, and the output checked below
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        calls[label] = call
        outputs[label] = out
        error = (out.double() - expected).norm() / expected.norm()
        max_abs = (out.double() - expected).abs().max()
        fp16_rounding = (expected.half().double() - expected).norm() / expected.norm()
        launched = spies[label].last
        result[label] = {
            "tile_prefill": tile_function(head, window, 2, True),
            "tile_decode": tile_function(head, window, 2, False),
            "tile_launched": launched["TILE_SIZE"],
            "num_warps": launched["num_warps"] or "default (4)",
            "block_m": launched["BLOCK_M"],
            "relative_error": float(error),
            "max_abs_error": float(max_abs),
            "fp16_rounding_of_reference": float(fp16_rounding),
        }
    times = time_interleaved(calls)
    setattr(module, TILE_FUNCTION_NAME, stock_function)
    setattr(module, KERNEL_NAME, real_kernel)
    for label, samples in times.items():
        result[label]["time_ms"] = statistics.median(samples)
        result[label]["time_ms_samples"] = samples
        # The graphs replayed the launches into the same outputs: they must still be right.
        replayed = outputs[label].double()
        result[label]["relative_error_after_replay"] = float((replayed - expected).norm() / expected.norm())
    result["clamped_over_stock_time"] = result["clamped"]["time_ms"] / result["stock"]["time_ms"]
    result["tile16_over_stock_time"] = result["tile16"]["time_ms"] / result["stock"]["time_ms"]
    result["launch_over_stock_time"] = result["launch"]["time_ms"] / result["stock"]["time_ms"]
    result["launch_over_clamped_time"] = result["launch"]["time_ms"] / result["clamped"]["time_ms"]
    return result


def device_facts() -> dict[str, Any]:
    """This GPU's own figures (torch and nvidia-smi), to set beside a T4's."""
    props = torch.cuda.get_device_properties(0)
    facts: dict[str, Any] = {
        "name": props.name,
        "capability": [props.major, props.minor],
        "shared_memory_per_block_optin": getattr(props, "shared_memory_per_block_optin", None),
        "multi_processor_count": props.multi_processor_count,
        "registers_per_sm": getattr(props, "regs_per_multiprocessor", None),
        "total_memory_gib": round(props.total_memory / 2**30, 2),
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
    }
    try:
        done = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=clocks.max.sm,clocks.sm,clocks.max.mem,power.limit",
                "--format=csv,noheader,nounits",
                "-i",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        max_sm, sm, max_mem, power = (part.strip() for part in done.stdout.strip().split(","))
        facts.update(max_sm_clock_mhz=max_sm, sm_clock_mhz_now=sm, max_memory_clock_mhz=max_mem, power_limit_w=power)
    except (OSError, ValueError, subprocess.TimeoutExpired) as error:
        facts["nvidia_smi_error"] = str(error)
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vllm-file", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--budget-s",
        type=float,
        default=0.0,
        help="stop starting new cases after this many seconds (0: no limit); the JSON says so",
    )
    parser.add_argument(
        "--dry-run-cpu",
        action="store_true",
        help="small shapes in Triton's interpreter on the CPU (set TRITON_INTERPRET=1)",
    )
    args = parser.parse_args()
    started = time.monotonic()
    global DEVICE
    if args.dry_run_cpu:
        DEVICE = "cpu"
    capability = (9, 0) if args.dry_run_cpu else torch.cuda.get_device_capability()
    module = load_kernel_module(args.vllm_file, capability=capability)
    decode_contexts = [33 + 131 * i for i in range(32)]
    workloads = {
        # A mixed step as the scheduler builds it: chunked prefills beside many decodes.
        "mixed": ([512, 300, 57] + [1] * 29, [2048, 1200, 57] + [700 + 97 * i for i in range(29)], 32),
        # A decode step small enough for the 3D split-KV launch.
        "decode": ([1] * 32, decode_contexts, 32),
        # The same decode step above the 3D threshold: vLLM runs it 2D, with the *prefill* tile.
        "decode-2d": ([1] * 32, decode_contexts, 16),
    }
    if args.dry_run_cpu:
        workloads = {
            "mixed": ([40, 1, 1], [600, 57, 90], 4),
            "decode": ([1, 1], [600, 40], 4),
            "decode-2d": ([1, 1, 1], [600, 40, 20], 2),
        }
    cases: list[dict[str, Any]] = []
    skipped: list[str] = []
    for head, window in ((512, 0), (256, 512)):
        for name, (query_lens, context_lens, threshold) in workloads.items():
            if args.budget_s and time.monotonic() - started > args.budget_s:
                skipped.append(f"head {head} {name}")
                continue
            case = run_case(module, head, window, query_lens, context_lens, args.seed + len(cases), threshold)
            case["workload"] = name
            cases.append(case)
            print(
                f"head {head} window {window} {name} ({case['layout']}): "
                + ", ".join(
                    f"{label} tile {case[label]['tile_launched']} warps {case[label]['num_warps']} "
                    f"err {case[label]['relative_error']:.3e} {case[label]['time_ms']:.4f} ms"
                    for label in ("stock", "tile16", "clamped", "launch")
                ),
                flush=True,
            )
            args.out.write_text(json.dumps(_report(capability, args.vllm_file, cases, skipped, started), indent=2))
    args.out.write_text(json.dumps(_report(capability, args.vllm_file, cases, skipped, started), indent=2))
    return 0


def _report(
    capability: tuple[int, int], vllm_file: Path, cases: list[dict[str, Any]], skipped: list[str], started: float
) -> dict[str, Any]:
    if DEVICE == "cpu":
        return {
            "device": "cpu (Triton interpreter dry run)",
            "capability": list(capability),
            "cases": cases,
            "skipped_for_time": skipped,
        }
    return {
        "device": torch.cuda.get_device_name(),
        "capability": list(capability),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "vllm_file": str(vllm_file),
        "this_gpu": device_facts(),
        "t4_for_comparison": T4_FACTS,
        "note": (
            "The sm_75 launches are forced on this GPU: Triton compiles them for this GPU's "
            "architecture (its own register allocation, pipelining, shared memory), so the times "
            "price the launch shapes here and do not predict a T4's; the sm_75 spill figures come "
            "from the compiler (gemmaserve turing smem --search)."
        ),
        "elapsed_s": round(time.monotonic() - started, 1),
        "skipped_for_time": skipped,
        "cases": cases,
    }


if __name__ == "__main__":
    raise SystemExit(main())
