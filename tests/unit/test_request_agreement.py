"""The CLI, the MCP server and the request models agree: names, defaults, ranges, confirmation.

Both front ends are generated from the request models (``gemmaserve.cli.options``,
``ToolSet.action``); this walks every command and every tool so that a hand-written option or
parameter, a renamed field or a forgotten confirmation fails here rather than in a user's script.
"""

from __future__ import annotations

import enum
from typing import Any

import click
import pytest

from gemmaserve import request_model
from gemmaserve.actions import CLI_ONLY, MCP_ONLY, confirmation_actions, request_models
from gemmaserve.cli import app
from gemmaserve.cli.options import click_type, is_list_field
from gemmaserve.mcp_server import build_server
from gemmaserve.mcp_server.framework import mcp_name
from gemmaserve.request_model import ActionRequest, Effect, cli_marker, mcp_fields

# Options a command may have beyond its request: how the result is shown, not what is asked.
RENDERING_OPTIONS = {"as_json", "wide", "help", "yes"}

# The actions that change or delete something a person must agree to first; both front ends ask.
EXPECTED_CONFIRMATION = sorted(
    [
        "sagemaker autoscale",
        "sagemaker cleanup",
        "sagemaker delete",
        "sagemaker deploy",
        "sagemaker image build",
        "sagemaker role create",
        "sagemaker update",
        "serve stop",
        "turing apply",
        "turing revert",
    ]
)


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> dict[str, click.Command]:
    ctx = click.Context(group)
    found: dict[str, click.Command] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        path = (*prefix, name)
        if isinstance(command, click.Group):
            found |= leaf_commands(command, path)
        else:
            found[" ".join(path)] = command
    return found


COMMANDS = leaf_commands(app)
TOOLS = {tool.name: tool for tool in build_server()._tool_manager.list_tools()}
MODELS = {model.action: model for model in request_models()}


def _normal(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_normal(item) for item in value] or None
    return value


def test_every_command_and_every_tool_has_a_request_model() -> None:
    assert sorted(set(COMMANDS) - set(MODELS) - set(CLI_ONLY)) == []
    assert sorted(set(TOOLS) - {mcp_name(action) for action in MODELS} - set(MCP_ONLY)) == []
    assert sorted(set(MODELS) - set(COMMANDS)) == []
    assert sorted({mcp_name(action) for action in MODELS} - set(TOOLS)) == []


def test_exactly_these_actions_need_confirmation_in_both_front_ends() -> None:
    assert confirmation_actions() == EXPECTED_CONFIRMATION
    for action, model in MODELS.items():
        options = {param.name for param in COMMANDS[action].params}
        arguments = set(TOOLS[mcp_name(action)].parameters["properties"])
        assert ("yes" in options) is model.confirmation, action
        assert ("confirm" in arguments) is model.confirmation, action


def test_each_action_names_its_own_effect_and_the_tool_hints_say_it() -> None:
    kinds = [value for value in vars(request_model).values() if isinstance(value, Effect)]
    assert len({(k.reads_only, k.destroys, k.repeatable, k.remote) for k in kinds}) == len(kinds)  # each once
    for action, model in MODELS.items():
        # declared on the class itself: a delete must not inherit its parent's "reads remote"
        assert isinstance(vars(model).get("effect"), Effect), action
        effect, hints = model.effect, TOOLS[mcp_name(action)].annotations
        assert hints is not None, action
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
            effect.reads_only,
            effect.destroys,
            effect.repeatable,
            effect.remote,
        ), action
        assert not (effect.reads_only and effect.destroys), action
        if effect.destroys:
            assert model.confirmation, f"{action} destroys something and must ask first"
        if effect.reads_only:
            assert not model.confirmation, f"{action} changes nothing and must not ask"


def test_the_help_of_exactly_the_actions_that_ask_first_says_so_once() -> None:
    from gemmaserve.cli.options import ASKS_FIRST

    saying = sorted(action for action in MODELS if ASKS_FIRST in (COMMANDS[action].help or ""))
    assert saying == EXPECTED_CONFIRMATION
    assert all((COMMANDS[action].help or "").count("Asks first") == 1 for action in saying)


@pytest.mark.parametrize("action", sorted(MODELS))
def test_cli_options_are_the_request_fields(action: str) -> None:
    model: type[ActionRequest] = MODELS[action]
    params = {param.name: param for param in COMMANDS[action].params}
    extra = set(params) - set(model.model_fields) - RENDERING_OPTIONS
    assert extra == set(), f"{action}: options not in {model.__name__}: {sorted(extra)}"
    # every result prints as JSON, as the MCP tool returns it structured; --json is listed last
    assert "as_json" in params and params["as_json"].opts == ["--json"], f"{action} has no --json"
    assert COMMANDS[action].params[-1].name == "as_json", f"{action}: --json is not last"
    for name, field in model.model_fields.items():
        assert name in params, f"{action}: {model.__name__}.{name} has no option"
        param = params[name]
        marker = cli_marker(field.metadata)
        if marker.argument:
            assert isinstance(param, click.Argument), f"{action} {name}"
            continue
        assert isinstance(param, click.Option)
        assert "--" + name.replace("_", "-") in param.opts + param.secondary_opts, f"{action}: {param.opts}"
        assert param.multiple is is_list_field(field), f"{action} {name}"
        assert param.required is field.is_required(), f"{action} {name}"
        if not field.is_required():
            assert _normal(param.default) == _normal(field.get_default(call_default_factory=True)), f"{action} {name}"
        if not param.is_flag:
            expected, actual = click_type(field), param.type
            assert type(actual) is type(expected), f"{action} {name}: {actual!r} != {expected!r}"
            assert vars(actual) == vars(expected), f"{action} {name}"


@pytest.mark.parametrize("action", sorted(MODELS))
def test_mcp_parameters_are_the_request_fields(action: str) -> None:
    model = MODELS[action]
    schema = TOOLS[mcp_name(action)].parameters
    assert schema.get("additionalProperties") is False, f"{action}: unknown arguments must be rejected"
    expected = model.model_json_schema()
    properties = {name: value for name, value in schema["properties"].items() if name != "confirm"}
    offered = mcp_fields(model)
    assert sorted(properties) == sorted(offered)
    assert all(not model.model_fields[name].is_required() for name in set(model.model_fields) - set(offered)), action
    assert sorted(set(schema.get("required", [])) - {"confirm"}) == sorted(expected.get("required", []))
    for name, value in properties.items():
        want = {key: item for key, item in expected["properties"][name].items() if key != "title"}
        got = {key: item for key, item in value.items() if key != "title"}
        assert got == want, f"{action} {name}"


def test_every_tool_rejects_unknown_arguments() -> None:
    loose = [name for name, tool in TOOLS.items() if tool.parameters.get("additionalProperties") is not False]
    assert loose == []
