"""vLLM's real unified-attention kernel, run by Triton's interpreter on the CPU, through the plugin's delivery.

For every distinct kernel file of the tested releases: Gemma 4's two layer kinds (head 256 with a
512-token window, head 512 global), a mixed prefill+decode batch (the 2D launch) and a decode batch
(the 3D split-KV launch), stock and as the plugin launches it on a T4. The launch must carry the
rule's tile and num_warps, and the output must match float64 attention as closely as stock's does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.errors import TuringError
from gemmaserve.turing.plugin import CudaDevice, TuringLaunch, clamped_tile_function

try:
    import torch
except ImportError:  # collected without the test extra
    pytest.skip("needs torch", allow_module_level=True)
pytest.importorskip("triton")

T4 = CudaDevice(capability=(7, 5), smem_optin_bytes=65_536)
ROOT = Path(__file__).resolve().parents[3]
BLOCK_SIZE, QUERY_HEADS, KV_HEADS, SEGMENTS = 16, 8, 1, 4


class Recorder:
    """Between the launch wrapper and the real kernel: what the kernel was launched with."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.seen: list[dict[str, Any]] = []

    def __getitem__(self, grid: Any) -> Any:
        launcher = self.kernel[grid]

        def launch(*args: Any, **kwargs: Any) -> Any:
            self.seen.append({k: kwargs.get(k) for k in ("TILE_SIZE", "num_warps", "IS_3D", "HEAD_SIZE_PADDED")})
            return launcher(*args, **kwargs)

        return launch


def _batch(head: int, query_lens: list[int], contexts: list[int]) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(head + len(query_lens))
    blocks = [math.ceil(c / BLOCK_SIZE) for c in contexts]
    total = sum(blocks) + 2
    order = torch.randperm(total, generator=generator).tolist()
    table = torch.zeros(len(contexts), max(blocks), dtype=torch.int32)
    cursor = 0
    for s, n in enumerate(blocks):
        table[s, :n] = torch.tensor(order[cursor : cursor + n], dtype=torch.int32)
        cursor += n
    k = torch.randn(total, BLOCK_SIZE, KV_HEADS, head, generator=generator).half()
    v = torch.randn(total, BLOCK_SIZE, KV_HEADS, head, generator=generator).half()
    q = torch.randn(sum(query_lens), QUERY_HEADS, head, generator=generator).half()
    starts = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32)
    return {
        "q": q,
        "k": k,
        "v": v,
        "block_table": table,
        "cu_seqlens_q": starts,
        "seqused_k": torch.tensor(contexts, dtype=torch.int32),
        "blocks": blocks,
    }


def _reference(batch: dict[str, Any], window: int) -> Any:
    q, k, v = batch["q"], batch["k"], batch["v"]
    head = q.shape[-1]
    out = torch.empty(q.shape, dtype=torch.float64)
    for s, context in enumerate(batch["seqused_k"].tolist()):
        start, end = int(batch["cu_seqlens_q"][s]), int(batch["cu_seqlens_q"][s + 1])
        rows = batch["block_table"][s, : batch["blocks"][s]].long()
        keys = k[rows].reshape(-1, KV_HEADS, head)[:context, 0].double()
        values = v[rows].reshape(-1, KV_HEADS, head)[:context, 0].double()
        q_pos = torch.arange(context - (end - start), context)[:, None]
        k_pos = torch.arange(context)[None, :]
        visible = (k_pos <= q_pos) & (((q_pos - k_pos) < window) if window > 0 else True)
        for h in range(QUERY_HEADS):
            scores = (q[start:end, h].double() @ keys.T) / math.sqrt(head)
            out[start:end, h] = torch.softmax(scores.masked_fill(~visible, float("-inf")), -1) @ values
    return out


