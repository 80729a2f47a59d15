"""The fast evaluator agrees with plan_launch: same verdict, blocks, tokens, one-request bytes."""

from __future__ import annotations

import random
import zlib

import pytest

from oomguard.fit.search import capacity, evaluate, kv_bytes_for, make_base, make_step, max_len
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.failures import FailureClass
from oomguard.model.planner import plan_launch
from oomguard.units import GiB

# (model, GPU, GPUs, vLLM version): dense, MoE, hybrid GDN, sliding window, MLA, AWQ, old engines
CASES = [
    ("Qwen/Qwen2.5-7B-Instruct", "A100-80GB", 1, None),
    ("Qwen/Qwen3-30B-A3B", "H100", 2, None),
    ("Qwen/Qwen3.5-9B", "RTX-4090", 2, None),
    ("google/gemma-3-27b-it", "A100-80GB", 4, None),
    ("meta-llama/Llama-2-13b-chat-hf", "RTX-3090", 8, None),
    ("meta-llama/Llama-2-13b-chat-hf", "RTX-3090", 8, "0.6.6"),
    ("meta-llama/Llama-2-13b-chat-hf", "RTX-3090", 8, "0.8.5"),
    ("deepseek-ai/DeepSeek-V3", "H200", 8, None),
    ("Qwen/Qwen3-32B", "RTX-4090", 4, "0.15.0"),
    ("openai/gpt-oss-20b", "L4", 2, "0.10.2"),
]


def _sample(rng: random.Random, n_gpus: int) -> tuple[dict, dict, int]:
    tp = rng.choice([t for t in (1, 2, 4, 8) if t <= n_gpus])
    pp = rng.choice([p for p in (1, 2, 4) if tp * p <= n_gpus])
    T = rng.choice([256, 512, 2048, 8192, 16384])
    S = rng.choice([s for s in (1, 8, 64, 256, 1024) if s <= T])
    flags = {
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "kv_cache_dtype": rng.choice(["auto", "fp8"]),
        "enforce_eager": rng.random() < 0.5,
        "max_num_batched_tokens": T,
        "max_num_seqs": S,
        "gpu_memory_utilization": rng.choice([0.5, 0.8, 0.9, 0.95, 0.99]),
        "max_model_len": rng.choice([2048, 8192, 32768, 131072, 1048576]),
    }
    kv = rng.choice([None, None, 2 * GiB, 10 * GiB])
    if kv:
        flags["kv_cache_memory_bytes"] = kv
    env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"} if rng.random() < 0.5 else {}
    return flags, env, rng.choice([0, 0, GiB])


@pytest.mark.parametrize("model_id,gpu_name,n_gpus,version", CASES)
def test_fast_path_matches_plan_launch(model_id, gpu_name, n_gpus, version):
    model, gpu = load_model(model_id), lookup_gpu(gpu_name)
    rng = random.Random(zlib.crc32(f"{model_id}{version}".encode()))
    checked = 0
    for _ in range(25):
        flags, env, other = _sample(rng, n_gpus)
        plan = plan_launch(model, gpu, flags, env, version=version, num_gpus=n_gpus, other_gpu_use_bytes=other)
        # the base is planned with different cheap-axis values on purpose: they must not leak into the result
        ref = {**flags, "max_num_batched_tokens": 2048, "max_num_seqs": 16, "gpu_memory_utilization": 0.9, "max_model_len": 4096}
        ref.pop("kv_cache_memory_bytes", None)
        base = make_base(model, gpu, ref, env, version=version, num_gpus=n_gpus, other_gpu_use_bytes=other)
        step = make_step(model, gpu, flags, env, version=version, token_budget=flags["max_num_batched_tokens"], num_seqs=flags["max_num_seqs"])
        o = evaluate(base, step, flags["gpu_memory_utilization"], flags["max_model_len"], flags.get("kv_cache_memory_bytes"))
        assert o.failure == plan.failure, (flags, o.failure, plan.failure)
        assert o.num_blocks == plan.num_gpu_blocks
        assert o.kv_cache_tokens == plan.kv_cache_tokens
        assert o.one_request_bytes == plan.one_request_bytes
        assert o.requested_bytes == plan.tight_rank.requested_bytes
        assert o.tight_kv_bytes == plan.tight_rank.kv_bytes
        assert o.max_concurrency == pytest.approx(plan.max_concurrency)
        checked += 1
    assert checked == 25


@pytest.mark.parametrize("model_id,gpu_name,version", [("Qwen/Qwen2.5-7B-Instruct", "A100-80GB", None), ("Qwen/Qwen3.5-9B", "RTX-4090", None), ("google/gemma-3-27b-it", "H100", None)])
def test_max_len_is_vllm_auto_fit(model_id, gpu_name, version):
    """The largest length starts; one block more is kv-too-small; it equals the planner's own auto-fit."""
    model, gpu = load_model(model_id), lookup_gpu(gpu_name)
    env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    flags = {"max_num_batched_tokens": 2048, "max_num_seqs": 8, "gpu_memory_utilization": 0.9, "max_model_len": 4096}
    if model.is_multimodal:  # text-only serving: no vision-encoder profile (keeps room for a long context)
        flags["limit_mm_per_prompt"] = {"image": 0, "video": 0}
    base = make_base(model, gpu, flags, env, version=version, num_gpus=1)
    step = make_step(model, gpu, flags, env, version=version, token_budget=2048, num_seqs=8)
    cap = 4_000_000
    n = max_len(base, step, 0.9, cap=cap)
    assert 4096 < n < cap
    assert evaluate(base, step, 0.9, n).failure is None
    assert evaluate(base, step, 0.9, n + base.block_size).failure is FailureClass.KV_TOO_SMALL
    plan = plan_launch(model, gpu, {**flags, "max_model_len": n}, env, version=version)
    assert plan.starts and plan.max_fitting_len == n


def test_max_len_with_concurrency_and_reserve():
    model, gpu = load_model("Qwen/Qwen2.5-7B-Instruct"), lookup_gpu("A100-80GB")
    env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    flags = {"max_num_batched_tokens": 2048, "max_num_seqs": 8, "gpu_memory_utilization": 0.9, "max_model_len": 4096}
    base = make_base(model, gpu, flags, env, version=None, num_gpus=1)
    step = make_step(model, gpu, flags, env, version=None, token_budget=2048, num_seqs=8)
    one = max_len(base, step, 0.9, cap=10_000_000)
    four = max_len(base, step, 0.9, cap=10_000_000, concurrency=4)
    assert four <= one // 4 + base.block_size
    o = evaluate(base, step, 0.9, four)
    assert capacity(base, o, four, 2048) >= 4
    reserved = max_len(base, step, 0.9, cap=10_000_000, reserve_bytes=GiB)
    assert reserved < one


def test_pinned_kv_bytes_hold_the_goal():
    model, gpu = load_model("Qwen/Qwen2.5-7B-Instruct"), lookup_gpu("A100-80GB")
    flags = {"max_num_batched_tokens": 2048, "max_num_seqs": 16, "gpu_memory_utilization": 0.9, "max_model_len": 32768}
    base = make_base(model, gpu, flags, {}, version=None, num_gpus=1)
    step = make_step(model, gpu, flags, {}, version=None, token_budget=2048, num_seqs=16)
    kv = kv_bytes_for(base, 32768, 2048, concurrency=10, input_len=8192)
    assert kv % (256 * 2**20) == 0
    o = evaluate(base, step, 0.9, 32768, kv)
    assert o.failure is None
    assert capacity(base, o, 8192, 2048) >= 10
