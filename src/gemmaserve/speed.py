"""Decode speed and output throughput before any deploy, from what a decode step must read (pure: no I/O).

A decode step of ``b`` sequences at context ``ℓ`` takes

    t_step = t_fixed + b × t_seq + max(bytes(b, ℓ) / (bandwidth × η), flops(b) / (peak × η_c))

- **bytes**: the weights the step reads — the transformer body (for the MoE only the experts the
  batch routes to, ``E × (1 − (1 − k/E)^b)`` of them per layer if routing were uniform), and the
  output head (the untied ``lm_head``, else the tied token embedding); never the per-layer
  embedding tables (a lookup of ``b`` rows) or the vision/audio towers — plus each sequence's KV
  read at its context, every layer included (KV-shared layers read the cache they share).
- **flops**: ``2 × b`` × the parameters used per token (body with active experts, head).
- **t_fixed** (per step) and **t_seq** (per sequence per step: sampling, bookkeeping) and the
  bandwidth efficiency ``η`` are measured per GPU (``catalog/speed.toml`` runs with
  ``role = "calibration"``), solved here by least squares, never by matching a check run.

A request of ``P`` prompt and ``N`` output tokens from one of ``c`` closed-loop streams takes
``t_call + t_prefill + N × t_step(c, P + N/2)``, where ``t_call`` is the platform's own cost of a
request (``speed.toml`` ``[platform]``) and ``t_prefill`` the prompt's extra compute in the step
that carries it; output tok/s = ``c × N`` over that. ``c`` is capped by ``max_num_seqs`` and by the
requests the KV pool holds at that length. A GPU without runs of its own borrows the measured
GPUs' constants with a wider interval, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from gemmaserve.catalog import Checkpoint, Geometry, Gpu, Model, SpeedData, SpeedRun, resolve_encoding, resolve_model
from gemmaserve.tensor_parallel import body_parameters_per_rank, kv_heads_per_rank, vocab_rows_per_rank

DTYPE_BYTES = 2  # fp16/bf16 activations and KV cache
CONCURRENCY_LEVELS = (1, 4, 16)
# Not measured: the share of the tensor-core peak a decode or prefill GEMM reaches. It binds only
# at large batches or long prompts, never in the calibration runs, so it cannot be read from them.
COMPUTE_EFFICIENCY = 0.5
# Not measured: how far a GPU without runs of its own may fall below the measured GPUs' bandwidth
# efficiency (other kernels are picked per architecture, e.g. Marlin on sm_75/sm_89, Machete on sm_90).
UNMEASURED_GPU_EFFICIENCY_FLOOR = 0.75
# Not measured: what one collective (all-reduce, all-gather) costs beyond moving its bytes, on a model split
# over several GPUs. No multi-GPU run exists here; this range is an assumption, and every split row says so.
COLLECTIVE_LATENCY_S = {"fast": 5e-6, "central": 20e-6, "slow": 50e-6}
# Not measured: the share of the data-sheet link bandwidth a collective reaches (the slow bound takes half).
SLOW_LINK_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Split:
    """A step split over ``size`` GPUs of one host: each reads its shard of the weights and KV in parallel,
    then the ranks exchange activations twice a layer (after attention and after the MLP: row-parallel
    outputs are all-reduced), once for the embeddings and once for the logits (all-gathered)."""

    size: int
    link_gb_per_s: float
    collective_latency_s: float

    def collective_seconds(self, geometry: Geometry, batch: int) -> float:
        if self.size == 1:
            return 0.0
        share = (self.size - 1) / self.size
        link = self.link_gb_per_s * 1e9
        all_reduce_bytes = batch * geometry.hidden_size * DTYPE_BYTES
        all_reduces = 2 * geometry.num_hidden_layers + 1
        ring = 2 * share * all_reduce_bytes / link  # reduce-scatter then all-gather
        logits = share * batch * geometry.vocab_size * DTYPE_BYTES / link
        return all_reduces * (self.collective_latency_s + ring) + self.collective_latency_s + logits


ONE_GPU = Split(1, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class StepCosts:
    """What one GPU's decode costs beyond the bytes it reads, as measured."""

    bandwidth_efficiency: float
    fixed_s: float
    per_sequence_s: float
    measured_on: tuple[str, ...]  # the GPUs whose runs these constants come from


