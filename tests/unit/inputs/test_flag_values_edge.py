"""Flag values read as vLLM's argparse reads them (found by the fuzz campaign), through the real CLI."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def test_an_option_is_not_taken_as_the_previous_flags_value(tmp_path):
    # `--hf-overrides --api-key K`: argparse says "expected one argument"; oomguard took "--api-key"
    # as the JSON and K became the model, which export then printed.
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve Qwen/Qwen3-8B --hf-overrides --api-key sk-secret-value-123\n")
    p = run_cli("plan", str(script), "--gpu", "H100", env={"HF_HUB_OFFLINE": "1"})
    assert p.returncode == 2 and "--hf-overrides expects a value" in p.stderr
    e = run_cli("export", "launch", str(script), "--to", "kubernetes", env={"HF_HUB_OFFLINE": "1"})
    assert "sk-secret-value-123" not in e.stdout + e.stderr


def test_max_model_len_minus_one_is_auto_as_in_vllm():
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "-1", "--json",
                env={"HF_HUB_OFFLINE": "1"})
    assert p.returncode in (0, 1), p.stderr
    assert json.loads(p.stdout)["max_model_len"] > 0
