"""What each checkpoint action is asked: inspect, grid-check, repack and validate, one request model each.

The CLI's options and the MCP tools' arguments are built from these models, so both front ends take
the same names, defaults and ranges and reject the same mistakes with the same words. Pure: pydantic
only, no numpy and no file access, so that building ``gemmaserve checkpoint --help`` stays cheap.
What depends on the files (an output that already exists, a reference on no grid) is the action's to
check, when it runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from gemmaserve.request_model import CREATES, READS_REMOTE, ActionRequest, Cli, exclusive

LAYERS_EXAMPLE = "0,3-5"

Source = Annotated[
    str,
    Cli(argument=True),
    Field(min_length=1, description="A checkpoint directory, a .safetensors file, or a Hub repo id (owner/name)."),
]
Revision = Annotated[
    str | None,
    Field(min_length=1, description="Hub revision (branch, tag or commit) of a repo id; not for a local path."),
]
# Typed loosely on purpose, with the exact schema stated: a looser type lets a wrong value reach the
# model's own check (the same message from the CLI and from MCP, whose SDK checks types first).
ReferenceGroupSize = Annotated[
    int | str | None,
    WithJsonSchema(
        {"anyOf": [{"type": "integer", "minimum": 1}, {"const": "channel", "type": "string"}, {"type": "null"}]}
    ),
]


def parse_layers(spec: str) -> set[int]:
    """The decoder layers a ``--layers`` value names (``"0,3-5"`` → {0, 3, 4, 5}).

    Raises:
        ValueError: a part that is not a number or an ascending range, or a value that names no layer.
    """
    layers: set[int] = set()
    for part in (piece.strip() for piece in spec.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        if not low.strip().isdigit() or (dash and not high.strip().isdigit()):
            raise ValueError(f"{part!r} is not a layer number or a range: expected numbers and ranges like "
                             f"{LAYERS_EXAMPLE}.")  # fmt: skip
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"the range {part!r} runs backwards: write it as {last}-{first}.")
        layers.update(range(first, last + 1))
    if not layers:
        raise ValueError(f"{spec!r} names no layer: expected numbers and ranges like {LAYERS_EXAMPLE}.")
    return layers


def group_size_value(value: Any) -> int | str | None:
    """A reference group size as either front end gives it (``32``, ``"32"``, ``"channel"``), normalised."""
    if value is None:
        return None
    # A bool is no size (JSON true would otherwise read as 1).
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "channel":
            return text
        if text.isdigit() and int(text) >= 1:
            return int(text)
    raise ValueError(f"{value!r} is not a group size: expected a positive number of weights per group, or 'channel'.")


class InspectRequest(ActionRequest, action="checkpoint inspect", effect=READS_REMOTE):
    """``gemmaserve checkpoint inspect``: which checkpoint, at which Hub revision."""

    source: Source
    revision: Revision = None


class ValidateRequest(ActionRequest, action="checkpoint validate", effect=READS_REMOTE):
    """``gemmaserve checkpoint validate``: which checkpoint, at which Hub revision."""

    source: Source
    revision: Revision = None


class GridCheckRequest(ActionRequest, action="checkpoint grid-check", effect=READS_REMOTE):
    """``gemmaserve checkpoint grid-check``: a 4-bit build against the QAT reference, all of it or a part."""

    build: Annotated[
        str, Cli(argument=True), Field(min_length=1, description="The 4-bit build to check (path or Hub repo id).")
    ]
    reference: Annotated[
        str, Field(min_length=1, description="The bf16 -qat-q4_0-unquantized checkpoint (path or Hub repo id).")
    ]
    tensor: Annotated[
        str | None,
        Field(
            min_length=1, description="One module or tensor, by its full name in the build (default: all 4-bit ones)."
        ),
    ] = None
    layers: Annotated[
        str | None,
        Field(description=f"Decoder layers to check, e.g. {LAYERS_EXAMPLE} (default: every 4-bit tensor)."),
    ] = None
    reference_group_size: Annotated[
        ReferenceGroupSize,
        Cli(metavar="N|channel"),
        Field(
            description="The reference grid's group size, or 'channel' (default: detected from its values; 32 for "
            "Google's q4_0 exports)."
        ),
    ] = None

    @field_validator("layers")
    @classmethod
    def _layers_parse(cls, value: str | None) -> str | None:
        if value is not None:
            parse_layers(value)
        return value

    @field_validator("reference_group_size", mode="before")
    @classmethod
    def _group_size(cls, value: Any) -> int | str | None:
        return group_size_value(value)

    @model_validator(mode="after")
    def _one_selection(self) -> GridCheckRequest:
        # --tensor names one module whatever the layer; taking both would silently drop --layers.
        exclusive(self, "tensor", "layers", "--tensor checks one module, --layers whole decoder layers.")
        return self


class RepackRequest(ActionRequest, action="checkpoint repack", effect=CREATES):
    """``gemmaserve checkpoint repack``: a local -qat-q4_0-unquantized directory into a new W4A16 one.

    No confirmation: it only creates ``out``, and refuses when ``out`` already exists.
    """

    src: Annotated[
        str,
        Cli(argument=True),
        Field(min_length=1, description="A local -qat-q4_0-unquantized checkpoint directory."),
    ]
    out: Annotated[
        str,
        Cli(argument=True),
        Field(min_length=1, description="The output directory to create (refused when it already exists)."),
    ]
    text_only: Annotated[
        bool, Field(description="Drop the vision and audio towers; write a text-only causal LM config.")
    ] = False
    int4_embeddings: Annotated[bool, Field(description="Also pack the per-layer-embedding table on the same grid.")] = (
        False
    )