@dataclass(frozen=True, slots=True)
class Workload:
    prompt_tokens: int
    output_tokens: int
    call_s: float  # the platform's cost of one request outside the engine
    # Streams that generate the same token at the same step route a MoE batch to one token's experts.
    streams_route_alike: bool = False


@dataclass(frozen=True, slots=True)
class SpeedQuestion:
    """What one row's speeds are asked for: a checkpoint on a GPU, a workload, the stream counts asked about
    and the most streams that run at once (``max_num_seqs`` or the KV pool)."""

    geometry: Geometry
    checkpoint: Checkpoint
    gpu: Gpu
    workload: Workload
    concurrency: tuple[int, ...]
    stream_limit: int
    tensor_parallel_size: int = 1

    def split(self, bound: str = "central") -> Split:
        if self.tensor_parallel_size == 1:
            return ONE_GPU
        link = self.gpu.link_gb_per_s * (SLOW_LINK_SHARE if bound == "slow" else 1.0)
        return Split(self.tensor_parallel_size, link, COLLECTIVE_LATENCY_S[bound])

    @property
    def context(self) -> int:
        return self.workload.prompt_tokens + self.workload.output_tokens // 2

    def effective(self) -> dict[int, int]:
        return {c: max(1, min(c, self.stream_limit)) for c in self.concurrency}

    def decode_rate(self, costs: StepCosts, bound: str = "central") -> float:
        return 1.0 / step_seconds(self.served(bound), costs, batch=1, context=self.context)

    def rate(self, costs: StepCosts, streams: int, bound: str = "central") -> float:
        return output_tokens_per_s(self.served(bound), costs, self.workload, streams)

    def served(self, bound: str = "central") -> Served:
        return Served(self.geometry, self.checkpoint, self.gpu, self.split(bound))


@dataclass(frozen=True, slots=True)
class MeasuredSpeed:
    """A row's measured speeds: one stream's decode rate and output tok/s by streams, and where they came from."""

    decode_tokens_per_s: float
    output_tokens_per_s: dict[int, float]
    source: str


class SpeedPrediction(BaseModel):
    """Predicted speeds of one row; low/high bound the interval the model's own checks support."""

    source: str  # "predicted" or "measured: …"
    decode_tokens_per_s: float
    decode_low: float
    decode_high: float
    output_tokens_per_s: dict[int, float]  # at each concurrency asked for
    output_low: dict[int, float]
    output_high: dict[int, float]
    effective_concurrency: dict[int, int]  # after max_num_seqs and the KV pool
    bytes_per_step_gb: float
    constants_from: list[str]
    unmeasured: list[str]


def _attention_params(geometry: Geometry, layer: str) -> int:
    hidden = geometry.hidden_size
    if layer == "sliding":
        head, kv = geometry.sliding_head_dim, geometry.sliding_kv_heads
        k_and_v = 2
    else:
        head, kv = geometry.full_head_dim, geometry.full_kv_heads
        k_and_v = 1 if geometry.full_attention_k_eq_v else 2
    q_and_o = 2 * hidden * geometry.num_attention_heads * head
    return q_and_o + k_and_v * hidden * kv * head


def expert_parameters(geometry: Geometry) -> int:
    return geometry.num_hidden_layers * geometry.num_experts * 3 * geometry.hidden_size * geometry.moe_intermediate_size


