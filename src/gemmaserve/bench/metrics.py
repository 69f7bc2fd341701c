"""Per-request latency metrics from timed stream chunks (pure: no I/O, no clock).

Timing follows the stream, never the text. A *token chunk* is a stream event that
carries a choice other than vLLM's role-only opening (``{"role": "assistant",
"content": ""}``); its text may be empty (a token that decodes to nothing, half a
UTF-8 character held back, a special token). Definitions, stated once
(docs/metrics.md repeats them), match vLLM's ``vllm bench serve``
(``vllm/benchmarks/lib/endpoint_request_func.py`` + ``calculate_metrics``, 0.26–0.34):

- ``ttft``  time to first token: request sent → arrival of the first token chunk.
  vLLM sends its role-only chunk in the same engine step as the first token, so
  skipping it changes nothing there; a server that sends it early does not stop the clock.
- ``itl``   inter-token latency: the gaps between consecutive token chunks, with or
  without text (a chunk carrying several tokens is one gap), so ``e2el − ttft == sum(itl)``.
- ``e2el``  end-to-end latency: request sent → arrival of the last token chunk, the one
  with ``finish_reason`` in vLLM's stream. The usage chunk (``choices: []``) and
  ``[DONE]`` carry no token and do not move the end time.
- ``tpot``  time per output token, first token excluded: (e2el − ttft) / (output_tokens − 1);
  undefined for one-token replies.
- ``output_tokens`` the server's ``usage.completion_tokens``; when the server sends no
  usage, the number of token chunks (one token per chunk, as vLLM streams by default).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gemmaserve.bench.transports import Chunk


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    ttft_s: float | None
    itl_s: tuple[float, ...]
    e2el_s: float | None
    tpot_s: float | None
    output_tokens: int
    prompt_tokens: int | None
    usage_reported: bool
    token_chunks: int  # chunks that stand for tokens, with or without text
    content_chunks: int  # of those, the ones whose text was not empty
    text: str
    finish_reason: str | None
    done: bool  # the stream ended properly: "[DONE]" seen or a finish_reason given


def compute_request_metrics(sent_s: float, chunks: Iterable[Chunk]) -> RequestMetrics:
    """Metrics of one finished stream; ``sent_s`` is the clock reading when the request left."""
    first_s: float | None = None
    last_s: float | None = None
    gaps: list[float] = []
    pieces: list[str] = []
    token_chunks = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    done = False
    for chunk in chunks:
        if chunk.token:
            token_chunks += 1
            if first_s is None:
                first_s = chunk.arrival_s
            else:
                assert last_s is not None
                gaps.append(chunk.arrival_s - last_s)
            last_s = chunk.arrival_s
        if chunk.content:
            pieces.append(chunk.content)
        if chunk.completion_tokens is not None:
            completion_tokens = chunk.completion_tokens
        if chunk.prompt_tokens is not None:
            prompt_tokens = chunk.prompt_tokens
        if chunk.finish_reason is not None:
            finish_reason = chunk.finish_reason
        if chunk.done:
            done = True
    output_tokens = completion_tokens if completion_tokens is not None else token_chunks
    ttft_s = None if first_s is None else first_s - sent_s
    e2el_s = None if last_s is None else last_s - sent_s
    tpot_s = None
    if ttft_s is not None and e2el_s is not None and output_tokens > 1:
        tpot_s = (e2el_s - ttft_s) / (output_tokens - 1)
    return RequestMetrics(
        ttft_s=ttft_s,
        itl_s=tuple(gaps),
        e2el_s=e2el_s,
        tpot_s=tpot_s,
        output_tokens=output_tokens,
        prompt_tokens=prompt_tokens,
        usage_reported=completion_tokens is not None,
        token_chunks=token_chunks,
        content_chunks=len(pieces),
        text="".join(pieces),
        finish_reason=finish_reason,
        done=done or finish_reason is not None,
    )
