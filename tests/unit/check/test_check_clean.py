"""No false alarms: ordinary launches get no error (and the noisy rules stay quiet)."""

from __future__ import annotations

import pytest

from tests.unit.check.conftest import FIXTURES, check, rules_of

CLEAN = [
    (dict(gpu="H100"), "vllm serve Qwen/Qwen3-8B"),
    (dict(gpu="A100-80GB"), "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768"),
    (dict(gpu="A100-80GB", num_gpus=2), "vllm serve Qwen/Qwen3-32B --tensor-parallel-size 2"),
    (dict(gpu="L40S"), "vllm serve Qwen/Qwen3-30B-A3B-FP8 --max-model-len 16384"),
    (dict(gpu="RTX-4090"), "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 16384 --gpu-memory-utilization 0.95"),
    (dict(gpu="H100", num_gpus=4), "vllm serve Qwen/Qwen3-235B-A22B-FP8 --tensor-parallel-size 4 --enable-expert-parallel --max-model-len 32768"),
    (dict(gpu="A10G"), "vllm serve Qwen/Qwen2.5-3B-Instruct"),
    (dict(gpu="T4"), "vllm serve Qwen/Qwen2.5-1.5B-Instruct --dtype half --max-model-len 8192"),
    (dict(gpu="H200", num_gpus=2), "vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 2 --max-model-len 65536"),
    (dict(gpu="A100-40GB"), "vllm serve google/gemma-2-9b-it"),
    (dict(gpu="A100-80GB", version="0.8.5.post1"), "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 16384"),
    (dict(gpu="A100-80GB", version="0.6.6.post1"), "python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct --max-model-len 16384"),
    (dict(gpu="H100"), "vllm serve openai/gpt-oss-20b --max-model-len 32768"),
]


@pytest.mark.parametrize("options,command", CLEAN, ids=[c for _, c in CLEAN])
def test_ordinary_launch_has_no_error(options, command):
    rep = check(command, **options)
    assert rep.errors == [], [(f.rule, f.message) for f in rep.errors]
    assert rep.ctx.plan is not None and rep.ctx.plan.starts
    # V0 leaves chunked prefill off up to 32K: that launch starts, and OG103 warns about the
    # run-time staircase of whole-prompt prefill steps (scenario S2); nothing else may warn
    allowed = {"OG103"} if rep.ctx.plan.settings.engine == "V0" and not rep.ctx.plan.settings.enable_chunked_prefill else set()
    assert [f for f in rep.warnings if f.rule not in allowed] == [], [(f.rule, f.message) for f in rep.warnings]


def test_clean_yaml_has_no_error():
    rep = check(path=FIXTURES / "clean.yaml", gpu="A100-80GB")
    assert rep.errors == [] and rep.warnings == []
    assert rules_of(rep) == {"OG901"}  # prefix caching given explicitly: info only
    assert rep.fixed_text is None


def test_clean_script_has_nothing_to_fix():
    rep = check(path=FIXTURES / "clean_h100.sh", gpu="H100")
    assert rep.findings == [] and rep.fixed_text is None and rep.exit_code() == 0