def body_parameters(geometry: Geometry) -> int:
    """Parameters of the transformer body from the geometry (attention, dense MLP, experts, PLE projections)."""
    total = 0
    shared_from = geometry.num_hidden_layers - geometry.num_kv_shared_layers
    for index, layer in enumerate(geometry.layer_types()):
        wide = 2 if geometry.use_double_wide_mlp and index >= shared_from else 1
        total += _attention_params(geometry, layer) + 3 * geometry.hidden_size * geometry.intermediate_size * wide
        total += 2 * geometry.hidden_size * geometry.per_layer_input_size
    return (
        total + expert_parameters(geometry) + geometry.num_hidden_layers * geometry.hidden_size * geometry.num_experts
    )


def experts_touched_share(geometry: Geometry, batch: int) -> float:
    """Share of each MoE layer's experts a decode batch routes to, if tokens chose experts uniformly (an
    assumption: real routing is skewed, so fewer distinct experts are read and this errs slow)."""
    if not geometry.num_experts:
        return 1.0
    return 1.0 - (1.0 - geometry.experts_per_token / geometry.num_experts) ** batch


def head_bytes(checkpoint: Checkpoint) -> int:
    """The output head a step reads: the untied ``lm_head`` when stored, else the tied token embedding."""
    return checkpoint.parts_bytes.get("lm_head") or checkpoint.parts_bytes.get("vocab_embedding", 0)


def weight_bytes_per_step(
    geometry: Geometry,
    checkpoint: Checkpoint,
    batch: int,
    *,
    distinct_tokens: int | None = None,
    tensor_parallel_size: int = 1,
) -> float:
    """What a step of ``batch`` sequences reads of the weights (on each GPU of a split: its shard); a MoE's
    experts follow the ``distinct_tokens`` the batch routes (all of them unless told: streams in lockstep
    route one token's experts)."""
    body = float(checkpoint.parts_bytes.get("transformer_body", 0))
    if tensor_parallel_size > 1:
        return _rank_weight_bytes_per_step(geometry, checkpoint, batch, distinct_tokens, tensor_parallel_size)
    if geometry.num_experts:
        experts = body * expert_parameters(geometry) / body_parameters(geometry)
        routed = batch if distinct_tokens is None else distinct_tokens
        body = body - experts + experts * experts_touched_share(geometry, routed)
    return body + head_bytes(checkpoint)


def _rank_weight_bytes_per_step(
    geometry: Geometry, checkpoint: Checkpoint, batch: int, distinct_tokens: int | None, n: int
) -> float:
    """One rank's shard of what a step reads: its share of the body's parameters (the experts' with the
    share the batch routes to) and its rows of the vocabulary-parallel head."""
    body = float(checkpoint.parts_bytes.get("transformer_body", 0))
    whole = body_parameters(geometry)
    experts = geometry.num_hidden_layers * geometry.num_experts * 3 * geometry.hidden_size
    experts *= geometry.moe_intermediate_size // n
    dense = body_parameters_per_rank(geometry, n) - experts
    routed = batch if distinct_tokens is None else distinct_tokens
    read = body * (dense + experts * experts_touched_share(geometry, routed)) / whole
    return read + head_bytes(checkpoint) * vocab_rows_per_rank(geometry.vocab_size, n) / geometry.vocab_size


def kv_bytes_per_sequence(geometry: Geometry, context: int, tensor_parallel_size: int = 1) -> int:
    """KV bytes one sequence's step reads at ``context`` tokens, over every layer (on each GPU of a split:
    its KV heads, replicated where there are fewer than GPUs)."""
    total = 0
    for layer in geometry.layer_types():
        if layer == "sliding":
            tokens, kv, head = (
                min(context, geometry.sliding_window),
                geometry.sliding_kv_heads,
                geometry.sliding_head_dim,
            )
        else:
            tokens, kv, head = context, geometry.full_kv_heads, geometry.full_head_dim
        total += tokens * 2 * kv_heads_per_rank(kv, tensor_parallel_size) * head * DTYPE_BYTES
    return total


