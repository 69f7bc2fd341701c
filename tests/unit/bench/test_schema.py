from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemmaserve.errors import ResultFileInvalid
from gemmaserve.measurements import schema as s

from .test_schema_builders import as_dict, build_result

DOC = Path(__file__).resolve().parents[3] / "docs" / "bench-schema.md"


def test_save_then_load_gives_the_same_result(tmp_path: Path) -> None:
    result = build_result(correct=[True, True, False])
    path = tmp_path / "a.json"
    s.save_result(result, path)
    assert s.load_result(path) == result
    assert json.loads(path.read_text())["schema_version"] == s.SCHEMA_VERSION


@pytest.mark.parametrize("version", [0, 1, 3, "2", True, 1.5])
def test_other_schema_versions_are_refused_by_name(tmp_path: Path, version: object) -> None:
    data = as_dict(build_result())
    data["schema_version"] = version
    path = tmp_path / "a.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFileInvalid, match=r"schema_version .* reads version 2 only") as info:
        s.load_result(path)
    assert info.value.fields["path"] == str(path)


def test_missing_schema_version_points_at_import(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps({"date": "20261201", "output_throughput": 12.0}))
    with pytest.raises(ResultFileInvalid, match="no schema_version") as info:
        s.load_result(path)
    assert info.value.hint is not None and "bench import" in info.value.hint


def test_unknown_field_is_refused_with_its_location() -> None:
    data = as_dict(build_result())
    data["decode"]["rate_tok_s"] = 50.0
    with pytest.raises(ResultFileInvalid, match=r"decode\.rate_tok_s: Extra inputs are not permitted"):
        s.parse_result(data, source="x.json")


def test_wrong_type_is_refused() -> None:
    data = as_dict(build_result())
    data["requests"][0]["success"] = "maybe"
    with pytest.raises(ResultFileInvalid, match=r"requests\.0\.success"):
        s.parse_result(data)


def test_engine_facts_keep_unknown_keys() -> None:
    data = as_dict(build_result())
    data["engine_facts"]["prefix_cache_hit_rate"] = 0.5
    loaded = s.parse_result(data)
    assert loaded.engine_facts is not None
    assert loaded.engine_facts.model_dump()["prefix_cache_hit_rate"] == 0.5


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "is not JSON"), ("[1, 2]", "expected a JSON object")],
)
def test_malformed_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ResultFileInvalid, match=message):
        s.load_result(path)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ResultFileInvalid, match="does not exist"):
        s.load_result(tmp_path / "nope.json")


def test_an_interrupted_file_is_valid_and_says_what_is_missing() -> None:
    result = build_result()
    result.run.finished_at = None
    result.completeness = s.Completeness(
        planned=["decode", "load:1", "quality"], finished=["decode"], missing=["load:1", "quality"], interrupted=True
    )
    result.load = []
    assert s.parse_result(as_dict(result)).completeness.missing == ["load:1", "quality"]


def test_published_schema_doc_is_current() -> None:
    assert DOC.read_text() == s.render_schema_doc(), "run: python -m gemmaserve.measurements.schema"
