"""The requests of ``turing status|apply|verify|revert|smem``: one model each, which the CLI and MCP are built from.

They own the defaults, ranges, normalisation (a compute capability, an architecture) and the rules
between fields (a file or an interpreter, not both). Pure: no subprocess, no file is read here beyond
asking whether a named path is a file; the actions live beside what they act on (``status.check_status``,
``filepatch.apply_clamp``/``verify_clamp``/``revert_clamp``, ``smem.compile_smem``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Self

from pydantic import Field, field_validator, model_validator

from gemmaserve.request_model import CHANGES_IN_PLACE, READS, ActionRequest, Cli, exclusive
from gemmaserve.turing.arch import SMEM_OPTIN_BYTES, arch_number, parse_capability
from gemmaserve.turing.kernel_source import KERNEL_FILE_NAME
from gemmaserve.turing.rule import STOCK_NUM_WARPS

PythonForStatus = Annotated[
    str | None,
    Cli(metavar="PATH"),
    Field(description="Interpreter that runs vLLM (default: the one running gemmaserve)."),
]
Capability = Annotated[
    str | None,
    Cli(metavar="CC"),
    Field(
        description="State the GPU's compute capability (7.5 or sm_75) instead of asking nvidia-smi: for image "
        "builds with no GPU."
    ),
]
KernelFile = Annotated[
    str | None, Cli(metavar="PATH"), Field(description=f"The {KERNEL_FILE_NAME} to act on (instead of --python).")
]
PythonForPatch = Annotated[
    str | None,
    Cli(metavar="PATH"),
    Field(description="Interpreter whose installed vLLM to act on (default: the one running gemmaserve)."),
]
PatchDryRun = Annotated[bool, Field(description="Show the diff; write nothing (needs no confirmation).")]
# Gemma 4's two head sizes: 256 (sliding layers) and 512 (global layers).
GEMMA4_HEAD_SIZES = (256, 512)
# Triton launches a power-of-two number of warps; 32 warps make a full 1,024-thread block.
MAX_NUM_WARPS = 32


def _not_a_folder(value: str | None, option: str) -> str | None:
    if value is not None and Path(value).is_dir():
        raise ValueError(f"{value} is a folder; give the {KERNEL_FILE_NAME} file inside it ({option}).")
    return value


class TuringStatusRequest(ActionRequest, action="turing status", effect=READS):
    """``gemmaserve turing status``: is the clamp needed on this GPU, which delivery is active, would vLLM start?"""

    python: PythonForStatus = None
    capability: Capability = None

    @field_validator("capability")
    @classmethod
    def _normal_capability(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return parse_capability(value)
        except ValueError as error:  # UsageError: its hint belongs in the one line a validator reports
            hint = getattr(error, "hint", None)
            raise ValueError(f"{error}{' ' + hint if hint else ''}") from None


class PatchTargetRequest(ActionRequest):
    """Which vLLM kernel file a file-patch action works on: ``--file``, or the vLLM that ``--python`` imports."""

    file: KernelFile = None
    python: PythonForPatch = None

    @field_validator("file")
    @classmethod
    def _file_not_folder(cls, value: str | None) -> str | None:
        return _not_a_folder(value, "--file")

    @model_validator(mode="after")
    def _file_or_python(self) -> Self:
        exclusive(
            self, "file", "python", "--file names the kernel file itself, --python the interpreter whose vLLM holds it."
        )
        return self

    def target_words(self) -> str:
        """The file the action will touch, in words (before it is looked up)."""
        if self.file is not None:
            return self.file
        return f"vLLM's {KERNEL_FILE_NAME} of {self.python or sys.executable}"


class VerifyRequest(PatchTargetRequest, action="turing verify", effect=READS):
    """``gemmaserve turing verify``: is the file patch present and intact?"""


class ApplyRequest(PatchTargetRequest, action="turing apply", effect=CHANGES_IN_PLACE, confirmation=True):
    """``gemmaserve turing apply``: insert the clamp into the installed vLLM file (a backup beside it)."""

    vllm_version: Annotated[
        str | None,
        Field(
            description="The vLLM version the --file belongs to, when it cannot be read beside the file "
            "(vllm/_version.py or the vllm-*.dist-info next to the package)."
        ),
    ] = None
    dry_run: PatchDryRun = False

    def describe_change(self) -> str:
        return f"insert the Turing clamp into {self.target_words()}"


class RevertRequest(PatchTargetRequest, action="turing revert", effect=CHANGES_IN_PLACE, confirmation=True):
    """``gemmaserve turing revert``: restore the vLLM file byte for byte."""

    dry_run: PatchDryRun = False

    def describe_change(self) -> str:
        return f"remove the Turing clamp from {self.target_words()}"


class SmemRequest(ActionRequest, action="turing smem", effect=READS):
    """``gemmaserve turing smem``: compile vLLM's real attention kernel for an architecture (no GPU needed)."""

    vllm_file: Annotated[
        str | None,
        Cli(metavar="PATH"),
        Field(
            description=f"The {KERNEL_FILE_NAME} to compile, with triton_attention_helpers.py beside it "
            "(default: the installed vLLM's; no vLLM install needed with this)."
        ),
    ] = None
    python: Annotated[
        str | None,
        Cli(metavar="PATH"),
        Field(description="Interpreter whose vLLM to find when --vllm-file is not given (default: this one)."),
    ] = None
    arch: Annotated[str, Cli(metavar="ARCH"), Field(description="Target architecture, e.g. sm_75, sm_89.")] = "sm_75"
    head_size: Annotated[tuple[int, ...], Field(description="Head size(s) to compile (Gemma 4: 256 and 512).")] = (
        GEMMA4_HEAD_SIZES
    )
    num_warps: Annotated[
        int, Field(ge=1, le=MAX_NUM_WARPS, description="The stock launch's num_warps (a power of two).")
    ] = STOCK_NUM_WARPS
    search: Annotated[
        bool,
        Field(
            description="Per Gemma 4 layer geometry and grid: keep vLLM's launch where it fits; where it "
            "overflows, compile every smaller tile at 4, 8 and 16 warps and show the one that fits and spills "
            "least beside the rule's launch."
        ),
    ] = False

    @field_validator("vllm_file")
    @classmethod
    def _vllm_file_is_a_file(cls, value: str | None) -> str | None:
        _not_a_folder(value, "--vllm-file")
        if value is not None and not Path(value).is_file():
            raise ValueError(f"{value} does not exist; give the path of a {KERNEL_FILE_NAME}.")
        return value

    @field_validator("arch")
    @classmethod
    def _known_arch(cls, value: str) -> str:
        number = arch_number(value)
        if number is None:
            raise ValueError(f"{value!r} is not an architecture; use the form sm_75.")
        if number not in SMEM_OPTIN_BYTES:
            known = ", ".join(f"sm_{a}" for a in SMEM_OPTIN_BYTES)
            raise ValueError(f"no shared-memory limit known for sm_{number}; use one of {known}.")
        return f"sm_{number}"

    @field_validator("head_size")
    @classmethod
    def _head_sizes(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value:
            raise ValueError("give at least one head size (Gemma 4: 256 and 512).")
        # The kernel pads the head to a power of two (HEAD_SIZE_PADDED); Triton's ranges need one.
        odd = [size for size in value if size < 16 or size > 1024 or size & (size - 1)]
        if odd:
            raise ValueError(f"head sizes must be powers of two from 16 to 1024, not {odd}.")
        return tuple(dict.fromkeys(value))

    @field_validator("num_warps")
    @classmethod
    def _warps_power_of_two(cls, value: int) -> int:
        if value & (value - 1):
            raise ValueError(f"num_warps must be a power of two (1, 2, 4, 8, 16 or 32), not {value}.")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        exclusive(
            self,
            "vllm_file",
            "python",
            "--vllm-file names the kernel file, --python the interpreter whose vLLM holds it.",
        )
        if self.search and self.num_warps != STOCK_NUM_WARPS:
            raise ValueError(
                "--num-warps sets the stock launch of the plain report; --search compiles 4, 8 and 16 warps "
                "itself: drop --num-warps."
            )
        return self
