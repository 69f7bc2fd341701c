"""What never leaves the process: secret values, wherever in the output they would land (pure, plus one registry).

Every front end passes what it writes through :func:`redact` (the CLI wraps stdout and stderr, the MCP
server its replies, progress and stderr), so a secret is hidden whether it arrives in an error, a
container log line quoted in an error, echoed bad input, JSON or progress. Three things are hidden:

- **values this process knows are secret**: given under a secret-looking name (``--env HF_TOKEN=…``,
  see :func:`remember`) or found under one in its own environment (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``);
- **a value written after a secret setting's name**: ``HF_TOKEN=…``, ``"api_key": "…"``, ``HF_TOKEN …``
  (the name ends in TOKEN, SECRET, PASSWORD or CREDENTIAL, or in KEY after something: ``key`` alone
  and ``num_key_value_heads`` are data; numbers and booleans are never secrets);
- **known token shapes**, wherever they stand: Hugging Face tokens (``hf_`` and 30+ letters or digits) and
  AWS access key ids (``AKIA``/``ASIA`` and 16 capitals or digits).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
SECRET_NAME = re.compile(r"TOKEN(?!S|IZ)|KEY|SECRET|PASSW(?:OR)?D|CREDENTIAL", re.IGNORECASE)
# Shorter environment values are not secrets worth hiding everywhere (and would hide common words).
MIN_ENVIRONMENT_SECRET = 8
MIN_GIVEN_SECRET = 4

_TOKEN_SHAPES = re.compile(r"\bhf_[A-Za-z0-9]{30,}|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")
# A setting's name that holds a secret: it ends in TOKEN, SECRET, PASSWORD/PASSWD or CREDENTIAL(S), or in KEY
# after something (API_KEY, hf-api-key, AWS_SECRET_ACCESS_KEY; a bare "key" or num_key_value_heads is data).
_SETTING = r"(?:[A-Za-z0-9][_.-]?KEY|TOKEN|SECRET|PASSW(?:OR)?D|CREDENTIALS?)"
_SETTING_NAME = re.compile(rf"[A-Za-z0-9_.-]*{_SETTING}", re.IGNORECASE)
_VALUE = r"\"[^\"]*\"|'[^']*'|[^\s,;'\"{}()\[\]]+"
# NAME=value, NAME: value, "NAME": "value" (any case: config keys, JSON, headers).
_ASSIGNED = re.compile(
    rf"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z0-9_.-]*{_SETTING})(?P<sep>[\"']?[ \t]*[=:][ \t]*)(?P<value>{_VALUE})",
    re.IGNORECASE,
)
# NAME value, only for an environment variable's name (capitals and underscores): `HF_TOKEN hf_…` given
# where KEY=VALUE was meant. Prose ("the API key is …") is left alone.
_SPACED = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<name>[A-Z0-9_]*(?:[A-Z0-9]_?KEY|TOKEN|SECRET|PASSW(?:OR)?D|CREDENTIALS?))"
    rf"(?P<sep>[ \t]+)(?P<value>{_VALUE})"
)
_NOT_A_SECRET = re.compile(r"-?[0-9][0-9.eE+-]*|true|false|null|None|\*\*\*|.*…")

_lock = threading.Lock()
_known: set[str] = set()


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def remember(values: Iterable[str]) -> None:
    """Hide these values from every output of this process from now on (a request's secret settings)."""
    with _lock:
        _known.update(value for value in values if len(value) >= MIN_GIVEN_SECRET)


def remember_secret_settings(env: Mapping[str, str]) -> None:
    """:func:`remember` the values of ``env`` whose names look secret."""
    remember(value for key, value in env.items() if is_secret_name(key))


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    environ = os.environ if environ is None else environ
    return [value for key, value in environ.items() if is_secret_name(key) and len(value) >= MIN_ENVIRONMENT_SECRET]


def redact(text: str) -> str:
    """``text`` with every secret it holds replaced by ``***``."""
    if not text:
        return text
    with _lock:
        known = sorted(_known, key=len, reverse=True)  # a value inside another goes with it
    for value in (*known, *sorted(environment_secrets(), key=len, reverse=True)):
        if value in text:
            text = text.replace(value, MASK)
    text = _TOKEN_SHAPES.sub(MASK, text)
    text = _ASSIGNED.sub(_masked_value, text)
    return _SPACED.sub(_masked_value, text)


def is_secret_setting(name: str) -> bool:
    """Whether a setting (an argument, a JSON key) of this name holds a secret: ``HF_TOKEN``, ``api_key``."""
    return bool(_SETTING_NAME.fullmatch(name))


def _masked_value(match: re.Match[str]) -> str:
    value = match["value"]
    if _NOT_A_SECRET.fullmatch(value.strip("\"'")) or not value.strip("\"'"):
        return match[0]
    quote = value[0] if value[0] in "\"'" and value[-1] == value[0] and len(value) > 1 else ""
    return f"{match['name']}{match['sep']}{quote}{MASK}{quote}"


def redact_data(data: Any) -> Any:
    """A JSON-like value with :func:`redact` applied to every string in it (keys included)."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, Mapping):
        return {
            redact(key) if isinstance(key, str) else key: (
                MASK if isinstance(key, str) and is_secret_setting(key) and isinstance(value, str) and value
                else redact_data(value)
            )
            for key, value in data.items()
        }  # fmt: skip
    if isinstance(data, list | tuple):
        return [redact_data(item) for item in data]
    return data
