"""Typed loading of the built-in catalog: GPUs, instance types, dated prices, Gemma 4 checkpoints.

The data lives in ``catalog/*.toml`` inside the package (data, not code); this
module only parses and validates it and resolves user-typed names. Pure apart
from reading those packaged files once.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gemmaserve.errors import CatalogError, UnknownName

LayerType = Literal["sliding", "full"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Gpu(_Frozen):
    key: str
    name: str
    architecture: str
    sm: int
    memory_mib: int
    visible_memory_gib: float
    bandwidth_gb_per_s: float
    smem_per_block_default: int
    smem_per_block_optin: int
    bf16: bool
    fp16_tensor_tflops: float
    link: str
    link_gb_per_s: float
    nvlink: bool
    source: str

    @property
    def compute_capability(self) -> tuple[int, int]:
        return divmod(self.sm, 10)

    @property
    def pre_ampere(self) -> bool:
        return self.sm < 80

    @property
    def serving_dtype(self) -> str:
        """fp16 on GPUs without a bf16 datapath (Turing): bf16 there silently upconverts."""
        return "bfloat16" if self.bf16 else "float16"


class Price(_Frozen):
    usd_per_hour: float
    region: str
    date: str
    source: str
    estimated: bool = False


class Instance(_Frozen):
    key: str
    platform: Literal["ec2", "sagemaker"]
    gpu: str
    gpu_count: int
    vcpus: int
    memory_gib: float
    local_nvme_gb: int
    price: Price | None = None

    @property
    def price_usd_per_hour(self) -> float | None:
        return self.price.usd_per_hour if self.price else None


class Geometry(_Frozen):
    """The text-decoder shape that vLLM's memory depends on (from the model's config.json)."""

    num_hidden_layers: int
    layer_pattern: str = Field(description="repeating S (sliding) / F (full attention) pattern")
    sliding_window: int
    num_attention_heads: int
    sliding_kv_heads: int
    full_kv_heads: int
    sliding_head_dim: int
    full_head_dim: int
    full_attention_k_eq_v: bool = False
    num_kv_shared_layers: int = 0
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    per_layer_input_size: int = 0
    max_position_embeddings: int
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    use_double_wide_mlp: bool = Field(
        default=False, description="the KV-shared layers' MLP is twice intermediate_size wide"
    )
    use_bidirectional_attention: Literal["vision"] | None = None
    vision_hidden_size: int = 0
    vision_intermediate_size: int = 0
    vision_patch_dim: int = Field(
        default=0,
        description="12B's encoder-free vision embedder: pixels per projected patch (model_patch_size² × 3)",
    )
    source: str

    @model_validator(mode="after")
    def _pattern_is_valid(self) -> Geometry:
        if not self.layer_pattern or set(self.layer_pattern) - {"S", "F"}:
            raise ValueError(f"layer_pattern must be made of S and F, got {self.layer_pattern!r}")
        if not 0 <= self.num_kv_shared_layers < self.num_hidden_layers:
            raise ValueError("num_kv_shared_layers must be below num_hidden_layers")
        return self

    def layer_types(self) -> list[LayerType]:
        pattern = self.layer_pattern
        return ["full" if pattern[i % len(pattern)] == "F" else "sliding" for i in range(self.num_hidden_layers)]


class Calibration(_Frozen):
    """A published engine log figure the capacity model is checked against."""

    gpu: str
    gpu_memory_utilization: float
    max_model_len: int
    weights_gib: float
    kv_cache_tokens: int
    max_concurrency: float
    vllm_version: str | None = None
    language_model_only: bool = False
    source: str


class Checkpoint(_Frozen):
    key: str
    repo_id: str
    format: Literal["safetensors", "gguf"]
    stored_dtype: str
    quantization: str | None = None
    servable_by_vllm: bool = True
    parts_bytes: dict[str, int]
    source: str
    calibration: list[Calibration] = []

    @property
    def total_bytes(self) -> int:
        return sum(self.parts_bytes.values())


class Model(_Frozen):
    key: str
    display_name: str
    geometry: Geometry
    encodings: dict[str, Checkpoint]


class Catalog(_Frozen):
    gpus: dict[str, Gpu]
    instances: dict[str, Instance]
    models: dict[str, Model]
    price_date: str

    @model_validator(mode="after")
    def _references_resolve(self) -> Catalog:
        for instance in self.instances.values():
            if instance.gpu not in self.gpus:
                raise ValueError(f"instance {instance.key} names unknown GPU {instance.gpu!r}")
        for model in self.models.values():
            for checkpoint in model.encodings.values():
                for point in checkpoint.calibration:
                    if point.gpu not in self.gpus:
                        raise ValueError(f"{model.key}/{checkpoint.key} calibration names GPU {point.gpu!r}")
        return self


class SpeedRun(_Frozen):
    """A measured decode run (``catalog/speed.toml``): the speed model's constants come from these."""

    model: str
    encoding: str
    gpu: str
    role: Literal["calibration", "check"]
    vllm_version: str
    platform: str
    prompt_tokens: int
    output_tokens: int
    decode_tokens_per_s: float = Field(gt=0)
    output_tokens_per_s: dict[int, float]
    # "lockstep": every stream of a level generated the same token at the same step, so a MoE batch read
    # one token's experts (a --load-format dummy model: its random weights make the next token follow
    # the current one, and every prompt ends in the same chat-template tokens). "independent": real traffic.
    routing: Literal["independent", "lockstep"] = "independent"
    source: str


