"""Incremental Server-Sent-Events parsing of OpenAI chat-completion streams (pure: no I/O).

Bytes arrive in arbitrary pieces; :class:`SseDecoder` turns them into ``data:``
payloads, and :func:`decode_chat_event` turns one payload into a :class:`ChatDelta`.
Kept small and allocation-light because it runs once per streamed token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

DONE = "[DONE]"


class MalformedStream(ValueError):
    """The server sent bytes that are not an OpenAI chat stream (bad JSON, an error event)."""


@dataclass(frozen=True, slots=True)
class ChatDelta:
    """What one stream event carried. ``content`` is "" for role-only and usage-only events.

    ``token`` is True for an event that stands for generated tokens: it carries a choice that
    is not vLLM's role-only opening (``{"role": "assistant", "content": ""}``). Its text may be
    empty: a token that decodes to nothing, a partial UTF-8 character, a special token.
    """

    content: str = ""
    token: bool = False
    finish_reason: str | None = None
    completion_tokens: int | None = None  # from the usage event (stream_options.include_usage)
    prompt_tokens: int | None = None
    done: bool = False  # the literal "data: [DONE]"


class SseDecoder:
    """Feed bytes, get complete ``data:`` payloads; multi-line ``data`` fields are joined by "\\n"."""

    __slots__ = ("_data_lines", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._data_lines: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        """Return every event completed by ``chunk`` (an event ends at a blank line)."""
        self._pending += chunk
        events: list[str] = []
        while True:
            cut = self._pending.find(b"\n")
            if cut < 0:
                return events
            line = self._pending[:cut]
            self._pending = self._pending[cut + 1 :]
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._data_lines:
                    events.append("\n".join(self._data_lines))
                    self._data_lines = []
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                if value.startswith(b" "):
                    value = value[1:]
                self._data_lines.append(value.decode("utf-8", errors="replace"))
            # Comments (":keep-alive"), "event:", "id:" and "retry:" carry nothing we measure.

    def close(self) -> list[str]:
        """Flush an event the server did not terminate with a blank line."""
        tail = self.feed(b"\n\n") if self._pending or self._data_lines else []
        return tail

    @property
    def pending_bytes(self) -> int:
        return len(self._pending)


def decode_chat_event(data: str) -> ChatDelta:
    """One ``data:`` payload of a chat-completions stream as a :class:`ChatDelta`.

    Raises:
        MalformedStream: the payload is not JSON, not an object, or an error event.
    """
    if data == DONE:
        return ChatDelta(done=True)
    try:
        document = json.loads(data)
    except ValueError:
        raise MalformedStream(f"malformed SSE data (not JSON): {data[:80]!r}") from None
    if not isinstance(document, dict):
        raise MalformedStream(f"malformed SSE data (not an object): {data[:80]!r}")
    if "error" in document:
        error = document["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise MalformedStream(f"error event in stream: {message}")
    content = ""
    finish_reason = None
    token = False
    choices = document.get("choices") or ()
    if choices:
        choice = choices[0]
        delta = choice.get("delta") or {}
        # "text" is the completions API; "reasoning_content" is a thinking model's hidden part:
        # both are generated tokens and must stop the TTFT clock.
        content = (
            delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or choice.get("text") or ""
        )
        finish_reason = choice.get("finish_reason")
        # vLLM (serving_chat.py) opens every stream with a role-only delta, then sends one choice
        # per engine step, text or not; the last of them carries finish_reason. Everything but
        # the role-only opening stands for tokens, even when its text is "".
        role_only = "role" in delta and not content and finish_reason is None and not delta.get("tool_calls")
        token = not role_only
    usage = document.get("usage")
    completion_tokens = prompt_tokens = None
    if isinstance(usage, dict):
        completion_tokens = usage.get("completion_tokens")
        prompt_tokens = usage.get("prompt_tokens")
    return ChatDelta(
        content=content,
        token=token,
        finish_reason=finish_reason,
        completion_tokens=completion_tokens,
        prompt_tokens=prompt_tokens,
    )
