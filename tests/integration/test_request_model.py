"""Request models turn bad input into one readable usage error, naming the setting as the CLI spells it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from gemmaserve.errors import UsageError
from gemmaserve.request_model import CHANGES_IN_PLACE, CREATES, READS, ActionRequest, Cli, ServingSettings


class ExampleRequest(ServingSettings, ActionRequest, action="example run", effect=CREATES, confirmation=True):
    target: Annotated[str, Cli(argument=True), Field(min_length=1)]
    repeat: Annotated[int, Field(ge=1)] = 1
    dry_run: bool = False


def test_a_bad_option_is_named_as_the_cli_and_mcp_spell_it() -> None:
    with pytest.raises(UsageError) as bad:
        ExampleRequest.parse({"target": "x", "repeat": 0})
    assert bad.value.message.startswith("--repeat (repeat): ")
    assert bad.value.exit_code == 2


def test_a_bad_positional_argument_is_named_by_its_placeholder() -> None:
    with pytest.raises(UsageError) as bad:
        ExampleRequest.parse({"target": ""})
    assert bad.value.message.startswith("TARGET (target): ")


def test_an_unknown_setting_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as bad:
        ExampleRequest.parse({"target": "x", "max_model_length": 4096})
    assert "max_model_length" in bad.value.message
    assert "--max-model-len" in (bad.value.hint or "")


def test_several_problems_are_all_reported_once() -> None:
    with pytest.raises(UsageError) as bad:
        ExampleRequest.parse({"target": "x", "repeat": 0, "max_model_len": 3})
    problems = bad.value.fields["problems"]
    assert len(problems) == 2 and problems[0] == bad.value.message and bad.value.hint == problems[1]


def test_dry_runs_need_no_confirmation_and_the_serving_block_comes_out_whole() -> None:
    wet = ExampleRequest.parse({"target": "x", "max_model_len": 4096})
    dry = ExampleRequest.parse({"target": "x", "dry_run": True})
    assert wet.needs_confirmation() and not dry.needs_confirmation()
    assert wet.serving() == ServingSettings(max_model_len=4096)


def test_requests_are_immutable() -> None:
    request = ExampleRequest.parse({"target": "x"})
    with pytest.raises(ValueError):
        request.repeat = 2  # type: ignore[misc]


def test_the_package_front_door_is_lazy_and_complete() -> None:
    import subprocess
    import sys

    code = (
        "import sys, gemmaserve; assert 'pydantic' not in sys.modules; "
        "from gemmaserve import PlanRequest, ServingSettings, ProgressEvent, CancelToken, Cancelled, Finding; "
        "from gemmaserve.plan import plan; print(len(plan(PlanRequest(model=['e2b'], gpu=['t4'])).rows))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "4"


class StopExampleRequest(ActionRequest, action="example stop", effect=CHANGES_IN_PLACE, confirmation=True):
    pass


def test_a_refusal_offers_a_dry_run_only_where_the_action_has_one() -> None:
    from gemmaserve.cli.options import confirm
    from gemmaserve.errors import ConfirmationRequired
    from gemmaserve.mcp_server.framework import require_confirmation

    with pytest.raises(ConfirmationRequired) as with_dry_run:  # pytest's stdin is not a terminal
        confirm(ExampleRequest.parse({"target": "x"}), yes=False)
    assert with_dry_run.value.hint == "Add --yes once you are sure (or --dry-run to see what would happen)."
    with pytest.raises(ConfirmationRequired) as without:
        confirm(StopExampleRequest(), yes=False)
    assert without.value.hint == "Add --yes once you are sure."
    confirm(StopExampleRequest(), yes=True)
    confirm(ExampleRequest.parse({"target": "x", "dry_run": True}), yes=False)
    with pytest.raises(ConfirmationRequired) as mcp:
        require_confirmation(False, "stop it", has_dry_run=False)
    assert mcp.value.hint == "Ask the user, then call again with confirm=true."


def test_a_request_that_names_an_action_names_its_own_effect() -> None:
    class Inherits(ActionRequest, action="example list", effect=READS):
        pass

    assert (Inherits.action, Inherits.effect, Inherits.confirmation) == ("example list", READS, False)
    with pytest.raises(TypeError, match="names action 'example delete' but not its effect"):

        class DeleteExampleRequest(Inherits, action="example delete"):  # would read as "reads only"
            pass


@pytest.mark.parametrize(
    ("model", "values", "both"),
    [
        ("gemmaserve.checkpoint.requests:GridCheckRequest", {"build": "b", "reference": "r", "tensor": "t",
         "layers": "0"}, "--tensor (tensor) or --layers (layers)"),
        ("gemmaserve.sagemaker.spec.requests:CleanupRequest", {"expired": True, "owner": "me", "any_owner": True},
         "--owner (owner) or --any-owner (any_owner)"),
        ("gemmaserve.sagemaker.spec.requests:ImageBuildRequest", {"wheel": "{wheel}", "requirement": "vllm"},
         "--wheel (wheel) or --requirement (requirement)"),
        ("gemmaserve.turing.requests:SmemRequest", {"vllm_file": "{file}", "python": "py"},
         "--vllm-file (vllm_file) or --python (python)"),
    ],
)  # fmt: skip
def test_settings_that_exclude_each_other_are_refused_in_one_wording(
    model: str, values: dict[str, object], both: str, tmp_path: Path
) -> None:
    import importlib
    import zipfile

    kernel, wheel = tmp_path / "triton_unified_attention.py", tmp_path / "gemmaserve-0-py3-none-any.whl"
    kernel.write_text("x = 1\n")
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("gemmaserve-0.dist-info/METADATA", "Name: gemmaserve\n")
    files = {"{file}": str(kernel), "{wheel}": str(wheel)}
    values = {key: files.get(str(value), value) for key, value in values.items()}
    module, _, name = model.partition(":")
    request: type[ActionRequest] = getattr(importlib.import_module(module), name)
    with pytest.raises(UsageError, match=rf"^the request: Give {re.escape(both)}, not both: ") as refused:
        request.parse(values)
    assert refused.value.exit_code == 2


def test_a_setting_of_zero_counts_as_given_and_an_unset_flag_does_not() -> None:
    from pydantic import BaseModel

    from gemmaserve.request_model import exclusive

    class Pair(BaseModel):
        first: int | None = None
        second: int | None = None
        flag: bool = False

    with pytest.raises(ValueError, match=r"^Give --first \(first\) or --second \(second\), not both\.$"):
        exclusive(Pair(first=0, second=1), "first", "second")
    exclusive(Pair(first=0), "first", "second")
    exclusive(Pair(first=3, flag=False), "first", "flag")
