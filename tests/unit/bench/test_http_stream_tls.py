"""https streams against a real TLS server on 127.0.0.1, with certificates made at test time.

The client verifies as aiohttp's default session does (``ssl.create_default_context()``: the
system's trust store, or ``SSL_CERT_FILE``; the host name checked); a test authority is trusted
the way a user trusts a private one, through ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gemmaserve.bench.transports import ChatRequest, HttpTransport, RequestFailed
from tests.unit.bench.test_http_stream import EVENT, LAST, LOOPS, ScriptedServer, _collect, _run, _script


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str, issuer: str, key: Any, signing_key: Any, *, authority: bool, names: list[x509.GeneralName]
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=authority, path_length=None), critical=True)
    )
    if authority:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


class Authority:
    """A certificate authority made for one test, and server certificates it signs."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.certificate = _certificate(
            "gemmaserve test CA", "gemmaserve test CA", self.key, self.key, authority=True, names=[]
        )
        self.pem = folder / "ca.pem"
        self.pem.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def server_context(self, names: list[x509.GeneralName]) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = _certificate("server", "gemmaserve test CA", key, self.key, authority=False, names=names)
        chain = self.folder / "server.pem"
        chain.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            + certificate.public_bytes(serialization.Encoding.PEM)
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(chain)
        return context


LOOPBACK = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    return Authority(tmp_path)


async def _stream(context: ssl.SSLContext, replies: int = 1) -> tuple[list[list[str]], int]:
    server = ScriptedServer([_script(EVENT % b"x", LAST)] * replies, ssl_context=context)
    async with server as url:
        transport = HttpTransport(url, timeout_s=5)
        try:
            texts = []
            for _ in range(replies):
                texts.append([c.content for c in await _collect(transport, ChatRequest("p", 2)) if not c.sent])
        finally:
            await transport.aclose()
    return texts, server.connections


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_streams_through_tls_on_one_kept_alive_connection(
    loop: str, authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(authority.pem))
    texts, connections = _run(loop, _stream(authority.server_context(LOOPBACK), replies=3))
    assert texts == [["x", "end", ""]] * 3 and connections == 1


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_certificate_from_an_untrusted_authority_is_refused(
    loop: str, authority: Authority, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(Authority(other).pem))  # trusts another authority only
    with pytest.raises(RequestFailed) as caught:
        _run(loop, _stream(authority.server_context(LOOPBACK)))
    assert caught.value.reason == "connect_error" and "CERTIFICATE_VERIFY_FAILED" in caught.value.detail


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_certificate_for_another_host_is_refused(
    loop: str, authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(authority.pem))
    with pytest.raises(RequestFailed) as caught:
        _run(loop, _stream(authority.server_context([x509.DNSName("elsewhere.example")])))
    assert caught.value.reason == "connect_error" and "CERTIFICATE_VERIFY_FAILED" in caught.value.detail
    assert "127.0.0.1" in caught.value.detail  # the host name check, not the chain
