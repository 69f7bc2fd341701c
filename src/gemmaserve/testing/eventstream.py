"""Encode AWS event-stream frames, so a local server can speak SageMaker's response stream.

Only the encoder: decoding is botocore's own ``EventStreamBuffer`` (the client under
test must run the SDK's real parser). Frame layout: total length, headers length,
prelude CRC32, headers, payload, message CRC32 (all big-endian).
"""

from __future__ import annotations

import struct
import zlib

_STRING = 7


def encode_headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def encode_frame(headers: dict[str, str], payload: bytes, *, corrupt_crc: bool = False) -> bytes:
    raw_headers = encode_headers(headers)
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + raw_headers + payload
    crc = zlib.crc32(body) ^ (0xFFFFFFFF if corrupt_crc else 0)
    return body + struct.pack(">I", crc)


def payload_part(payload: bytes, *, corrupt_crc: bool = False) -> bytes:
    """A ``PayloadPart`` event carrying ``payload`` (the container's SSE bytes)."""
    headers = {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}
    return encode_frame(headers, payload, corrupt_crc=corrupt_crc)


def model_stream_error(message: str, error_code: str = "424") -> bytes:
    """An exception event as SageMaker sends when the container fails mid-stream."""
    headers = {":exception-type": "ModelStreamError", ":content-type": "application/json", ":message-type": "exception"}
    payload = ('{"Message": %s, "ErrorCode": "%s"}' % (_json_string(message), error_code)).encode()  # noqa: UP031
    return encode_frame(headers, payload)


def _json_string(text: str) -> str:
    import json

    return json.dumps(text)
