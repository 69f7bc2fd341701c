"""``serve start`` with a model split over several GPUs, against the stand-in ``vllm serve``.

The stand-in's workers write vLLM 0.32's per-rank lines with their own pids; the start reads
them back and stops a server whose workers do not all show the Turing clamp.
"""

from __future__ import annotations

import pytest

from gemmaserve.errors import ServeError, ServerAlreadyRunning
from gemmaserve.serve import records
from gemmaserve.serve.launcher import (
    CPU_BIND_ENV,
    ClampVerdict,
    StartResult,
    cpu_thread_binding,
    tensor_parallel_of,
)
from gemmaserve.serve.supervisor import server_status, stop_server
from tests.support.serve.fixtures import Spawned, free_port, report, seams_for, start_dummy

TP2_ARGS = ["google/gemma-4-26B-A4B-it", "--dtype", "float16", "--max-model-len", "8192", "--tensor-parallel-size", "2"]
CLAMPED = ClampVerdict(verified=True, evidence="clamp present")


def start_tp(port: int, spawned: Spawned, *, gpu_sm: int = 75, gpu_index: int = 0, **env: str) -> StartResult:
    seams = seams_for(report(), spawned, clamp=CLAMPED)
    seams.env.update(env)
    return start_dummy(TP2_ARGS, seams, port, gpu_sm=gpu_sm, gpu_index=gpu_index)


def test_the_size_comes_from_the_plan_flags() -> None:
    assert tensor_parallel_of(TP2_ARGS) == 2
    assert tensor_parallel_of(["m", "--tensor-parallel-size=4"]) == 4
    assert tensor_parallel_of(["m", "--dtype", "float16"]) == 1


def test_turing_tp2_starts_when_every_rank_shows_the_clamp_and_status_reads_the_ranks(
    port: int, spawned: Spawned
) -> None:
    result = start_tp(port, spawned, gpu_index=1)
    assert result.ready
    argv = result.record.argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert [(rank.rank, rank.clamp_plugin) for rank in result.ranks] == [(0, "wrapped"), (1, "wrapped")]
    assert len({rank.pid for rank in result.ranks}) == 2
    status = server_status(port, last_lines=200)
    # GPUs 1 and 2 were given to the server, and each worker saw both.
    assert sum("CUDA_VISIBLE_DEVICES=1,2" in line for line in status.last_lines) == 2
    assert [(r.rank, r.weights_gib, r.kv_cache_gib) for r in status.engine.ranks] == [
        (0, 4.01, 9.5),
        (1, None, None),
    ]
    # Both GPUs are held: a second server on GPU 2 is refused.
    with pytest.raises(ServerAlreadyRunning, match="gpu 2"):
        start_tp(free_port(), spawned, gpu_index=2)
    stop_server(port, timeout_s=10)


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"DUMMY_PLUGIN_SILENT_RANK": "1"}, "rank 1 (pid "),
        ({"DUMMY_PLUGIN": "guarded"}, "the Turing clamp plugin says guarded"),
    ],
)
def test_a_rank_without_the_clamp_stops_the_server(port: int, spawned: Spawned, env: dict[str, str], said: str) -> None:
    with pytest.raises(ServeError, match="did not show the Turing clamp") as raised:
        start_tp(port, spawned, **env)
    assert said in str(raised.value)
    assert spawned.processes[0].wait(timeout=10) is not None  # stopped, not left running
    assert records.load_record(port) is None


def test_on_ampere_the_ranks_are_read_but_no_clamp_is_asked_for(port: int, spawned: Spawned) -> None:
    result = start_tp(port, spawned, gpu_sm=89, DUMMY_PLUGIN="ampere-or-newer")
    assert result.ready and result.clamp is None
    assert [rank.clamp_plugin for rank in result.ranks] == ["ampere-or-newer", "ampere-or-newer"]
    stop_server(port, timeout_s=10)


def test_cpu_threads_are_shared_out_one_list_per_rank() -> None:
    assert cpu_thread_binding([0, 1], 2) == "0|1"
    assert cpu_thread_binding([0, 1, 2, 3, 4], 2) == "0,1,2|3,4"
    with pytest.raises(ServeError, match="needs at least 4 CPUs"):
        cpu_thread_binding([0, 1], 4)
    assert CPU_BIND_ENV == "VLLM_CPU_OMP_THREADS_BIND"
