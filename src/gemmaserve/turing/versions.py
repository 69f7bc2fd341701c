"""The vLLM releases whose unified-attention source gemmaserve knows: the one place the range lives.

Tested against the real file of every release in ``TESTED_VLLM_VERSIONS`` (fetched from the
package index by the test suite). A release outside ``[MIN, NEXT_UNKNOWN)`` is refused, not guessed at.
"""

from __future__ import annotations

import re

from gemmaserve.errors import UnsupportedVllmVersion

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")

TESTED_VLLM_VERSIONS: tuple[str, ...] = (
    "0.26.0",
    "0.27.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
    "0.34.0",
)
#: 0.26.0–0.29.0 (and 0.27.1) ship the same unified-attention file byte for byte (sha256 992a2bc8…), and their
#: caller (``backends/triton_attn.py``) imports ``unified_attention`` by name, as 0.30–0.34 do.
MIN_SUPPORTED_VLLM = (0, 26, 0)
#: First release not yet studied; patch releases of the last tested minor are accepted when
#: their source still has the known shape (the shape check runs as well).
NEXT_UNKNOWN_VLLM = (0, 35, 0)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``"0.34.0"`` → (0, 34, 0); pre-release, dev and local suffixes are ignored; None if unparsable."""
    match = _VERSION.match(text)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def is_supported(version: str) -> bool:
    parsed = parse_version(version)
    return parsed is not None and MIN_SUPPORTED_VLLM <= parsed < NEXT_UNKNOWN_VLLM


def supported_range_text() -> str:
    low = ".".join(map(str, MIN_SUPPORTED_VLLM))
    high = ".".join(map(str, NEXT_UNKNOWN_VLLM))
    return f">={low},<{high}"


def require_supported(version: str) -> None:
    """Raises UnsupportedVllmVersion unless ``version`` lies in the studied range."""
    if not is_supported(version):
        raise UnsupportedVllmVersion(
            f"vLLM {version} is outside the range gemmaserve's Turing clamp knows ({supported_range_text()}).",
            hint=f'Install a known vLLM: pip install "vllm{supported_range_text()}", or upgrade gemmaserve.',
            vllm_version=version,
            supported=supported_range_text(),
        )