def _run(module: Any, batch: dict[str, Any], window: int, is_3d: bool) -> Any:
    q = batch["q"]
    out = torch.empty_like(q)
    rows = len(batch["blocks"])
    extra: dict[str, Any] = {}
    if is_3d:
        extra = {
            "seq_threshold_3D": rows,
            "num_par_softmax_segments": SEGMENTS,
            "softmax_segm_output": torch.empty(rows, QUERY_HEADS, SEGMENTS, q.shape[-1]),
            "softmax_segm_max": torch.empty(rows, QUERY_HEADS, SEGMENTS),
            "softmax_segm_expsum": torch.empty(rows, QUERY_HEADS, SEGMENTS),
        }
    scales = torch.ones(rows, KV_HEADS)
    module.unified_attention(
        q=q,
        k=batch["k"],
        v=batch["v"],
        out=out,
        cu_seqlens_q=batch["cu_seqlens_q"],
        max_seqlen_q=int((batch["cu_seqlens_q"][1:] - batch["cu_seqlens_q"][:-1]).max()),
        seqused_k=batch["seqused_k"],
        max_seqlen_k=int(batch["seqused_k"].max()),
        softmax_scale=1.0 / math.sqrt(q.shape[-1]),
        causal=True,
        window_size=(window - 1, 0) if window > 0 else (-1, -1),
        block_table=batch["block_table"],
        softcap=0,
        q_descale=None,
        k_descale=scales,
        v_descale=scales,
        **extra,
    )
    return out


def _distinct(files: dict[str, Path]) -> list[tuple[str, Path]]:
    seen: dict[str, tuple[str, Path]] = {}
    for version, path in sorted(files.items()):
        seen.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), (version, path))
    return list(seen.values())


# (head, window, is_3d, query lens, contexts, stock tile, the plugin's tile and warps on a T4):
# only the head-512 2D launch overflows (vLLM's tile 32 needs 98,304 B); every other launch stays vLLM's.
CASES = [
    (512, 0, False, [5, 1], [40, 23], 32, 16, 8),
    (512, 0, True, [1, 1], [40, 23], 16, 16, None),
    (256, 512, False, [5, 1], [600, 23], 32, 32, None),
    (256, 512, True, [1, 1], [600, 23], 16, 16, None),
]


def check_delivered_launches(files: list[tuple[str, str]]) -> None:
    """Runs in a child with TRITON_INTERPRET=1 (Triton reads it when the kernels are defined)."""
    from gemmaserve.turing.kernel_source import load_kernel_module

    for version, path in files:
        module = load_kernel_module(Path(path), capability=(7, 5))
        stock_tile, real = module._get_tile_size, module.kernel_unified_attention
        for head, window, is_3d, query_lens, contexts, stock_want, tile_want, warps_want in CASES:
            batch = _batch(head, query_lens, contexts)
            expected = _reference(batch, window)
            errors = {}
            for label, tiles, wrap in (
                ("stock", stock_tile, False),
                ("launch", clamped_tile_function(stock_tile, T4), True),
            ):
                recorder = Recorder(real)
                module._get_tile_size = tiles
                module.kernel_unified_attention = (
                    TuringLaunch(recorder, T4, stock_tile=stock_tile) if wrap else recorder
                )
                out = _run(module, batch, window, is_3d)
                errors[label] = float((out.double() - expected).norm() / expected.norm())
                seen = recorder.seen[-1]
                where = f"vLLM {version} head {head} {'3D' if is_3d else '2D'} {label}: {seen}"
                assert seen["IS_3D"] is is_3d and seen["HEAD_SIZE_PADDED"] == head, where
                want = (stock_want, None) if label == "stock" else (tile_want, warps_want)
                assert (seen["TILE_SIZE"], seen["num_warps"]) == want, where
            # fp16 output: stock's own error is the yardstick (about 2.5e-4 here).
            assert errors["launch"] < 1e-3 and errors["launch"] < 2 * errors["stock"] + 1e-5, (version, head, errors)
            print(version, head, "3D" if is_3d else "2D", errors, flush=True)
        module._get_tile_size, module.kernel_unified_attention = stock_tile, real
    module.kernel_unified_attention = TuringLaunch(real, T4, refusal="refused: fix it")
    _run(module, _batch(256, [5, 1], [600, 23]), 512, False)  # head 256 runs
    try:
        _run(module, _batch(512, [5, 1], [40, 23]), 0, False)
    except TuringError as error:
        assert "refused: fix it" in str(error)
    else:
        raise AssertionError("the guard let a head-512 launch through")


def test_the_delivered_launch_runs_the_real_kernel_correctly(vllm_kernel_files: dict[str, Path]) -> None:
    files = [(version, str(path)) for version, path in _distinct(vllm_kernel_files)]
    code = (
        "import sys, json; from tests.integration.turing.test_kernel_interpreted import check_delivered_launches; "
        "check_delivered_launches(json.loads(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(files)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        # The tree under test, not whichever gemmaserve the interpreter has installed.
        env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert done.stdout.count("\n") == len(files) * len(CASES)
