"""Every tool's result model reads back its own JSON, and that JSON is standard and fits its own schema.

An MCP client validates structured content against the tool's output schema; a result whose JSON the
schema does not allow or that its own model cannot read back is a tool that fails on the agent's side.
Each model is filled with a value in every field (recursively, the first its validators accept), written
as standard JSON, checked against ``model_json_schema(mode="serialization")`` and read back. A float
whose schema is widened to allow null (JSON's stand-in for infinity: an unbounded interval) gets
infinity, so the null must read back as what it stood for.
"""

from __future__ import annotations

import enum
import json
import math
import types
import typing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError, WithJsonSchema

from gemmaserve.mcp_server import build_server

RESULT_MODELS = sorted(
    {tool.fn_metadata.output_model for tool in build_server()._tool_manager.list_tools()} - {None},
    key=lambda model: model.__name__,
)


def _values(annotation: Any, depth: int, metadata: list[Any] | None = None) -> list[Any]:
    """Candidate values for a field of this type, the awkward one first."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        return _values(inner, depth, [*(metadata or []), *extra])
    if origin in (typing.Union, types.UnionType):
        return [value for arm in typing.get_args(annotation) if arm is not type(None) for value in _values(arm, depth)]
    if origin is typing.Literal:
        return list(typing.get_args(annotation))
    if origin in (list, tuple, set, frozenset):
        arm = typing.get_args(annotation)[0] if typing.get_args(annotation) else Any
        return [[value] for value in _values(arm, depth)[:1]] + [[]]
    if origin is dict:
        key, arm = typing.get_args(annotation) or (str, Any)
        return [{_values(key, depth)[0]: value} for value in _values(arm, depth)[:1]] + [{}]
    if annotation is float:
        infinity_allowed = any(isinstance(item, WithJsonSchema) for item in metadata or [])
        return [math.inf, 1.5] if infinity_allowed else [1.5]
    if annotation is bool:
        return [True]
    if annotation is int:
        return [3]
    if annotation is str:
        return ["x"]
    if annotation is datetime:
        return [datetime(2026, 12, 4, tzinfo=UTC)]
    if annotation is Path:
        return [Path("x")]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return list(annotation)[:1]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        built = _instance(annotation, depth + 1)
        return [built] if built is not None else []
    return [None]


def _instance(model: type[BaseModel], depth: int = 0) -> BaseModel | None:
    """The model with each field's first candidate its validators accept (None if none is accepted)."""
    if depth > 6:
        return None
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        for candidate in _values(field.annotation, depth, list(field.metadata)):
            try:
                model.__pydantic_validator__.validate_assignment(model.model_construct(**values), name, candidate)
            except (ValidationError, TypeError, ValueError, AttributeError):
                continue
            values[name] = candidate
            break
    try:
        return model.model_validate(values)
    except ValidationError:
        return None


@pytest.mark.parametrize("model", RESULT_MODELS, ids=lambda model: model.__name__)
def test_a_result_reads_back_its_own_standard_json_which_fits_its_schema(model: type[BaseModel]) -> None:
    instance = _instance(model)
    assert instance is not None, f"{model.__name__}: no instance could be built to check"
    text = json.dumps(instance.model_dump(mode="json"), allow_nan=False)  # standard JSON, or this raises
    document = json.loads(text)
    jsonschema.validate(document, model.model_json_schema(mode="serialization"))
    assert model.model_validate(document).model_dump(mode="json") == document
