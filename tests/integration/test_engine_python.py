"""``--engine-python``: the real vLLM CPU build resolves the engine defaults."""

import json

import pytest

from tests.conftest import run_cli


@pytest.mark.vllm
def test_engine_python_resolves_defaults(vllm_venv):
    py = vllm_venv / "bin" / "python"
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--engine-python", str(py), "--json", timeout=300)
    assert p.returncode in (0, 1), p.stderr
    d = json.loads(p.stdout)
    assert d["vllm_version"] == "0.32.0"
    assert any("--engine-python" in n for n in d["launch_notes"])
    # the CPU platform's own defaults (not the GPU tier table) came back from vLLM
    assert d["max_num_batched_tokens"] > 0 and d["max_num_seqs"] > 0


def test_engine_python_missing_interpreter():
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--engine-python", "/nonexistent/python")
    assert p.returncode == 2 and "no such interpreter" in p.stderr
