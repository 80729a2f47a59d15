"""fit's search end to end through the library: constraints hold, ranking follows the goal, --from edits are small."""

from __future__ import annotations

import pytest

from oomguard.fit.runner import FitRequest, fit
from oomguard.fit.space import Goal, Objective
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.launch import Launch
from oomguard.inputs.model_config import load_model
from oomguard.model.planner import plan_launch
from oomguard.units import GiB


def _req(model="Qwen/Qwen3-8B", gpu="A100-80GB", n=1, launch=None, top=3, **goal):
    return FitRequest(load_model(model), lookup_gpu(gpu), n, Goal(**goal), launch=launch, top=top)


def _launch(model: str, flags: dict, env: dict | None = None) -> Launch:
    return Launch("flags", None, model, flags=dict(flags), env=dict(env or {}))


def test_every_candidate_starts_and_meets_the_goal():
    r = fit(_req(context=32768, concurrency=16, avg_input_len=4096))
    assert r.found and r.searched > 1000
    for c in r.candidates:
        p = c.plan
        assert p.starts
        assert p.settings.max_model_len == 32768
        assert c.flags["max_num_seqs"] >= 16
        assert c.summary["capacity_at_input_len"] >= 16
        # margin: the card keeps at least 1 GiB free at the prefill peak
        assert c.summary["margin_gib"] >= 1.0
        # the plan JSON is the plan contract, and the command replays the flags
        d = c.to_dict()
        assert d["plan"]["starts"] is True and d["plan"]["max_model_len"] == 32768
        assert "--max-model-len 32768" in d["command"] and d["tradeoffs"]


def test_json_contract():
    d = fit(_req(context=8192)).to_dict()
    assert isinstance(d["searched"], int) and d["searched"] > 0
    c = d["candidates"][0]
    for key in ("command", "flags", "plan", "tradeoffs"):
        assert key in c
    assert isinstance(c["tradeoffs"], list) and all(isinstance(t, str) for t in c["tradeoffs"])
    assert c["plan"]["schema_version"] == 1
    assert any("estimate, roofline, ±50%" in t for t in c["tradeoffs"])


def test_peak_limit_is_respected():
    r = fit(_req(context=32768, peak_limit_bytes=60 * GiB))
    assert r.found
    assert all(c.summary["peak_gib"] <= 60 for c in r.candidates)
    assert all(c.flags["gpu_memory_utilization"] <= 0.8 or c.flags.get("kv_cache_memory_bytes") for c in r.candidates)


def test_max_context_is_the_edge_of_the_pool():
    # Llama-3.1-8B on a 24 GB card: the pool, not the model's 131,072, bounds the context
    model = "meta-llama/Llama-3.1-8B-Instruct"
    r = fit(_req(model=model, gpu="RTX-4090", max_context=True, objective=Objective.MAX_CONTEXT))
    assert r.found
    best = r.candidates[0]
    L = best.summary["max_model_len"]
    assert 32768 < L < 131072
    assert all(c.summary["max_model_len"] <= L * 1.031 for c in r.candidates)
    # a quarter longer, within the model's 131,072 (beyond it the failure would be the length's)
    longer = plan_launch(load_model(model), lookup_gpu("RTX-4090"), {**best.flags, "max_model_len": min(int(L * 1.25), 131072)}, {})
    assert not longer.starts and longer.failure.value == "kv-too-small"


def test_max_context_prefers_the_model_dtype_at_equal_length():
    # Qwen3-8B reaches its cap on an 80 GB card with either dtype: no reason to pay fp8's accuracy cost
    # (the cap is the model card's YaRN recipe, 32,768 × 4, which --max-context tries as --context does)
    r = fit(_req(max_context=True, objective=Objective.MAX_CONTEXT))
    assert r.candidates[0].summary["max_model_len"] == 131072
    assert r.candidates[0].flags.get("kv_cache_dtype", "auto") == "auto"


