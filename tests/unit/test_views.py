"""One view per result: every tool's result type has a view, carries ``ok``, and draws all ways without error.

The instances are the ones tests/unit/test_result_models.py builds (a value in every field, the awkward one
first), so a view that trips on an empty list, a None or an infinity fails here.
"""

from __future__ import annotations

import io
import json

import click
import pytest
from pydantic import BaseModel
from rich.console import Console

from gemmaserve.cli.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, exit_code_for
from gemmaserve.cli.output import finish
from gemmaserve.result_model import ActionResult
from gemmaserve.views import page_for, registered, summary_for, view
from gemmaserve.views.page import Line, Page, Row, plain_lines, summary_text, table
from gemmaserve.views.terminal import draw
from tests.unit.test_result_models import RESULT_MODELS, _instance

#: Result types whose renderers still live in the front ends, by name and noun. Each entry is work left:
#: when a type gets its view, its name must leave these sets (the test below fails until it does).
NOT_YET_VIEWED_PLAN_HOST_SERVE: set[str] = set()
NOT_YET_VIEWED_BENCH: set[str] = set()
NOT_YET_VIEWED_CHECKPOINT_TURING: set[str] = set()
NOT_YET_VIEWED_SAGEMAKER: set[str] = set()
NOT_YET_VIEWED = (
    NOT_YET_VIEWED_PLAN_HOST_SERVE | NOT_YET_VIEWED_BENCH | NOT_YET_VIEWED_CHECKPOINT_TURING | NOT_YET_VIEWED_SAGEMAKER
)


def test_every_tool_result_has_a_view_or_is_named_as_work_left() -> None:
    viewed = {kind.__name__ for kind in registered()}
    results = {model.__name__ for model in RESULT_MODELS}
    assert results - viewed - NOT_YET_VIEWED == set(), "a tool's result with no view: add one under gemmaserve/views"
    assert NOT_YET_VIEWED & viewed == set(), "viewed now: take these out of NOT_YET_VIEWED"
    assert NOT_YET_VIEWED <= results, "NOT_YET_VIEWED names a type no tool returns"


@pytest.mark.parametrize(
    "model", sorted(registered(), key=lambda kind: kind.__name__), ids=lambda model: model.__name__
)
def test_a_view_draws_every_way_and_the_result_says_whether_it_is_ok(model: type[BaseModel]) -> None:
    instance = _instance(model)
    assert instance is not None
    assert isinstance(instance, ActionResult), f"{model.__name__} must derive from ActionResult"
    assert isinstance(instance.model_dump(mode="json")["ok"], bool)
    shown = page_for(instance)
    assert shown.blocks, "an empty page says nothing"
    assert plain_lines(shown)
    assert summary_for(instance).strip()
    terminal = Console(file=io.StringIO(), width=100, force_terminal=True)
    draw(shown, terminal)


class Probe(ActionResult):
    passed: bool
    stopped: bool = False

    def succeeded(self) -> bool:
        return self.passed

    @property
    def interrupted(self) -> bool:
        return self.stopped


@view(Probe)
def _probe_page(result: Probe) -> Page:
    return Page((Line("probe [red]not markup[/]", "bad" if not result.ok else None),))


def test_ok_is_in_the_json_computed_from_the_result_and_reads_back() -> None:
    document = Probe(passed=False).model_dump(mode="json")
    assert document["ok"] is False
    assert Probe.model_validate(document).ok is False  # the computed field is read back, not trusted
    schema = Probe.model_json_schema(mode="serialization")
    assert "ok" in schema["required"]


@pytest.mark.parametrize(
    ("result", "code"),
    [
        (Probe(passed=True), EXIT_OK),
        (Probe(passed=False), EXIT_FAILED),
        (Probe(passed=True, stopped=True), EXIT_INTERRUPTED),
        (Probe(passed=False, stopped=True), EXIT_INTERRUPTED),
    ],
)
def test_the_exit_status_comes_from_the_result_alone(result: Probe, code: int) -> None:
    assert exit_code_for(result) == code


def test_finish_prints_the_plain_page_off_a_terminal_then_exits_with_the_results_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(click.exceptions.Exit) as stopped:
        finish(Probe(passed=False), as_json=False)
    assert stopped.value.exit_code == EXIT_FAILED
    assert capsys.readouterr().out == "probe [red]not markup[/]\n"
    finish(Probe(passed=True), as_json=True)  # ok: no exit raised
    assert json.loads(capsys.readouterr().out) == {"passed": True, "stopped": False, "ok": True}


def test_markup_in_a_value_is_printed_as_written_on_a_terminal() -> None:
    out = io.StringIO()
    draw(page_for(Probe(passed=True)), Console(file=out, width=80, force_terminal=False))
    assert out.getvalue() == "probe [red]not markup[/]\n"


def test_a_plain_table_aligns_its_columns_and_right_aligns_numbers() -> None:
    shown = Page((table(["model", "KV tokens>"], [("e2b", "409,200"), ("31b", "77,195")]),))
    assert plain_lines(shown) == [
        "model  KV tokens",
        "e2b      409,200",
        "31b       77,195",
    ]


def test_none_cells_show_as_a_dash_and_an_empty_table_says_so() -> None:
    assert plain_lines(Page((table(["a", "b"], [(None, 1)]),))) == ["a  b", "–  1"]
    assert plain_lines(Page((table(["a"], []),))) == ["a", "(no rows)"]


def test_the_summary_cuts_long_tables_and_says_how_many_rows_are_left_out() -> None:
    shown = Page((Line("head"), table(["n>"], [(index,) for index in range(20)])))
    lines = summary_text(shown).splitlines()
    assert lines[0] == "head"
    assert lines[-1] == "(8 more rows in the structured result)"
    assert len(plain_lines(shown)) == 22  # the CLI prints every row


def test_a_row_of_the_wrong_width_is_a_bug_caught_at_once() -> None:
    with pytest.raises(ValueError, match="2 cells in a table of 1 columns"):
        table(["a"], [Row(("x", "y"))])
