"""The one finding model: what passes, what blocks, which status is worst."""

from __future__ import annotations

import itertools

import pytest

from gemmaserve.findings import Check, Finding, Status, all_pass, worst


@pytest.mark.parametrize(
    ("status", "passed"),
    [
        (Status.OK, True),
        (Status.WARN, True),
        (Status.NOT_APPLICABLE, True),
        (Status.FAIL, False),
        (Status.UNKNOWN, False),
    ],
)
@pytest.mark.parametrize("required", [True, False])
def test_unknown_never_passes_and_only_required_failures_block(status: Status, passed: bool, required: bool) -> None:
    finding = Finding(check="x", status=status, detail="d", required=required)
    assert finding.passed is passed
    assert finding.blocks is (required and not passed)


def test_all_pass_over_every_combination_of_two() -> None:
    for a, b in itertools.product(Status, repeat=2):
        findings = [Finding(check="a", status=a, detail=""), Finding(check="b", status=b, detail="")]
        assert all_pass(findings) is (findings[0].passed and findings[1].passed)
    assert all_pass([])


def test_worst_orders_fail_unknown_warn_ok() -> None:
    def of(*statuses: Status) -> Status:
        return worst(Finding(check=str(i), status=s, detail="") for i, s in enumerate(statuses))

    assert of(Status.OK, Status.WARN) is Status.WARN
    assert of(Status.WARN, Status.UNKNOWN) is Status.UNKNOWN
    assert of(Status.UNKNOWN, Status.FAIL, Status.OK) is Status.FAIL
    assert of(Status.NOT_APPLICABLE) is Status.NOT_APPLICABLE
    assert of() is Status.OK


def test_the_json_form_is_the_field_names() -> None:
    finding = Finding(check="gpu.driver", status=Status.FAIL, detail="nvidia-smi not found", fix="install the driver")
    assert finding.model_dump(mode="json", exclude_none=True) == {
        "check": "gpu.driver",
        "status": "fail",
        "detail": "nvidia-smi not found",
        "fix": "install the driver",
        "required": True,
        "commands": [],
    }


def test_the_fix_commands_travel_whole_and_are_not_shared() -> None:
    command = "sudo apt install nvidia-driver-580-server && sudo reboot"
    finding = Finding(check="gpu.driver", status=Status.FAIL, detail="no GPU", fix=f"or: {command}", commands=[command])
    assert Finding.model_validate(finding.model_dump(mode="json")) == finding
    assert finding.commands == [command]
    assert Finding(check="a", status=Status.OK, detail="").commands == []


def test_a_check_names_its_id_and_title_once_for_every_outcome() -> None:
    check = Check("torch.capability", "torch and nvidia-smi agree", required=False)
    outcomes = [
        check.ok("same"),
        check.warn("differs", fix="set the order"),
        check.unknown("not reported"),
        check.fail("broken", fix="reinstall", commands=["pip install torch"], state="cpu-torch-under-cuda-vllm"),
    ]
    assert [finding.status for finding in outcomes] == [Status.OK, Status.WARN, Status.UNKNOWN, Status.FAIL]
    assert {(finding.check, finding.title, finding.required) for finding in outcomes} == {
        ("torch.capability", "torch and nvidia-smi agree", False)
    }
    assert outcomes[1].fix == "set the order"
    assert outcomes[3].model_dump(mode="json") == {
        "check": "torch.capability",
        "status": "fail",
        "detail": "broken",
        "fix": "reinstall",
        "title": "torch and nvidia-smi agree",
        "required": False,
        "where": None,
        "state": "cpu-torch-under-cuda-vllm",
        "commands": ["pip install torch"],
    }
    assert Check("vllm.platform", "vLLM's platform").unknown("not asked", required=False).required is False
    assert Check("a", "A", required=False).finding(Status.FAIL, "x", required=True).blocks


def test_a_check_made_per_item_names_the_item_in_its_id_and_where() -> None:
    quota = Check("quota", "The quota holds it", required=False)
    finding = quota.at("us-east-1").unknown("access denied")
    assert (finding.check, finding.where, finding.title, finding.required) == (
        "quota:us-east-1",
        "us-east-1",
        "The quota holds it",
        False,
    )
    assert quota.ok("fine").where is None  # the check itself stays about no item