def test_none_fits_reports_why():
    r = fit(_req(model="meta-llama/Llama-2-70b-hf", gpu="RTX-3090", n=1, context=4096))
    assert not r.found and not r.candidates
    assert any(k.startswith("weights-oom") for k in r.rejected)


def test_closest_when_the_context_is_too_long():
    r = fit(_req(gpu="RTX-4090", context=40960, concurrency=4))
    assert not r.found
    assert r.closest and all(c.plan.starts and c.summary["max_model_len"] < 40960 for c in r.closest)


def test_latency_picks_a_small_token_budget():
    r = fit(_req(model="meta-llama/Llama-2-13b-chat-hf", gpu="RTX-3090", n=8, context=4096, objective=Objective.LATENCY))
    assert r.found
    assert r.candidates[0].flags["max_num_batched_tokens"] <= 1024
    assert r.candidates[0].flags.get("kv_cache_dtype", "auto") == "auto"  # fp8 only for a real latency gain
    assert any("token budget of" in t and "prefill throughput" in t for t in r.candidates[0].tradeoffs)


def test_fp8_tradeoff_is_accurate_on_ampere():
    # 8 × 8,192 tokens need ~9 GiB of bf16 KV; a 24 GB card has ~5 GiB left after the 8B weights
    r = fit(_req(gpu="RTX-3090", context=8192, concurrency=8, objective=Objective.MAX_CONCURRENCY))
    fp8 = [c for c in r.candidates if str(c.flags.get("kv_cache_dtype", "")).startswith("fp8")]
    assert fp8, "fp8 KV should be among the candidates for concurrency on a 24 GB card"
    text = " ".join(fp8[0].tradeoffs)
    assert "no FP8 tensor cores" in text and "saves memory, not compute" in text and "accuracy" in text


def test_from_launch_that_fits_needs_no_edit():
    launch = _launch("Qwen/Qwen3-8B", {"max_model_len": 16384, "gpu_memory_utilization": 0.85})
    r = fit(_req(launch=launch))
    assert r.found and r.launch_plan.starts
    assert r.candidates[0].edit == []


def test_from_launch_smallest_edit_chunks_the_prefill():
    # scenario S1's shape: a token budget as large as the context kills the profile run
    flags = {"max_model_len": 131072, "max_num_batched_tokens": 131072, "max_num_seqs": 1, "gpu_memory_utilization": 0.9}
    launch = _launch("Qwen/Qwen2.5-7B-Instruct", flags, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    r = fit(_req(model="Qwen/Qwen2.5-7B-Instruct", gpu="RTX-4090", launch=launch))
    assert not r.launch_plan.starts
    best = r.candidates[0]
    assert best.plan.starts and best.plan.settings.max_model_len == 131072 or any(c.dest == "max_model_len" for c in best.edit)
    dests = [c.dest for c in best.edit]
    assert "max_num_batched_tokens" in dests
    # fewest flags first: no candidate shown before it changes more flags
    assert len(best.edit) == min(len(c.edit) for c in r.candidates)


def test_from_launch_lowers_the_length_only_when_nothing_else_fits():
    launch = _launch("Qwen/Qwen3-8B", {"max_model_len": 40960, "gpu_memory_utilization": 0.9})
    r = fit(_req(gpu="RTX-3080", launch=launch))  # 10 GB: the 8B weights alone need ~15 GiB
    assert not r.found
    # 131,072 tokens need ~9 GiB of KV even in fp8: only a shorter max-model-len starts
    launch = _launch("Qwen/Qwen3-8B", {"max_model_len": 131072}, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    r = fit(_req(gpu="RTX-4090", launch=launch))
    assert r.found
    c = r.candidates[0]
    assert any(ch.dest == "max_model_len" and ch.new < 131072 for ch in c.edit)
    assert any("does not fit" in n for n in r.notes)


@pytest.mark.parametrize("objective", list(Objective))
def test_every_objective_returns_starting_launches(objective):
    r = fit(_req(gpu="L40S", context=16384, objective=objective, max_context=objective is Objective.MAX_CONTEXT))
    assert r.found and all(c.plan.starts for c in r.candidates)
