"""A stand-in for ``vllm serve``: writes vLLM-shaped log lines, serves /health after a delay, or crashes.

Behaviour comes from the environment: DUMMY_MODE = ok | crash | ignore-term | never-ready,
DUMMY_READY_AFTER_S (default 0.5); DUMMY_STRAGGLER_S starts a child in the server's process group
that ignores SIGTERM and outlives the server by that many seconds (as multiprocessing's resource
tracker does under vLLM). Arguments are read like ``vllm serve MODEL … --port N``.

With ``--tensor-parallel-size N`` it starts N worker processes that write what vLLM 0.32's workers write,
with their prefixes (``(VllmWorker-R pid=P)`` then ``(Worker_TPR pid=P)``): the Turing plugin's line
(outcome DUMMY_PLUGIN, default ``wrapped``; none from rank DUMMY_PLUGIN_SILENT_RANK), and rank 0's
memory lines (``info_once`` of scope "local" in vLLM: rank 0 only). Each worker writes the
CUDA_VISIBLE_DEVICES it was given.
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time

STRAGGLER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.02)
time.sleep(float(sys.argv[1]))
"""


WORKER = """
import os, sys
rank, size, outcome, silent = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
pid = os.getpid()
def say(prefix, text):
    print(f"({prefix} pid={pid}) INFO 12-02 10:00:01 [dummy.py:1] {text}", flush=True)
if str(rank) != silent:
    say(f"VllmWorker-{rank}", f"gemmaserve turing plugin (pid {pid}): {outcome}: as told")
say(f"VllmWorker-{rank}", "CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""))
say("Worker", f"world_size={size} rank={rank} local_rank={rank} distributed_init_method=tcp://127.0.0.1:1 backend=nccl")
say(f"Worker_TP{rank}", "Starting to load model m...")
if rank == 0:
    say("Worker_TP0", "Model loading took 4.01 GiB memory and 66.190265 seconds")
    say("Worker_TP0", "Available KV cache memory: 9.50 GiB")
"""


def start_workers(args: list[str]) -> None:
    if "--tensor-parallel-size" not in args:
        return
    size = int(args[args.index("--tensor-parallel-size") + 1])
    outcome = os.environ.get("DUMMY_PLUGIN", "wrapped")
    silent = os.environ.get("DUMMY_PLUGIN_SILENT_RANK", "")
    for rank in range(size):
        subprocess.run([sys.executable, "-c", WORKER, str(rank), str(size), outcome, silent], check=True)


def log(text: str) -> None:
    print(
        f"(EngineCore_DP0 pid={os.getpid()}) INFO 12-02 10:00:00 [dummy.py:1] {text}",
        flush=True,
    )


def main() -> None:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    mode = os.environ.get("DUMMY_MODE", "ok")
    ready_after_s = float(os.environ.get("DUMMY_READY_AFTER_S", "0.5"))
    if "DUMMY_STRAGGLER_S" in os.environ:
        subprocess.Popen([sys.executable, "-c", STRAGGLER, os.environ["DUMMY_STRAGGLER_S"]])
    print(
        f"(APIServer pid={os.getpid()}) INFO 12-02 10:00:00 [api_server.py:1851] vLLM API server version 0.29.0",
        flush=True,
    )
    log(
        f"Initializing a V1 LLM engine (v0.29.0) with config: model='{args[1]}', dtype=torch.float16, max_seq_len=8192, quantization=compressed-tensors"
    )
    log(f"Starting to load model {args[1]}...")
    start_workers(args)
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, lambda *_: log("SIGTERM received and ignored"))
    time.sleep(ready_after_s / 2)
    if mode == "crash":
        print(
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536.",
            flush=True,
        )
        sys.exit(1)
    log("Model loading took 8.01 GiB memory and 66.190265 seconds")
    log("GPU KV cache size: 867,999 tokens")
    log("Maximum concurrency for 8,192 tokens per request: 105.96x")
    ready = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/health" and ready.is_set()
            self.send_response(200 if ok else 503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(ready_after_s / 2)
    if mode != "never-ready":
        ready.set()
        print(
            f"(APIServer pid={os.getpid()}) INFO:     Application startup complete.",
            flush=True,
        )
    while True:
        time.sleep(0.1)


if __name__ == "__main__":
    main()
