"""The search axes: parallel splits that divide the model, KV dtypes per GPU, the launch's own values."""

from __future__ import annotations

from oomguard.fit.space import FP8_KV, Goal, KVMemoryMode, build_space, kv_dtypes, parallel_splits
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.engine import parse_version
from oomguard.model.planner import plan_launch


def test_splits_divide_the_heads_and_use_all_gpus():
    m = load_model("meta-llama/Llama-2-13b-chat-hf")  # 40 heads, 40 KV heads
    splits = parallel_splits(m, 8)
    assert (8, 1) in splits and (4, 2) in splits and (1, 8) in splits
    assert all(tp * pp == 8 for tp, pp in splits)
    assert all(m.num_attention_heads % tp == 0 for tp, _ in splits)
    assert splits[0] == (8, 1)  # TP before PP


def test_splits_skip_tp_that_does_not_divide():
    m = load_model("Qwen/Qwen2.5-7B-Instruct")  # 28 heads, 4 KV heads
    splits = parallel_splits(m, 8)
    assert (8, 1) not in splits  # 28 % 8 != 0
    assert (4, 2) in splits and (2, 4) in splits


def test_smaller_world_when_nothing_uses_all():
    m = load_model("Qwen/Qwen2.5-7B-Instruct")
    splits = parallel_splits(m, 3)  # 28 heads: TP 3 impossible, PP 3 fine
    assert (1, 3) in splits


def test_fp8_kv_on_ampere_but_not_volta():
    m = load_model("Qwen/Qwen3-8B")
    assert FP8_KV in kv_dtypes(m, lookup_gpu("RTX-3090"))
    assert FP8_KV in kv_dtypes(m, lookup_gpu("H100"))
    assert kv_dtypes(m, lookup_gpu("V100-16GB")) == ["auto"]
    assert "fp8_e4m3" in kv_dtypes(m, lookup_gpu("RTX-4090"), "fp8_e4m3")


def test_launch_values_are_on_the_axes():
    m, g = load_model("Qwen/Qwen3-8B"), lookup_gpu("A100-80GB")
    flags = {"max_num_batched_tokens": 3000, "max_num_seqs": 77, "gpu_memory_utilization": 0.6, "kv_cache_memory_bytes": 5 << 30}
    plan = plan_launch(m, g, flags, {})
    sp = build_space(m, g, 1, launched_flags=flags, launched_settings=plan.settings, goal=Goal(concurrency=12), version=parse_version(None))
    assert 3000 in sp.token_budgets and 77 in sp.num_seqs and 12 in sp.num_seqs and 0.6 in sp.utilizations
    assert KVMemoryMode.PINNED_AS_LAUNCHED in sp.kv_memory_modes
    assert sp.launched_kv_memory_bytes == 5 << 30


def test_no_pinned_kv_before_0_10_2():
    m, g = load_model("Qwen/Qwen3-8B"), lookup_gpu("A100-80GB")
    sp = build_space(m, g, 1, goal=Goal(), version=parse_version("0.8.5"))
    assert sp.kv_memory_modes == (KVMemoryMode.PROFILED,)
    assert any("0.10.2" in n for n in sp.notes)
