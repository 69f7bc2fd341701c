from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gemmaserve.host.gpu import parse_gpu_csv, probe_gpus
from tests.support.host.fixtures import data_text


def which_in(directory: Path) -> Callable[[str], str | None]:
    return lambda name: shutil.which(name, path=str(directory))


def test_t4_line_parses_with_units() -> None:
    (gpu,) = parse_gpu_csv(data_text("nvidia_smi_t4.csv"))
    assert (gpu.name, gpu.sm, gpu.memory_total_mib, gpu.driver_version) == (
        "Tesla T4",
        75,
        15360,
        "570.133.20",
    )


def test_four_l4s_are_numbered_in_order() -> None:
    gpus = parse_gpu_csv(data_text("nvidia_smi_4xl4.csv"))
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert {g.sm for g in gpus} == {89}


def test_nounits_and_not_available_fields() -> None:
    (gpu,) = parse_gpu_csv("NVIDIA A10G, 8.6, 23028, [N/A]\n")
    assert gpu.memory_total_mib == 23028 and gpu.driver_version is None


def test_malformed_line_is_rejected() -> None:
    with pytest.raises(ValueError, match="want 4 fields"):
        parse_gpu_csv("Tesla T4, 7.5\n")


def test_real_fake_binary_t4(fake_bin: Callable[[str, str], Path]) -> None:
    smi = fake_bin("nvidia-smi", f"cat <<'X'\n{data_text('nvidia_smi_t4.csv')}X\n")
    result = probe_gpus(which=which_in(smi.parent))
    assert result.error is None and result.value is not None
    assert result.value[0].sm == 75


def test_absent_binary_is_a_clear_error(tmp_path: Path) -> None:
    result = probe_gpus(which=which_in(tmp_path))
    assert result.value is None
    assert result.error is not None and "nvidia-smi not found" in result.error


def test_driver_that_cannot_talk_to_the_card(
    fake_bin: Callable[[str, str], Path],
) -> None:
    message = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    smi = fake_bin("nvidia-smi", f"cat <<'X'\n{message}\nX\nexit 9\n")
    result = probe_gpus(which=which_in(smi.parent))
    assert result.error == f"nvidia-smi exited 9: {message}"


def test_old_driver_without_compute_cap_falls_back(
    fake_bin: Callable[[str, str], Path],
) -> None:
    smi = fake_bin(
        "nvidia-smi",
        'case "$1" in *compute_cap*) echo \'Field "compute_cap" is not a valid field to query.\'; exit 2;; esac\n'
        "echo 'Tesla T4, 15109 MiB, 470.182.03'\n",
    )
    result = probe_gpus(which=which_in(smi.parent))
    assert result.value is not None
    assert result.value[0].compute_capability is None and result.value[0].memory_total_mib == 15109


def test_no_devices(fake_bin: Callable[[str, str], Path]) -> None:
    smi = fake_bin("nvidia-smi", "exit 0\n")
    assert probe_gpus(which=which_in(smi.parent)).error == "nvidia-smi listed no GPUs"