def active_parameters(geometry: Geometry, checkpoint: Checkpoint) -> float:
    """Parameters one token's forward pass multiplies with (the MoE's top-k experts only; the head)."""
    body = float(body_parameters(geometry))
    if geometry.num_experts:
        body -= expert_parameters(geometry) * (1 - geometry.experts_per_token / geometry.num_experts)
    return body + geometry.vocab_size * geometry.hidden_size


@dataclass(frozen=True, slots=True)
class Served:
    """What a step runs on: ``checkpoint`` of the model of ``geometry`` on ``gpu``, or split over several."""

    geometry: Geometry
    checkpoint: Checkpoint
    gpu: Gpu
    split: Split = ONE_GPU


def roofline_seconds(
    served: Served, efficiency: float, *, batch: int, context: int, distinct_tokens: int | None = None
) -> float:
    """The step's memory or compute time, whichever binds (on one GPU of a split: its shard, in parallel)."""
    geometry, checkpoint, gpu, n = served.geometry, served.checkpoint, served.gpu, served.split.size
    weights = weight_bytes_per_step(
        geometry, checkpoint, batch, distinct_tokens=distinct_tokens, tensor_parallel_size=n
    )
    read = weights + batch * kv_bytes_per_sequence(geometry, context, n)
    memory_s = read / (gpu.bandwidth_gb_per_s * 1e9 * efficiency)
    compute_s = (
        2 * batch * active_parameters(geometry, checkpoint) / n / (gpu.fp16_tensor_tflops * 1e12 * COMPUTE_EFFICIENCY)
    )
    return max(memory_s, compute_s)


def step_seconds(
    served: Served, costs: StepCosts, *, batch: int, context: int, distinct_tokens: int | None = None
) -> float:
    roofline = roofline_seconds(
        served, costs.bandwidth_efficiency, batch=batch, context=context, distinct_tokens=distinct_tokens
    )
    split = served.split
    return costs.fixed_s + batch * costs.per_sequence_s + roofline + split.collective_seconds(served.geometry, batch)


def prefill_extra_seconds(
    geometry: Geometry, checkpoint: Checkpoint, gpu: Gpu, prompt_tokens: int, tensor_parallel_size: int = 1
) -> float:
    """The prompt's compute in the step that carries it (its weights are read by that step anyway)."""
    flops = 2 * prompt_tokens * active_parameters(geometry, checkpoint) / tensor_parallel_size
    return flops / (gpu.fp16_tensor_tflops * 1e12 * COMPUTE_EFFICIENCY)


def request_seconds(served: Served, costs: StepCosts, workload: Workload, streams: int) -> float:
    context = workload.prompt_tokens + workload.output_tokens // 2
    distinct = 1 if workload.streams_route_alike else streams
    step = step_seconds(served, costs, batch=streams, context=context, distinct_tokens=distinct)
    prefill = prefill_extra_seconds(
        served.geometry, served.checkpoint, served.gpu, workload.prompt_tokens, served.split.size
    )
    return workload.call_s + prefill + workload.output_tokens * step


def output_tokens_per_s(served: Served, costs: StepCosts, workload: Workload, streams: int) -> float:
    seconds = request_seconds(served, costs, workload, streams)
    return streams * workload.output_tokens / seconds


# --- the constants, from measured runs -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Resolved:
    run: SpeedRun
    geometry: Geometry
    checkpoint: Checkpoint


def _resolve(run: SpeedRun) -> _Resolved:
    model: Model = resolve_model(run.model)
    return _Resolved(run, model.geometry, resolve_encoding(model, run.encoding))


