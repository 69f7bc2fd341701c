"""Proof from the compiler: build vLLM's real unified-attention kernel for a target GPU, no GPU needed.

Loads the kernel file (and its helpers file beside it) with small stand-ins for vLLM's own
imports and compiles (kernel_compile.py) each launch Gemma 4 makes: per layer geometry of every
Gemma 4 model in the catalog (head size, sliding window, query heads per KV head), the 2D and the
3D grid, stock and as the rule launches it. ``search_launches`` compiles, for every launch whose
stock tile overflows shared memory, each smaller tile at 4, 8 and 16 warps and picks with
``rule.pick_launch``; a launch that fits is vLLM's and only its stock figures are compiled.
Needs the ``kernel`` extra (triton) only: torch is used when installed, else a stand-in answers the
kernel file's one module-level question (kernel_source.py). ``compile_smem`` is the action.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from gemmaserve.errors import MissingExtra, UsageError
from gemmaserve.progress import CancelToken, ProgressCallback
from gemmaserve.result_model import ActionResult
from gemmaserve.turing.arch import SMEM_OPTIN_BYTES, arch_number
from gemmaserve.turing.filepatch import resolve_target
from gemmaserve.turing.kernel_compile import (
    Compiler,
    CompileRun,
    LaunchFigures,
    LaunchSpec,
    kernel_compiler,
)
from gemmaserve.turing.rule import (
    MIN_TILE_SIZE,
    STOCK_NUM_WARPS,
    LaunchParams,
    LaunchShape,
    MeasuredLaunch,
    SmemDevice,
    block_m_for,
    choose_launch,
    kernel_smem_bytes,
    pick_launch,
)
from gemmaserve.turing.shape import recognise

if TYPE_CHECKING:
    from gemmaserve.turing.requests import SmemRequest

NUM_WARPS = STOCK_NUM_WARPS
NUM_STAGES = 3  # Triton's default, which unified_attention launches with
#: Warps the search compiles for each candidate tile of a launch that overflows.
SEARCH_WARPS = (4, 8, 16)
#: 16-bit elements: what Gemma 4 is served in on a T4 (no bf16 before Ampere: fp16).
ELEMENT_SIZE = 2
#: For a head size no Gemma 4 model has: the layer geometry compiled (a global layer, 8 query heads per KV head).
OTHER_HEAD_QUERY_HEADS = 8


class LayerGeometry(BaseModel):
    """One attention-layer geometry: what the kernel is compiled for, and the Gemma 4 models that have it."""

    model_config = ConfigDict(frozen=True)

    head_size: int
    sliding_window: int  # 0: a global layer
    num_query_heads: int
    num_queries_per_kv: int
    models: tuple[str, ...]  # () for a head size no Gemma 4 model has

    @property
    def block_m(self) -> int:
        return block_m_for(self.num_queries_per_kv)

    def shape(self) -> dict[str, int]:
        """The four numbers a compiled launch and every row about it are keyed by."""
        return {
            "head_size": self.head_size,
            "sliding_window": self.sliding_window,
            "num_query_heads": self.num_query_heads,
            "num_queries_per_kv": self.num_queries_per_kv,
        }


def layer_geometries(head_sizes: tuple[int, ...]) -> list[LayerGeometry]:
    """Every distinct attention-layer geometry of the catalog's Gemma 4 models with one of ``head_sizes``.

    A sliding layer passes its window (vLLM's ``SLIDING_WINDOW``: 1 + the left window, which is the
    config's ``sliding_window``), a global layer 0; query heads per KV head are the model's heads over
    that layer kind's KV heads. A head size no model has gets one global geometry.
    """
    from gemmaserve.catalog import load_catalog

    found: dict[tuple[int, int, int, int], list[str]] = {}
    for model in load_catalog().models.values():
        shape = model.geometry
        heads = shape.num_attention_heads
        for key in (
            (shape.sliding_head_dim, shape.sliding_window, heads, heads // shape.sliding_kv_heads),
            (shape.full_head_dim, 0, heads, heads // shape.full_kv_heads),
        ):
            found.setdefault(key, []).append(model.key)
    geometries = []
    for head in head_sizes:
        keys = sorted(key for key in found if key[0] == head)
        if not keys:
            per_kv = OTHER_HEAD_QUERY_HEADS
            geometries.append(
                LayerGeometry(
                    head_size=head, sliding_window=0, num_query_heads=per_kv, num_queries_per_kv=per_kv, models=()
                )
            )
        for key in keys:
            geometries.append(
                LayerGeometry(
                    head_size=key[0],
                    sliding_window=key[1],
                    num_query_heads=key[2],
                    num_queries_per_kv=key[3],
                    models=tuple(found[key]),
                )
            )
    return geometries


class SmemRow(BaseModel):
    arch: str
    head_size: int
    sliding_window: int
    num_query_heads: int
    num_queries_per_kv: int
    models: list[str]
    phase: str  # "prefill" | "decode"
    layout: str  # "2D" | "3D"
    variant: str  # "stock" | "clamped"
    tile_size: int
    block_m: int
    num_warps: int
    smem_bytes: int
    smem_limit_bytes: int
    fits: bool
    registers: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None


class SearchRow(BaseModel):
    """One compiled candidate launch."""

    head_size: int
    sliding_window: int
    num_query_heads: int
    num_queries_per_kv: int
    layout: str  # "2D" (prefill and large decode batches) | "3D" (split-KV decode)
    tile_size: int
    block_m: int
    num_warps: int
    num_stages: int
    smem_bytes: int
    fits: bool
    registers: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None
    stock: bool
    chosen: bool


class SearchPick(BaseModel):
    """Per layer geometry and grid: vLLM's launch, the compiler's pick and what the rule launches.

    ``picked`` is vLLM's own launch wherever it fits (never changed), else the candidate that fits
    and spills least; ``picked_spill_bytes`` is what that launch still spills per thread (stores +
    loads; 0 where none), the cost that stays.
    """

    head_size: int
    sliding_window: int
    num_query_heads: int
    num_queries_per_kv: int
    models: list[str]
    layout: str
    stock: LaunchParams
    picked: LaunchParams | None
    picked_spill_bytes: int | None
    stock_spill_bytes: int | None
    stock_fits: bool
    rule: LaunchParams
    rule_agrees: bool
    stages_checked: list[int]  # stages compiled for a changed pick: same smem and spills at each (no pipelining)
    stages_independent: bool


class LaunchSearch(ActionResult):
    vllm_file: str
    arch: str
    triton_version: str
    smem_limit_bytes: int
    rows: list[SearchRow]
    picks: list[SearchPick]
    rule_agrees: bool


class SmemReport(ActionResult):
    vllm_file: str
    arch: str
    triton_version: str
    rows: list[SmemRow]
    stock_fits: bool
    clamped_fits: bool
    clamp_changes_launch: bool


class SmemResult(ActionResult):
    """The output schema of the MCP tool: a :class:`SmemReport`, or with ``search`` a :class:`LaunchSearch`.

    Both front ends return the very same document (the CLI's ``--json``); this model only describes the
    two shapes as one object, as MCP needs: the fields either has, then each one's own as optional.
    """

    vllm_file: str
    arch: str
    triton_version: str
    rows: list[SmemRow] | list[SearchRow]
    stock_fits: bool | None = None
    clamped_fits: bool | None = None
    clamp_changes_launch: bool | None = None
    smem_limit_bytes: int | None = None
    picks: list[SearchPick] | None = None
    rule_agrees: bool | None = None


@dataclass(frozen=True, slots=True)
class CompileDeps:
    """What a compile run reports to and is stopped by, and the compiler and clock it uses (tests hand in fakes)."""

    progress: ProgressCallback | None = None
    cancel: CancelToken | None = None
    compiler: Callable[[types.ModuleType, Any, int], Compiler] = kernel_compiler
    clock: Callable[[], float] = time.monotonic


@dataclass(frozen=True, slots=True)
class KernelTarget:
    """Which kernel file is compiled, for which GPU architecture, at which Gemma 4 head sizes."""

    vllm_file: str
    arch: str = "sm_75"
    head_sizes: tuple[int, ...] = (256, 512)


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """What the launch search tries: the warps of each smaller tile, the stages a pick is compiled again at,
    and the layer geometries (None: every Gemma 4 layer with one of the target's head sizes)."""

    warps: tuple[int, ...] = SEARCH_WARPS
    stage_checks: tuple[int, ...] = (1,)
    geometries: tuple[LayerGeometry, ...] | None = None


def compile_smem(
    request: SmemRequest,
    *,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    compiler: Callable[[types.ModuleType, Any, int], Compiler] = kernel_compiler,
    clock: Callable[[], float] = time.monotonic,
) -> SmemReport | LaunchSearch:
    """``turing smem``: the compile report (or with ``search`` the launch search) a request asks for.

    Each compile is reported to ``progress`` with the launches left and an ETA (a cold run compiles
    for a minute or more on a small machine); ``cancel`` stops it between two compiles. Raises
    MissingExtra, UsageError (no kernel file: the hint names --vllm-file).
    """
    target = KernelTarget(request.vllm_file or _installed_kernel_file(request.python), request.arch, request.head_size)
    deps = CompileDeps(progress=progress, cancel=cancel, compiler=compiler, clock=clock)
    if request.search:
        return search_launches(target, deps=deps)
    return compile_report(target, request.num_warps, deps)


def _installed_kernel_file(python: str | None) -> str:
    """The kernel file of the vLLM installed for ``python``; without one, how to compile with no vLLM at all."""
    try:
        return resolve_target(file=None, python=python).path
    except UsageError as error:
        raise UsageError(
            f"No vLLM kernel file to compile: {error.message}",
            hint="Pass --vllm-file PATH: a copy of vllm/v1/attention/ops/triton_unified_attention.py with "
            "triton_attention_helpers.py beside it, from any vLLM release (unzip both from its wheel: "
            "pip download vllm==VERSION --no-deps); no vLLM install is needed. Or pass --python PATH of "
            "an interpreter that has vLLM.",
            **error.fields,
        ) from None


#: (phase, grid, reads the prefill tile): the 2D grid reads the prefill tile even for a large decode
#: batch, the 3D (split-KV decode) grid the decode tile (vLLM 0.34.0 triton_unified_attention.py:1382-1387).
PHASES = (("prefill", "2D", True), ("decode", "2D", True), ("decode", "3D", False))


def _spec(geometry: LayerGeometry, launch: LaunchParams, is_3d: bool) -> LaunchSpec:
    return LaunchSpec(
        **geometry.shape(),
        tile_size=launch.tile_size,
        is_3d=is_3d,
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
    )


def _rule_launch(
    capability: int, limit: int, geometry: LayerGeometry, stock: LaunchParams, is_3d: bool
) -> LaunchParams:
    device = SmemDevice(capability=(capability // 10, capability % 10), smem_limit_bytes=limit)
    shape = LaunchShape(
        head_size_padded=geometry.head_size,
        element_size=ELEMENT_SIZE,
        num_queries_per_kv=geometry.num_queries_per_kv,
        sliding_window=geometry.sliding_window,
        is_3d=is_3d,
    )
    return choose_launch(device, shape, stock).launch


def compile_report(target: KernelTarget, num_warps: int = NUM_WARPS, deps: CompileDeps = CompileDeps()) -> SmemReport:
    """Compile every Gemma 4 launch stock (``num_warps``) and as the rule launches it, for the target's arch.

    Raises MissingExtra, UsageError.
    """
    triton = _require_kernel_extra()
    arch = target.arch
    capability, limit, module, path = _prepare(target.vllm_file, arch)
    plan: list[tuple[LayerGeometry, str, str, LaunchParams, LaunchParams]] = []
    for geometry in layer_geometries(target.head_sizes):
        for phase, layout, prefill_tile in PHASES:
            stock_tile = module._get_tile_size(geometry.head_size, geometry.sliding_window, ELEMENT_SIZE, prefill_tile)
            stock = LaunchParams(
                tile_size=stock_tile, block_m=geometry.block_m, num_stages=NUM_STAGES, num_warps=num_warps
            )
            rule = _rule_launch(capability, limit, geometry, stock, layout == "3D")
            plan.append((geometry, phase, layout, stock, rule))
    distinct = {_spec(g, launch, layout == "3D") for g, _, layout, stock, rule in plan for launch in (stock, rule)}
    run = _compile_run(deps, module, triton, capability, len(distinct))
    rows: list[SmemRow] = []
    for geometry, phase, layout, stock, rule in plan:
        for variant, launch in (("stock", stock), ("clamped", rule)):
            figures = run(_spec(geometry, launch, layout == "3D"))
            rows.append(
                SmemRow(
                    arch=arch,
                    **geometry.shape(),
                    models=list(geometry.models),
                    phase=phase,
                    layout=layout,
                    variant=variant,
                    tile_size=launch.tile_size,
                    block_m=launch.block_m,
                    num_warps=launch.num_warps,
                    smem_bytes=figures.smem_bytes,
                    smem_limit_bytes=limit,
                    fits=figures.smem_bytes <= limit,
                    registers=figures.registers,
                    spill_store_bytes=figures.spill_store_bytes,
                    spill_load_bytes=figures.spill_load_bytes,
                )
            )
    return SmemReport(
        vllm_file=str(path),
        arch=arch,
        triton_version=triton.__version__,
        rows=rows,
        stock_fits=all(r.fits for r in rows if r.variant == "stock"),
        clamped_fits=all(r.fits for r in rows if r.variant == "clamped"),
        clamp_changes_launch=any(
            (a.tile_size, a.num_warps) != (b.tile_size, b.num_warps) for a, b in zip(rows[::2], rows[1::2], strict=True)
        ),
    )


def candidate_launches(stock: LaunchParams, *, overflows: bool, warps: tuple[int, ...]) -> list[LaunchParams]:
    """What the search compiles for one launch: vLLM's own, and where it overflows every smaller tile at ``warps``.

    A tile is never raised (the rule never does) nor taken below 16 (tile 8 does not compile), and
    BLOCK_M and stages stay stock. A launch that fits is not searched: it stays vLLM's.
    """
    candidates = [stock]
    if overflows:
        tile = stock.tile_size // 2
        while tile >= MIN_TILE_SIZE:
            candidates += [
                LaunchParams(tile_size=tile, block_m=stock.block_m, num_stages=stock.num_stages, num_warps=count)
                for count in warps
            ]
            tile //= 2
    return candidates


def search_launches(
    target: KernelTarget, space: SearchSpace = SearchSpace(), deps: CompileDeps = CompileDeps()
) -> LaunchSearch:
    """Per Gemma 4 layer geometry and grid: vLLM's launch where it fits, else the candidate that spills least.

    A launch whose stock tile overflows (by the rule's model, which the stock compile checks) gets
    every smaller tile at each of the space's ``warps`` compiled (``candidate_launches``), and its pick
    compiled again at ``stage_checks`` stages to show the figures do not depend on them; a launch that
    fits is compiled stock only. Raises MissingExtra, UsageError.
    """
    triton = _require_kernel_extra()
    capability, limit, module, path = _prepare(target.vllm_file, target.arch)
    warps, stage_checks, geometries = space.warps, space.stage_checks, space.geometries
    plan: list[tuple[LayerGeometry, str, LaunchParams, list[LaunchParams]]] = []
    for geometry in layer_geometries(target.head_sizes) if geometries is None else geometries:
        for layout, prefill_tile in (("2D", True), ("3D", False)):
            stock_tile = module._get_tile_size(geometry.head_size, geometry.sliding_window, ELEMENT_SIZE, prefill_tile)
            stock = LaunchParams(
                tile_size=stock_tile, block_m=geometry.block_m, num_stages=NUM_STAGES, num_warps=STOCK_NUM_WARPS
            )
            overflows = (
                capability < 80
                and kernel_smem_bytes(geometry.head_size, stock_tile, stock.block_m, ELEMENT_SIZE) > limit
            )
            plan.append((geometry, layout, stock, candidate_launches(stock, overflows=overflows, warps=warps)))
    planned = sum(len(candidates) + (len(stage_checks) if len(candidates) > 1 else 0) for *_, candidates in plan)
    run = _compile_run(deps, module, triton, capability, planned)
    rows: list[SearchRow] = []
    picks: list[SearchPick] = []
    for geometry, layout, stock, candidates in plan:
        is_3d = layout == "3D"
        compiled = [(candidate, run(_spec(geometry, candidate, is_3d))) for candidate in candidates]
        measured = [
            MeasuredLaunch(launch=launch, smem_bytes=figures.smem_bytes, spill_bytes=figures.spill_bytes)
            for launch, figures in compiled
        ]
        picked = pick_launch(measured, smem_limit_bytes=limit, stock=stock)
        searched = _Searched(geometry, layout, stock, picked, limit)
        rows += [_search_row(searched, launch, figures) for launch, figures in compiled]
        rule = _rule_launch(capability, limit, geometry, stock, is_3d)
        checked, independent = [], True
        if len(candidates) > 1:
            if picked is None or picked.launch == stock:
                run.skip(len(stage_checks))
            else:
                for stages in stage_checks:
                    again = run(_spec(geometry, picked.launch.model_copy(update={"num_stages": stages}), is_3d))
                    checked.append(stages)
                    independent &= (again.smem_bytes, again.spill_bytes) == (picked.smem_bytes, picked.spill_bytes)
        own = measured[0]
        picks.append(
            SearchPick(
                **geometry.shape(),
                models=list(geometry.models),
                layout=layout,
                stock=stock,
                picked=None if picked is None else picked.launch,
                picked_spill_bytes=None if picked is None else picked.spill_bytes,
                stock_spill_bytes=own.spill_bytes,
                stock_fits=own.smem_bytes <= limit,
                rule=rule,
                rule_agrees=picked is not None and picked.launch == rule,
                stages_checked=checked,
                stages_independent=independent,
            )
        )
    return LaunchSearch(
        vllm_file=str(path),
        arch=target.arch,
        triton_version=triton.__version__,
        smem_limit_bytes=limit,
        rows=rows,
        picks=picks,
        rule_agrees=all(p.rule_agrees for p in picks),
    )


def _compile_run(deps: CompileDeps, module: types.ModuleType, triton: Any, capability: int, planned: int) -> CompileRun:
    compiler = deps.compiler(module, triton, capability)
    return CompileRun(compiler, planned, progress=deps.progress, cancel=deps.cancel, clock=deps.clock)


@dataclass(frozen=True, slots=True)
class _Searched:
    """One launch searched: its layer and grid, vLLM's own launch, the search's pick and the smem limit."""

    geometry: LayerGeometry
    layout: str
    stock: LaunchParams
    picked: MeasuredLaunch | None
    limit: int


def _search_row(searched: _Searched, launch: LaunchParams, figures: LaunchFigures) -> SearchRow:
    stock, picked, limit = searched.stock, searched.picked, searched.limit
    return SearchRow(
        **searched.geometry.shape(),
        layout=searched.layout,
        tile_size=launch.tile_size,
        block_m=launch.block_m,
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
        smem_bytes=figures.smem_bytes,
        fits=figures.smem_bytes <= limit,
        registers=figures.registers,
        spill_store_bytes=figures.spill_store_bytes,
        spill_load_bytes=figures.spill_load_bytes,
        stock=launch == stock,
        chosen=picked is not None and picked.launch == launch,
    )


def _prepare(vllm_file: str, arch: str) -> tuple[int, int, types.ModuleType, Path]:
    capability = _arch_number(arch)
    limit = SMEM_OPTIN_BYTES.get(capability)
    if limit is None:
        raise UsageError(
            f"No shared-memory limit known for {arch}.",
            hint=f"Use one of {', '.join(f'sm_{a}' for a in SMEM_OPTIN_BYTES)}.",
        )
    path = Path(vllm_file)
    recognise(path.read_text(), where=str(path))
    return capability, limit, load_kernel_module(path), path


def _require_kernel_extra() -> Any:
    # Only triton: torch is not needed to compile (kernel_source.py stands in for it when it is missing).
    try:
        import triton
    except ImportError as error:
        raise MissingExtra(error.name or "triton", "kernel", "Compiling vLLM's attention kernel") from None
    return triton


def _arch_number(arch: str) -> int:
    number = arch_number(arch)
    if number is None:
        raise UsageError(f"{arch!r} is not an architecture.", hint="Use the form sm_75.")
    return number


def load_kernel_module(path: Path) -> types.ModuleType:
    """The kernel file as a module (its helpers file must sit beside it, as in an installed vLLM)."""
    from gemmaserve.turing.kernel_source import TorchStandInTooSmall
    from gemmaserve.turing.kernel_source import load_kernel_module as load

    try:
        return load(path)
    except FileNotFoundError as error:
        raise UsageError(
            f"{error}; the kernel imports it.",
            hint="Point --vllm-file at the file inside an "
            "installed vllm/v1/attention/ops/ (or a copy with its helpers beside it).",
        ) from None
    except TorchStandInTooSmall as error:
        # A newer kernel file asks torch for more than the stand-in knows, and torch is not installed.
        raise UsageError(
            f"{path} needs more of torch than gemmaserve's stand-in offers: {error}.",
            hint="pip install torch (the CPU build is enough: nothing runs on a GPU).",
            file=str(path),
        ) from None