class PlatformTerm(_Frozen):
    """The fixed cost of one request on a platform, outside the engine (a SageMaker invoke, loopback)."""

    call_s: float = Field(ge=0)
    source: str


class SpeedData(_Frozen):
    runs: list[SpeedRun]
    platforms: dict[str, PlatformTerm]


def _read(name: str) -> dict[str, object]:
    text = resources.files("gemmaserve").joinpath("catalog", name).read_text(encoding="utf-8")
    return tomllib.loads(text)


@cache
def load_catalog() -> Catalog:
    """The packaged catalog, parsed and cross-checked once per process."""
    try:
        prices = _read("prices.toml")
        meta = prices["meta"]
        assert isinstance(meta, dict)
        usd = prices["usd_per_hour"]
        assert isinstance(usd, dict)
        estimated = set(meta.get("estimated", []))

        def price_for(key: str) -> Price | None:
            if key not in usd:
                return None
            source = meta["sagemaker_source"] if key.startswith("ml.") else meta["ec2_source"]
            return Price(
                usd_per_hour=float(usd[key]),
                region=str(meta["region"]),
                date=str(meta["date"]),
                source=str(source),
                estimated=key in estimated,
            )

        gpus = {key: Gpu(key=key, **value) for key, value in _read("gpus.toml").items()}  # type: ignore[arg-type]
        instances = {
            key: Instance(key=key, price=price_for(key), **value)  # type: ignore[arg-type]
            for key, value in _read("instances.toml").items()
        }
        models: dict[str, Model] = {}
        for key, value in _read("models.toml").items():
            assert isinstance(value, dict)
            encodings = {enc: Checkpoint(key=enc, **spec) for enc, spec in value.pop("encodings").items()}
            models[key] = Model(key=key, encodings=encodings, **value)
        return Catalog(gpus=gpus, instances=instances, models=models, price_date=str(meta["date"]))
    except (KeyError, TypeError, ValueError, AssertionError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(
            f"The built-in catalog is inconsistent: {exc}",
            hint="Reinstall gemmaserve; if it persists, report it with `gemmaserve env`.",
        ) from exc


@cache
def load_speed_data() -> SpeedData:
    """The measured decode runs and platform terms of ``catalog/speed.toml``, parsed once per process."""
    try:
        data = _read("speed.toml")
        return SpeedData(runs=data["run"], platforms=data["platform"])  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(
            f"The built-in speed data is inconsistent: {exc}",
            hint="Reinstall gemmaserve; if it persists, report it with `gemmaserve env`.",
        ) from exc


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def resolve_gpu(name: str) -> Gpu:
    catalog = load_catalog()
    key = _normalise(name).removeprefix("nvidia-").removeprefix("tesla-")
    if key in catalog.gpus:
        return catalog.gpus[key]
    raise UnknownName("GPU", name, sorted(catalog.gpus))


def resolve_instance(name: str) -> Instance:
    catalog = load_catalog()
    key = name.strip().lower()
    if key in catalog.instances:
        return catalog.instances[key]
    raise UnknownName("instance type", name, sorted(catalog.instances))


def resolve_model(name: str) -> Model:
    catalog = load_catalog()
    key = _normalise(name).removeprefix("google/")
    if not key.startswith("gemma-4-") and f"gemma-4-{key}" in catalog.models:
        key = f"gemma-4-{key}"
    if key.endswith("-it"):
        key = key.removesuffix("-it")
    if key in catalog.models:
        return catalog.models[key]
    raise UnknownName("model", name, sorted(catalog.models))


def resolve_encoding(model: Model, name: str) -> Checkpoint:
    # Keys keep their own spelling (qat-q4_0-unquantized): compare normalised forms on both sides.
    by_spelling = {_normalise(key): checkpoint for key, checkpoint in model.encodings.items()}
    key = _normalise(name)
    if key in by_spelling:
        return by_spelling[key]
    raise UnknownName("encoding", name, sorted(model.encodings), of=model.key)
