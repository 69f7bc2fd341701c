from __future__ import annotations

import pytest

from gemmaserve.host.memory import GIB, parse_meminfo, probe_memory
from tests.support.host.fixtures import data_text


def test_published_host_uses_mem_available_not_mem_free() -> None:
    facts = parse_meminfo(data_text("meminfo_published_7_8gb_no_swap.txt"))
    assert facts.mem_total_bytes == 8005932 * 1024
    assert facts.mem_available_bytes == 7391240 * 1024  # MemFree is 221,384 kB: page cache is reclaimable
    assert facts.swap_total_bytes == 0 and facts.swap_free_bytes == 0
    assert facts.stageable_gib == pytest.approx(7391240 * 1024 / GIB)


def test_kernel_without_mem_available_is_an_error_not_a_guess() -> None:
    text = "MemTotal: 8005932 kB\nMemFree: 221384 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n"
    with pytest.raises(ValueError, match="MemAvailable"):
        parse_meminfo(text)


def test_probe_records_an_unreadable_file() -> None:
    def unreadable() -> str:
        raise PermissionError("[Errno 13] Permission denied: '/proc/meminfo'")

    result = probe_memory(unreadable)
    assert result.value is None
    assert result.error == "PermissionError: [Errno 13] Permission denied: '/proc/meminfo'"


def test_this_machines_meminfo_parses() -> None:
    result = probe_memory()
    assert result.value is not None
    assert 0 < result.value.mem_available_bytes <= result.value.mem_total_bytes
