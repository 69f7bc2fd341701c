from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gemmaserve.checkpoint import repack_checkpoint, validate_checkpoint
from gemmaserve.cli import app
from tests.support.checkpoint.builders import PREFIX


@pytest.fixture
def ct_dir(unquantized_dir: Path, tmp_path: Path) -> Path:
    repack_checkpoint(unquantized_dir, tmp_path / "ct")
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "ct", copy)  # a real copy: the tests edit it
    return copy


def _edit_config(root: Path, edit) -> None:  # type: ignore[no-untyped-def]
    config = json.loads((root / "config.json").read_text())
    edit(config)
    (root / "config.json").write_text(json.dumps(config))


def test_a_repacked_checkpoint_validates(ct_dir: Path, unquantized_dir: Path) -> None:
    assert validate_checkpoint(str(ct_dir)).findings == []
    assert validate_checkpoint(str(unquantized_dir)).ok


def test_a_linear_missing_from_the_ignore_list_is_an_error_with_the_fix(ct_dir: Path) -> None:
    _edit_config(ct_dir, lambda c: c["quantization_config"]["ignore"].remove(f"{PREFIX}.per_layer_model_projection"))
    report = validate_checkpoint(str(ct_dir))
    assert not report.ok
    [finding] = [f for f in report.findings if f.check == "ignore"]
    assert "per_layer_model_projection" in finding.detail and "Add" in finding.fix
    assert finding.where == f"{PREFIX}.per_layer_model_projection"


def test_packed_module_in_ignore_list_and_wrong_group_size(ct_dir: Path) -> None:
    def edit(c: dict) -> None:
        c["quantization_config"]["ignore"].append(f"{PREFIX}.layers.0.mlp.up_proj")
        c["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 64

    _edit_config(ct_dir, edit)
    checks = [(f.check, f.detail) for f in validate_checkpoint(str(ct_dir)).findings]
    assert any(c == "ignore" and "up_proj is stored packed" in m for c, m in checks)
    assert sum(c == "packed" for c, _ in checks) == 16


def test_index_and_layer_count_mismatches(ct_dir: Path) -> None:
    index = json.loads((ct_dir / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.ghost.weight"] = "model-00001-of-00003.safetensors"
    (ct_dir / "model.safetensors.index.json").write_text(json.dumps(index))
    _edit_config(ct_dir, lambda c: c["text_config"].update(num_hidden_layers=3))
    messages = [f.detail for f in validate_checkpoint(str(ct_dir)).findings]
    assert any("model.ghost.weight" in m for m in messages)
    assert any("[2]" in m and "num_hidden_layers=3" in m for m in messages)


def test_cli_json_and_exit_codes(ct_dir: Path, unquantized_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["checkpoint", "inspect", str(ct_dir), "--json"])
    assert result.exit_code == 0, result.output
    parts = {p["part"]: p for p in json.loads(result.stdout)["parts"]}
    assert parts["transformer_body"]["storage"]["packed int4"] > 0
    result = runner.invoke(
        app, ["checkpoint", "grid-check", str(ct_dir), "--reference", str(unquantized_dir), "--layers", "0", "--json"]
    )
    assert result.exit_code == 0 and json.loads(result.stdout)["verdict"] == "bit-identical"
    result = runner.invoke(
        app, ["checkpoint", "repack", str(unquantized_dir), str(tmp_path / "cli-out"), "--text-only", "--json"]
    )
    assert result.exit_code == 0 and json.loads(result.stdout)["tensors_dropped"] == 4
    for mode in ([], ["--json"]):
        assert runner.invoke(app, ["checkpoint", "validate", str(ct_dir), *mode]).exit_code == 0
    _edit_config(ct_dir, lambda c: c["quantization_config"].update(ignore=[]))
    assert runner.invoke(app, ["checkpoint", "validate", str(ct_dir)]).exit_code == 1


def test_cli_errors_are_messages_not_tracebacks(tmp_path: Path) -> None:
    from gemmaserve.cli import main

    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(SystemExit) as exit_info:
        main(["checkpoint", "inspect", str(bad)])
    assert exit_info.value.code == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["checkpoint", "inspect", "not a path or repo"])
    assert exit_info.value.code == 1


def test_an_index_naming_a_shard_outside_the_checkpoint_is_refused(ct_dir: Path) -> None:
    from gemmaserve.errors import MalformedCheckpoint

    index = json.loads((ct_dir / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.x.weight"] = "../../etc/passwd"
    (ct_dir / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(MalformedCheckpoint, match="outside the checkpoint"):
        validate_checkpoint(str(ct_dir))


def test_a_moe_router_stays_16_bit_and_is_ignored() -> None:
    from gemmaserve.checkpoint.header import TensorEntry
    from gemmaserve.checkpoint.repack import ignore_list, plan_tensor

    router = TensorEntry(f"{PREFIX}.layers.0.router.proj.weight", "BF16", (8, 64), "s", 0, 1024)
    q_proj = TensorEntry(f"{PREFIX}.layers.0.self_attn.q_proj.weight", "BF16", (64, 64), "s", 1024, 9216)
    plans = {e.name: plan_tensor(e, text_only=False, int4_embeddings=False) for e in (router, q_proj)}
    assert plans == {router.name: "keep", q_proj.name: "quantize"}
    assert f"{PREFIX}.layers.0.router.proj" in ignore_list([router, q_proj], plans)


def test_a_stray_dtype_is_a_warn_finding_that_passes_and_errors_are_fail(ct_dir: Path) -> None:
    from gemmaserve.findings import Status

    _edit_config(ct_dir, lambda c: c["text_config"].update(torch_dtype="float16"))
    report = validate_checkpoint(str(ct_dir))
    assert [(f.check, f.status) for f in report.findings] == [("dtype", Status.WARN)]
    assert report.ok
    _edit_config(ct_dir, lambda c: c["quantization_config"].update(ignore=[]))
    report = validate_checkpoint(str(ct_dir))
    assert not report.ok and {f.status for f in report.findings if f.check == "ignore"} == {Status.FAIL}


def test_validate_json_and_text_speak_the_finding_fields(ct_dir: Path) -> None:
    _edit_config(ct_dir, lambda c: c["quantization_config"].update(ignore=[]))
    runner = CliRunner()
    result = runner.invoke(app, ["checkpoint", "validate", str(ct_dir), "--json"])
    assert result.exit_code == 1 and json.loads(result.stdout)["ok"] is False
    finding = json.loads(result.stdout)["findings"][0]
    assert finding["check"] == "ignore" and finding["status"] == "fail"
    assert "not in the quantization ignore list" in finding["detail"] and finding["fix"].startswith("Add ")
    assert "level" not in finding and "message" not in finding
    assert finding["where"] and finding["detail"].startswith(finding["where"])  # the module it is about
    text = runner.invoke(app, ["checkpoint", "validate", str(ct_dir)]).output
    assert "\nfail: [ignore] " in text and "\n  fix: Add " in text
