"""The GPU engine check's own logic, on real vLLM log lines and the completions wire format (no engine here)."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "turing_engine_check.py"


@pytest.fixture(scope="module")
def check() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("turing_engine_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["turing_engine_check"] = module
    spec.loader.exec_module(module)
    return module


# Lines as vLLM 0.32 (CPU) wrote them in a real run, and as the plugin writes them before vLLM's
# logging is configured (the API server) and on a GPU with the diagnostic setting.
LOG = """\
INFO 12-03 03:02:42 [gemmaserve] gemmaserve turing plugin (pid 4786): wrapped: Turing clamp active on sm_75
(APIServer pid=4786) INFO 12-03 02:53:42 [model.py:733] Resolved architecture: Gemma4ForCausalLM
(EngineCore pid=4852) WARNING 12-03 02:53:49 [plugin.py:120] gemmaserve: DIAGNOSTIC GEMMASERVE_TURING_DIAG_SMEM_LIMIT=65536 is set
(EngineCore pid=4852) INFO 12-03 02:53:49 [plugin.py:193] gemmaserve turing plugin (pid 4852): wrapped: Turing clamp active
(VllmWorker-0 pid=4929) INFO 12-03 02:53:55 [plugin.py:193] gemmaserve turing plugin (pid 4929): not-cuda: platform cpu
(EngineCore pid=4852) INFO 12-03 02:54:10 [plugin.py:215] gemmaserve turing plugin (pid 4852): launch changed: head 512 prefill tile 32 -> 16
(EngineCore pid=4852) INFO 12-03 02:54:10 [plugin.py:215] gemmaserve turing plugin (pid 4852): launch changed: head 512 tile 16 2D launch num_warps 4 -> 8
(APIServer pid=4786) ERROR 12-03 02:55:01 [async_llm.py:906] Traceback (most recent call last):
"""


def test_plugin_evidence_groups_lines_by_process(check: types.ModuleType) -> None:
    serving = LOG.split("(APIServer pid=4786) ERROR")[0]
    found = check.plugin_evidence(LOG, 4786, serving)
    assert [p["process"] for p in found["processes"]] == ["APIServer", "EngineCore", "VllmWorker-0"]
    assert found["api_server_ran_plugin"] and found["engine_core_ran_plugin"] and found["diagnostic_warning"]
    assert found["head512_tile_clamped"]
    assert found["warps_changed"] == ["head 512 tile 16 2D launch num_warps 4 -> 8"]
    assert found["other_processes_ran_plugin"] == ["VllmWorker-0"]
    assert found["engine_errors"] == []  # the traceback came after the stop
    assert len(check.plugin_evidence(LOG, 4786, LOG)["engine_errors"]) == 1


def _answer(tokens: list[str], logprobs: list[float], tops: list[dict[str, float]]) -> dict[str, object]:
    return {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": tops}


def test_compare_identical_and_first_difference(check: types.ModuleType) -> None:
    a = _answer(
        ["token_id:5", "token_id:9"],
        [-0.1, -0.2],
        [{"token_id:5": -0.1, "token_id:7": -2.0}, {"token_id:9": -0.2, "token_id:4": -0.25}],
    )
    assert check.compare(a, a) == {
        "comparable": True,
        "identical": True,
        "tokens": 2,
        "max_abs_logprob_difference": 0.0,
    }
    b = _answer(
        ["token_id:5", "token_id:4"], [-0.1, -0.21], [{"token_id:5": -0.1}, {"token_id:4": -0.21, "token_id:9": -0.23}]
    )
    verdict = check.compare(a, b)
    assert verdict["first_difference_at"] == 1 and verdict["stock_token"] == "token_id:9"
    assert verdict["stock_gap"] == pytest.approx(0.05) and verdict["clamped_gap"] == pytest.approx(0.02)
    assert check.compare({"error": {"http_error": 400}}, a)["comparable"] is False


def test_the_checkpoint_it_writes_tokenizes_bytes(check: types.ModuleType, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    config = check.write_checkpoint(tmp_path, "tiny")
    assert config["global_head_dim"] == 512 and config["head_dim"] == 256
    assert config["num_attention_heads"] // config["num_key_value_heads"] == 8  # BLOCK_M 16, as in Gemma 4
    tokenizer = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    encoded = tokenizer.encode("Gemma 4 on a T4")
    assert encoded.ids[0] == check.BOS and len(encoded.ids) == 1 + len("Gemma 4 on a T4")
    assert tokenizer.decode(encoded.ids) == "Gemma 4 on a T4"
    assert max(encoded.ids) < config["vocab_size"]
    assert len(check.PROMPTS[-1]) > config["sliding_window"]  # one token per byte: past the window
    json.loads((tmp_path / "tokenizer_config.json").read_text())


def test_random_weights_are_seeded_and_not_flat(check: types.ModuleType, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from safetensors.torch import load_file

    config = check.write_checkpoint(tmp_path, "tiny")
    written = check.write_weights(tmp_path, config, seed=0)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    shapes = check.weight_shapes(config)
    assert sorted(tensors) == sorted(name for name, _, _ in shapes)
    assert written == sum(t.numel() * 2 for t in tensors.values())
    assert tuple(tensors["model.layers.1.self_attn.q_proj.weight"].shape) == (8 * 512, 256)  # global head 512
    assert tuple(tensors["model.layers.3.mlp.gate_proj.weight"].shape) == (2 * 512, 256)  # KV-shared: double wide
    assert float(tensors["model.norm.weight"].float().min()) == 1.0
    assert 0.015 < float(tensors["model.embed_tokens.weight"].float().std()) < 0.025
    again = tmp_path / "again"
    check.write_checkpoint(again, "tiny")
    check.write_weights(again, config, seed=0)
    assert (again / "model.safetensors").read_bytes() == (tmp_path / "model.safetensors").read_bytes()
