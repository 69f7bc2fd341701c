"""Shell completion, as the README documents it: click's protocol through the real entry point."""

from __future__ import annotations

import os
import subprocess
import sys


def _complete(words: str) -> list[str]:
    # COMP_CWORD is the index of the word being completed: a new one after a trailing space.
    current = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = dict(os.environ, _GEMMASERVE_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(current))
    out = subprocess.run(
        [sys.executable, "-m", "gemmaserve"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return [line.split(",", 1)[1] for line in out.splitlines() if "," in line]


def test_bash_source_prints_a_completion_function() -> None:
    env = dict(os.environ, _GEMMASERVE_COMPLETE="bash_source")
    out = subprocess.run([sys.executable, "-m", "gemmaserve"], env=env, capture_output=True, text=True, check=True)
    assert "_gemmaserve_completion()" in out.stdout


def test_commands_options_and_choices_complete() -> None:
    assert _complete("gemmaserve se") == ["serve"]
    assert _complete("gemmaserve serve st") == ["start", "status", "stop"]
    assert "--max-model-len" in _complete("gemmaserve plan --max-m")
    assert _complete("gemmaserve plan --platform ") == ["ec2", "sagemaker"]
