"""Views of the serve results: ``serve start``, ``status`` (one server or ``--all``), ``stop`` and ``logs``."""

from __future__ import annotations

from gemmaserve.engine_log import RankFacts
from gemmaserve.serve.launcher import StartResult
from gemmaserve.serve.supervisor import ServeLogs, ServerList, ServerState, ServerStatus, StopResult
from gemmaserve.views import summary, view
from gemmaserve.views.page import Block, Line, Page, page


@view(StartResult)
def start_page(result: StartResult) -> Page:
    record = result.record
    state = "serving" if result.ready else "started (not serving yet)"
    row = result.plan
    return page(
        Line(
            f"{state}: pid {record.pid} on port {record.port}, log {record.log_path}",
            "good" if result.ready else None if result.ok else "bad",
        ),
        None
        if result.ok
        else Line(f"  not ready after {result.waited_s:.0f} s: vLLM still {result.stage.value}", "bad"),
        None
        if row is None
        else f"  plan (vLLM {row.vllm_version} rules): {row.kv_cache_tokens:,} KV tokens, "
        f"{row.max_concurrency:g}x at {row.max_model_len:,} tokens; "
        f"what vLLM logged: gemmaserve serve status --port {record.port}",
        None if result.clamp is None else f"  Turing clamp: {result.clamp.evidence}",
        *_rank_lines(result.ranks),
    )


@summary(StartResult)
def start_summary(result: StartResult) -> str:
    record = result.record
    state = "serving" if result.ready else f"not ready yet ({result.stage.value})"
    return (
        f"vLLM {record.served_model_name} on port {record.port} (pid {record.pid}): "
        f"{state} after {result.waited_s:.0f} s. Log: {record.log_path}"
    )


def _rank_lines(ranks: list[RankFacts]) -> list[str]:
    """One line per worker of a split model: what its own log lines said ("not stated" where vLLM is silent)."""

    def said(value: float | None) -> str:
        return "not stated" if value is None else f"{value:g} GiB"

    return [
        f"  rank {rank.rank} (pid {rank.pid}): Turing plugin {rank.clamp_plugin or 'no line'}, "
        f"weights {said(rank.weights_gib)}, KV cache {said(rank.kv_cache_gib)}"
        for rank in ranks
    ]


def _status_blocks(status: ServerStatus) -> list[Block]:
    e = status.engine
    facts = {
        "vLLM": e.vllm_version,
        "dtype": e.dtype,
        "quantization": e.quantization,
        "weights GiB": e.weights_gib,
        "load s": e.load_seconds,
        "KV tokens": e.kv_cache_tokens,
        "tensor parallel": e.tensor_parallel_size if (e.tensor_parallel_size or 1) > 1 else None,
        "max concurrency": f"{e.max_concurrency}x at {e.max_concurrency_context_tokens} tokens"
        if e.max_concurrency
        else None,
    }
    said = ", ".join(f"{name} {value}" for name, value in facts.items() if value is not None)
    return [
        Line(
            f"port {status.port}: {status.state.value} (pid {status.pid}, {status.model}, up {status.uptime_s:.0f} s)",
            "bad" if status.state is ServerState.DEAD else "bold",
        ),
        *([Line(f"  {said}")] if said else []),
        *(Line(line) for line in _rank_lines(e.ranks)),
        *(Line(f"  {error}", "bad") for error in e.errors),
        *([Line(f"  {status.oom_hint}", "warn")] if status.oom_hint else []),
        *(Line(f"  | {line}", "dim") for line in status.last_lines),
    ]


@view(ServerStatus)
def status_page(status: ServerStatus) -> Page:
    return page(*_status_blocks(status))


@summary(ServerStatus)
def status_summary(status: ServerStatus) -> str:
    text = f"vLLM on port {status.port} (pid {status.pid}, {status.served_model_name}): {status.state.value}"
    if status.oom_hint:
        text += f". {status.oom_hint}"
    return text


@view(ServerList)
def server_list_page(listed: ServerList) -> Page:
    if not listed.servers:
        return page("no servers started by gemmaserve on this host")
    return page(*(block for status in listed.servers for block in _status_blocks(status)))


@view(StopResult)
def stop_page(result: StopResult) -> Page:
    # The note says what survived, if anything did.
    return page(Line(f"port {result.port} pid {result.pid}: {result.note}", "warn" if result.processes_left else None))


@summary(StopResult)
def stop_summary(result: StopResult) -> str:
    return f"Port {result.port}, pid {result.pid}: {result.note}"


@view(ServeLogs)
def logs_page(result: ServeLogs) -> Page:
    """The log's lines as they are (an empty log prints nothing: ``serve logs > file`` gets the log alone)."""
    return page(*result.lines)


@summary(ServeLogs)
def logs_summary(result: ServeLogs) -> str:
    return "\n".join(result.lines) or "(empty log)"
