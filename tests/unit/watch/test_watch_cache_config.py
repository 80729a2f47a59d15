"""vllm:cache_config_info read per release, and set against the plan (tokens, blocks, concurrency)."""

from __future__ import annotations

from pathlib import Path

from oomguard.probe.metrics import cache_config_values, parse_metrics
from oomguard.watch.drift import DriftCheck, PlanReference
from oomguard.watch.state import WatchState

DATA = Path(__file__).parent / "data"


def _info(engine: str, **labels) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in {**labels, "engine": engine}.items())
    return "vllm:cache_config_info{" + body + "} 1.0\n"


HEAD = "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n"


def test_recorded_0_32_scrape_gives_vllm_s_own_pool_and_concurrency():
    r = parse_metrics((DATA / "vllm-0.32.0-metrics.txt").read_text())
    assert (r.kv_cache_tokens, r.num_gpu_blocks, r.block_size, r.kv_cache_max_concurrency) == (131072, 1024, 128, 128.0)
    assert cache_config_values(r) == {"kv_cache_tokens": 131072.0, "kv_num_gpu_blocks": 1024.0, "kv_block_size": 128.0, "kv_max_concurrency": 128.0}


def test_before_0_24_blocks_times_block_size_and_the_dp_sum():
    # 0.20-0.23: no kv_cache_size_tokens; num_gpu_blocks is summed over the DP engines (core_client.py).
    text = HEAD + _info("0", block_size=16, num_gpu_blocks=2000) + _info("1", block_size=16, num_gpu_blocks=2000)
    r = parse_metrics(text)
    assert r.num_engines == 2 and r.kv_cache_tokens == 16000 and r.num_gpu_blocks_per_engine == 1000
    assert "kv_max_concurrency" not in cache_config_values(r)


def _state(values: dict) -> WatchState:
    from oomguard.probe.classes import Source
    from oomguard.probe.samplers import Sample

    st = WatchState()
    st.ingest(1.0, [Sample(1.0, Source.METRICS, "engine", values)])
    return st


def test_drift_on_tokens_blocks_and_concurrency():
    plan = PlanReference(kv_cache_tokens=131072, budget_bytes_per_gpu=[], max_concurrency=128.0, num_gpu_blocks=1024, block_size=128)
    ok = DriftCheck(plan)
    assert ok.check(1.0, _state({"kv_cache_tokens": 131072, "kv_num_gpu_blocks": 1024, "kv_block_size": 128, "kv_max_concurrency": 128.0})) == []
    bad = DriftCheck(PlanReference(kv_cache_tokens=131072, budget_bytes_per_gpu=[], max_concurrency=128.0, num_gpu_blocks=1024, block_size=128))
    st = _state({"kv_cache_tokens": 98304, "kv_num_gpu_blocks": 768, "kv_block_size": 128, "kv_max_concurrency": 96.0})
    events = bad.check(1.0, st)
    text = " ".join(e.message for e in events)
    assert len(events) == 3 and "KV pool drift" in text and "KV blocks drift" in text and "maximum concurrency drift" in text
    j = bad.to_json(st)
    assert (j["live_num_gpu_blocks"], j["live_max_concurrency"], j["predicted_num_gpu_blocks"]) == (768, 96.0, 1024)
    assert bad.check(2.0, st) == []  # each reported once


def test_blocks_of_another_size_are_not_compared():
    plan = PlanReference(kv_cache_tokens=131072, budget_bytes_per_gpu=[], num_gpu_blocks=8192, block_size=16)
    d = DriftCheck(plan)
    assert d.check(1.0, _state({"kv_cache_tokens": 131072, "kv_num_gpu_blocks": 1024, "kv_block_size": 128})) == []
    assert any("blocks not compared" in n for n in d.plan.notes)


def test_probe_verdict_sets_blocks_and_concurrency_against_the_plan():
    from oomguard.probe.verdict import PlanNumbers, compare_plan

    plan = PlanNumbers(131072, 128.0, 128, "plan", 1024)
    out = compare_plan(
        plan,
        claimed_concurrency=8,
        tokens_per_request=1024,
        observed_peak_usage=None,
        observed_kv_cache_tokens=98304,
        observed_cache_config={"kv_cache_tokens": 98304.0, "kv_num_gpu_blocks": 768.0, "kv_block_size": 128.0, "kv_max_concurrency": 96.0},
    )
    assert out["observed_num_gpu_blocks"] == 768.0 and out["predicted_num_gpu_blocks"] == 1024
    assert out["observed_max_concurrency"] == 96.0
    assert "maximum concurrency of 96.00x (plan 128.00x, -25.0%)" in out["summary"] and "768 KV blocks of 128 tokens (plan 1,024)" in out["summary"]
