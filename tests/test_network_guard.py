"""The guard in conftest must refuse anything but loopback, or no test is hermetic."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import NetworkAccessBlocked


def test_non_loopback_connect_is_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock, pytest.raises(NetworkAccessBlocked):
        sock.connect(("93.184.216.34", 443))


def test_name_resolution_of_real_hosts_is_refused() -> None:
    with pytest.raises(NetworkAccessBlocked):
        socket.getaddrinfo("runtime.sagemaker.us-east-1.amazonaws.com", 443)


def test_loopback_is_allowed() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=2):
            pass