def _least_squares(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Intercept and slope of y = a + b·x through ``points`` (at least two distinct x)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if n < 2 or spread == 0:
        raise ValueError("calibration needs runs of at least two sizes on one GPU")
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return mean_y - slope * mean_x, slope


def workload_of(run: _Resolved, gpu: Gpu) -> Workload:
    """A measured run's own workload: its prompt and reply, its cost per request, how its streams routed."""
    return Workload(
        run.run.prompt_tokens, run.run.output_tokens, call_seconds_of(run, gpu),
        streams_route_alike=run.run.routing == "lockstep",
    )  # fmt: skip


def call_seconds_of(run: _Resolved, gpu: Gpu) -> float:
    """A run's own cost per request outside the engine: its one-stream request time less the prompt's
    step and ``N`` decode steps at the measured decode rate."""
    rate = run.run.output_tokens_per_s.get(1)
    if rate is None:
        raise ValueError(f"{run.run.model} {run.run.encoding} on {run.run.gpu}: no one-stream level")
    engine_s = prefill_extra_seconds(run.geometry, run.checkpoint, gpu, run.run.prompt_tokens)
    engine_s += run.run.output_tokens / run.run.decode_tokens_per_s
    return max(0.0, run.run.output_tokens / rate - engine_s)


def calibrate(runs: Iterable[SpeedRun], gpu: Gpu) -> StepCosts:
    """``gpu``'s constants from its calibration runs.

    One sequence's step, ``1 / decode rate = (t_fixed + t_seq) + bytes / (bandwidth × η)``, is a line in
    the bytes each model reads: its slope gives η, its intercept ``t_fixed + t_seq``. With ``c`` streams
    the measured step (request time less the run's own cost per request, over ``N``) exceeds the
    one-stream step by ``(c − 1) × t_seq`` plus what the roofline adds (KV, experts): ``t_seq`` is the mean
    of what is left per extra stream."""
    resolved = [_resolve(run) for run in runs if run.gpu == gpu.key and run.role == "calibration"]
    points = []
    for item in resolved:
        context = item.run.prompt_tokens + item.run.output_tokens // 2
        read = weight_bytes_per_step(item.geometry, item.checkpoint, 1) + kv_bytes_per_sequence(item.geometry, context)
        points.append((read, 1.0 / item.run.decode_tokens_per_s))
    intercept_s, seconds_per_byte = _least_squares(points)
    efficiency = 1.0 / (seconds_per_byte * gpu.bandwidth_gb_per_s * 1e9)
    per_stream = []
    for item in resolved:
        run = item.run
        context = run.prompt_tokens + run.output_tokens // 2
        call_s = call_seconds_of(item, gpu)
        prefill_s = prefill_extra_seconds(item.geometry, item.checkpoint, gpu, run.prompt_tokens)
        served = Served(item.geometry, item.checkpoint, gpu)
        one = roofline_seconds(served, efficiency, batch=1, context=context)
        for streams, rate in run.output_tokens_per_s.items():
            if streams == 1:
                continue
            step = (streams * run.output_tokens / rate - call_s - prefill_s) / run.output_tokens
            distinct = 1 if run.routing == "lockstep" else streams
            roofline = roofline_seconds(served, efficiency, batch=streams, context=context, distinct_tokens=distinct)
            per_stream.append((step - 1.0 / run.decode_tokens_per_s - (roofline - one)) / (streams - 1))
    per_sequence_s = max(0.0, sum(per_stream) / len(per_stream)) if per_stream else 0.0
    return StepCosts(efficiency, intercept_s - per_sequence_s, per_sequence_s, (gpu.key,))


def calibrated_gpus(data: SpeedData) -> list[str]:
    return sorted({run.gpu for run in data.runs if run.role == "calibration"})


def costs_for(gpu: Gpu, data: SpeedData, gpus: dict[str, Gpu]) -> tuple[StepCosts, StepCosts, StepCosts]:
    """(central, slow, fast) constants for ``gpu``: its own if it has calibration runs, else the measured
    GPUs' range, with the bandwidth efficiency allowed down to ``UNMEASURED_GPU_EFFICIENCY_FLOOR`` of it."""
    measured = calibrated_gpus(data)
    if gpu.key in measured:
        own = calibrate(data.runs, gpu)
        return own, own, own
    if not measured:
        raise ValueError("no calibration runs in the speed data")
    borrowed = [calibrate(data.runs, gpus[key]) for key in measured]
    efficiency = [c.bandwidth_efficiency for c in borrowed]
    fixed = [c.fixed_s for c in borrowed]
    per_seq = [c.per_sequence_s for c in borrowed]
    source = tuple(measured)
    central = StepCosts(sum(efficiency) / len(efficiency), sum(fixed) / len(fixed), sum(per_seq) / len(per_seq), source)
    slow = StepCosts(min(efficiency) * UNMEASURED_GPU_EFFICIENCY_FLOOR, max(fixed), max(per_seq), source)
    fast = StepCosts(max(efficiency), min(fixed), min(per_seq), source)
    return central, slow, fast


def check_error(data: SpeedData, gpus: dict[str, Gpu], geometry: Geometry) -> float:
    """The largest relative miss on the held-out check runs of ``geometry``'s kind (dense, or MoE: whose
    steps run other kernels), decode and every stream level, which widens the interval of every row of
    that kind: what the model has shown it gets wrong on runs it was not solved from. With no check run
    of that kind, every check run counts. Each check run's platform cost per request is its own (from its
    one-stream level): it is the client's network, not the engine, and varied 0.53-1.23 s between runs
    from one workstation."""
    checks = [run for run in data.runs if run.role == "check"]
    same_kind = [run for run in checks if bool(_resolve(run).geometry.num_experts) == bool(geometry.num_experts)]
    worst = 0.0
    for run in same_kind or checks:
        item = _resolve(run)
        gpu = gpus[run.gpu]
        costs, _, _ = costs_for(gpu, data, gpus)
        context = run.prompt_tokens + run.output_tokens // 2
        served = Served(item.geometry, item.checkpoint, gpu)
        decode = 1.0 / step_seconds(served, costs, batch=1, context=context)
        worst = max(worst, abs(decode / run.decode_tokens_per_s - 1))
        workload = workload_of(item, gpu)
        for streams, rate in run.output_tokens_per_s.items():
            predicted = output_tokens_per_s(served, costs, workload, streams)
            worst = max(worst, abs(predicted / rate - 1))
    return worst


def mean_call_seconds(data: SpeedData, gpus: dict[str, Gpu], platform: str) -> float:
    """A platform's cost per request: ``[platform]`` when listed, else the mean over its calibration runs."""
    if platform in data.platforms:
        return data.platforms[platform].call_s
    seconds = []
    for run in data.runs:
        if run.platform == platform and run.role == "calibration":
            gpu = gpus[run.gpu]
            seconds.append(call_seconds_of(_resolve(run), gpu))
    if not seconds:
        raise ValueError(f"no cost per request known for platform {platform!r}")
    return sum(seconds) / len(seconds)


def predict(question: SpeedQuestion, data: SpeedData, gpus: dict[str, Gpu]) -> SpeedPrediction:
    """Predicted decode rate and output tok/s at each stream count asked about."""
    central, slow, fast = costs_for(question.gpu, data, gpus)
    error = check_error(data, gpus, question.geometry)
    effective = question.effective()
    unmeasured = [
        f"compute efficiency {COMPUTE_EFFICIENCY:g} of the tensor-core peak (binds only at large batches or long prompts)"
    ]
    if question.gpu.key not in central.measured_on:
        unmeasured.append(
            f"{question.gpu.key}: no runs of its own; constants from {', '.join(central.measured_on)}, bandwidth "
            f"efficiency allowed down to {UNMEASURED_GPU_EFFICIENCY_FLOOR:g}× theirs"
        )
    if question.tensor_parallel_size > 1:
        unmeasured.append(
            f"split over {question.tensor_parallel_size} GPUs: no multi-GPU run; each GPU reads its shard in "
            f"parallel at one GPU's measured efficiency, plus {2 * question.geometry.num_hidden_layers + 2} "
            f"collectives a step over {question.gpu.link} at {question.gpu.link_gb_per_s:g} GB/s (slow bound: "
            f"{SLOW_LINK_SHARE:g}×) and an assumed {COLLECTIVE_LATENCY_S['fast'] * 1e6:g}-"
            f"{COLLECTIVE_LATENCY_S['slow'] * 1e6:g} µs each"
        )
    if question.geometry.num_experts:
        unmeasured.append(
            "experts read per step assume uniform routing, a slow bound: a random-weight router on the H200 read "
            "26 experts a layer at 16 streams where uniform routing reads 82 (a real router's skew is not measured)"
        )
    return SpeedPrediction(
        source="predicted",
        decode_tokens_per_s=round(question.decode_rate(central), 1),
        decode_low=round(question.decode_rate(slow, "slow") * (1 - error), 1),
        decode_high=round(question.decode_rate(fast, "fast") * (1 + error), 1),
        output_tokens_per_s={c: round(question.rate(central, n), 1) for c, n in effective.items()},
        output_low={c: round(question.rate(slow, n, "slow") * (1 - error), 1) for c, n in effective.items()},
        output_high={c: round(question.rate(fast, n, "fast") * (1 + error), 1) for c, n in effective.items()},
        effective_concurrency=effective,
        bytes_per_step_gb=round(
            weight_bytes_per_step(
                question.geometry, question.checkpoint, 1, tensor_parallel_size=question.tensor_parallel_size
            )
            / 1e9,
            3,
        ),
        constants_from=list(central.measured_on),
        unmeasured=unmeasured,
    )


def kv_stream_limit(max_concurrency_at_length: float, max_num_seqs: int) -> int:
    """Streams that run at once: vLLM admits at most ``max_num_seqs``, and only as many as the pool holds."""
    return max(0, min(max_num_seqs, math.floor(max_concurrency_at_length)))


def predict_from_measured(
    question: SpeedQuestion, data: SpeedData, gpus: dict[str, Gpu], measured: MeasuredSpeed
) -> SpeedPrediction:
    """The same row from a measurement: the measured decode rate sets the one-stream step (the model adds
    only what more streams cost), and a measured stream level is used as it is."""
    central, _, _ = costs_for(question.gpu, data, gpus)
    shift = 1.0 / measured.decode_tokens_per_s - 1.0 / question.decode_rate(central)
    costs = StepCosts(
        central.bandwidth_efficiency, central.fixed_s + shift, central.per_sequence_s, central.measured_on
    )
    error = check_error(data, gpus, question.geometry)
    effective = question.effective()
    rates: dict[int, float] = {}
    lows: dict[int, float] = {}
    highs: dict[int, float] = {}
    for asked, streams in effective.items():
        if streams in measured.output_tokens_per_s:
            rates[asked] = lows[asked] = highs[asked] = round(measured.output_tokens_per_s[streams], 1)
            continue
        rate = question.rate(costs, streams)
        rates[asked], lows[asked], highs[asked] = (
            round(rate, 1),
            round(rate * (1 - error), 1),
            round(rate * (1 + error), 1),
        )
    decode = round(measured.decode_tokens_per_s, 1)
    return SpeedPrediction(
        source=measured.source,
        decode_tokens_per_s=decode,
        decode_low=decode,
        decode_high=decode,
        output_tokens_per_s=rates,
        output_low=lows,
        output_high=highs,
        effective_concurrency=effective,
        bytes_per_step_gb=round(weight_bytes_per_step(question.geometry, question.checkpoint, 1) / 1e9, 3),
        constants_from=list(central.measured_on),
        unmeasured=[]
        if all(n in measured.output_tokens_per_s for n in effective.values())
        else ["stream levels not measured are the model's, from the measured decode rate"],
    )
