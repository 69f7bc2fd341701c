"""Which container variables hold secrets, and the masked copies that every output shows instead (pure).

A name is secret when it contains TOKEN (not the plural TOKENS of counts such as
``SM_VLLM_MAX_NUM_BATCHED_TOKENS``, nor TOKENIZER), KEY, SECRET, PASSWORD/PASSWD or CREDENTIAL, in
any case: ``HF_TOKEN``, ``SM_VLLM_API_KEY``, ``AWS_SECRET_ACCESS_KEY`` (the rule of
:mod:`gemmaserve.redact`, which also hides these values from every other output). Values are still
sent to CreateModel as given; only what is printed, returned as JSON or given to an MCP client is masked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gemmaserve.redact import MASK, is_secret_name

__all__ = [
    "MASK",
    "is_secret_name",
    "mask_call_params",
    "mask_environment",
    "mask_serve_args",
    "scrub",
    "secret_values",
]


def mask_environment(env: Mapping[str, str]) -> dict[str, str]:
    return {key: MASK if is_secret_name(key) and value else value for key, value in env.items()}


def mask_serve_args(args: Sequence[str]) -> list[str]:
    """``--api-key abc`` → ``--api-key ***`` (and ``--hf-token=abc`` → ``--hf-token=***``)."""
    masked: list[str] = []
    hide_next = False
    for token in args:
        if token.startswith("--"):
            name, sep, _ = token.partition("=")
            secret = is_secret_name(name.replace("-", "_"))
            masked.append(f"{name}={MASK}" if sep and secret else token)
            hide_next = secret and not sep
            continue
        masked.append(MASK if hide_next else token)
    return masked


def mask_call_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A CreateModel request with its containers' secret variables masked (other requests unchanged)."""
    masked = dict(params)
    for key in ("PrimaryContainer",):
        if isinstance(masked.get(key), Mapping):
            container = dict(masked[key])
            if isinstance(container.get("Environment"), Mapping):
                container["Environment"] = mask_environment(container["Environment"])
            masked[key] = container
    if isinstance(masked.get("Containers"), list):
        masked["Containers"] = [
            mask_call_params({"PrimaryContainer": c})["PrimaryContainer"] for c in masked["Containers"]
        ]
    return masked


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values to scrub from any text shown (longest first, so a value inside another goes too)."""
    return sorted(
        {value for key, value in env.items() if is_secret_name(key) and len(value) >= 4}, key=len, reverse=True
    )


def scrub(text: str, values: Sequence[str]) -> str:
    """``text`` with each secret value replaced by ``***`` (AWS echoes request values in validation errors)."""
    for value in values:
        text = text.replace(value, MASK)
    return text
