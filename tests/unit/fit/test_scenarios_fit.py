"""Acceptance scenarios S1-S3 (../shared/scenarios.md) for ``oomguard fit``, through the CLI.

S1's model is tests/scenarios/s1/model: the Qwen2.5-7B-Instruct-1M layout with a 1,048,576-token
max_position_embeddings (the scenario names no model). S2's launch (tests/scenarios/s2) serves
CodeLlama-13B at TP 8; the brief's Llama-2-13b-chat-hf is checked without --from. S3's model is the
64-layer / 8 KV heads / head_dim 128 AWQ layout the scenario's arithmetic uses.
"""

from __future__ import annotations

import json

from oomguard.cli.main import main
from oomguard.fit.roofline import prefill_steps
from tests.conftest import SCENARIOS

S1 = ["--from", str(SCENARIOS / "s1" / "start_api.sh"), "--model", str(SCENARIOS / "s1" / "model"), "--gpu", "A100-80GB"]
S2 = ["--from", str(SCENARIOS / "s2" / "start_api.sh"), "--gpu", "RTX-3090", "--num-gpus", "8"]
S3 = ["--from", str(SCENARIOS / "s3" / "start_api.sh"), "--model", str(SCENARIOS / "s3" / "model"), "--gpu", "RTX-4090", "--num-gpus", "4", "--lenient"]
ONE_M = 1_048_576


def _fit(capsys, *args) -> tuple[int, dict]:
    rc = main(["fit", *args, "--format", "json"])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    return rc, json.loads(out)


def test_s1_from_launch_holds_one_1m_request_with_a_chunk_size(capsys):
    rc, d = _fit(capsys, *S1)
    assert rc == 0
    assert d["launch"]["starts"] is False and d["launch"]["failure"] == "profile-oom"
    best = d["candidates"][0]
    p = best["plan"]
    assert p["starts"] is True
    assert p["max_model_len"] == ONE_M
    assert p["max_concurrency"] >= 1.0 and p["kv_cache_tokens"] >= ONE_M  # holds one 1M request
    # the edit chunks the prefill: one flag, a token budget in the 256-16384 ladder
    assert [e["dest"] for e in best["edit"]] == ["max_num_batched_tokens"]
    chunk = best["flags"]["max_num_batched_tokens"]
    assert 256 <= chunk <= 16384 and f"--max-num-batched-tokens {chunk}" in best["command"]
    assert any(f"{prefill_steps(ONE_M, chunk):,} steps of {chunk:,}" in t for t in best["tradeoffs"])
    # the rest of the launch is kept as written
    assert "--enable-prefix-caching" in best["command"] and "--enforce-eager" in best["command"]
    assert best["command"].startswith("vllm serve /models/qwen-1m ")


def test_s1_peak_under_75_gb_needs_fp8_kv(capsys):
    # the operators' success criterion: nvidia-smi peak under 75 GB (≈ 69.8 GiB); bf16 KV for 1M tokens alone is 56 GiB
    rc, d = _fit(capsys, *S1, "--peak-limit-gib", "69.8")
    assert rc == 0
    best = d["candidates"][0]
    assert best["summary"]["peak_gib"] <= 69.8
    assert str(best["flags"].get("kv_cache_dtype", "")).startswith("fp8")
    assert best["plan"]["max_concurrency"] >= 1.0
    text = " ".join(best["tradeoffs"])
    assert "accuracy" in text and "no FP8 tensor cores" in text  # A100: memory saving, not FP8 compute


def test_s2_latency_picks_a_small_token_budget_and_shows_its_cost(capsys):
    rc, d = _fit(capsys, *S2, "--objective", "latency")
    assert rc == 0
    best = d["candidates"][0]
    assert best["plan"]["starts"] and best["plan"]["tensor_parallel_size"] == 8 and best["plan"]["max_model_len"] == 8192
    T = best["flags"]["max_num_batched_tokens"]
    assert T <= 1024
    cost = next(t for t in best["tradeoffs"] if t.startswith(f"a token budget of {T:,}"))
    assert "prefill throughput" in cost and "costs" in cost and "estimate, roofline, ±50%" in cost
    assert any(e["dest"] == "max_num_batched_tokens" for e in best["edit"])


def test_s2_llama2_13b_latency_without_a_launch(capsys):
    rc, d = _fit(capsys, "--model", "meta-llama/Llama-2-13b-chat-hf", "--gpu", "RTX-3090", "--num-gpus", "8", "--context", "4096", "--objective", "latency")
    assert rc == 0
    best = d["candidates"][0]
    assert best["flags"]["max_num_batched_tokens"] <= 1024
    assert any("token budget of" in t for t in best["tradeoffs"])


def test_beyond_native_length_without_a_recipe_is_not_offered(capsys):
    # Llama-2 has 4,096 positions and no published RoPE-scaling recipe: no bare VLLM_ALLOW_LONG_MAX_MODEL_LEN
    rc, d = _fit(capsys, "--model", "meta-llama/Llama-2-13b-chat-hf", "--gpu", "RTX-3090", "--num-gpus", "8", "--context", "8192")
    assert rc == 1 and d["candidates"] == []
    assert all("VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in c["command"] for c in d.get("closest", []))
    assert all(c["plan"]["max_model_len"] <= 4096 for c in d.get("closest", []))
    assert any("no published RoPE-scaling recipe" in n for n in d["notes"])


def test_readme_example_uses_the_models_yarn_recipe_and_its_fp8_checkpoint(capsys):
    rc, d = _fit(capsys, "--model", "Qwen/Qwen3-32B", "--gpu", "RTX-4090", "--num-gpus", "4", "--context", "131072", "--objective", "max-concurrency")
    assert rc == 0
    best = d["candidates"][0]
    rope = best["flags"]["hf_overrides"]["rope_scaling"]
    assert rope == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert best["flags"]["max_num_batched_tokens"] >= 1024  # S2: 256 halves throughput
    assert best["summary"]["margin_gib"] >= 0.5 and best["summary"]["spare_kv_gib"] > 0  # the goal fits, above the headroom floor
    ck = d["checkpoints"]
    assert ck and ck[0]["command"].split()[2] == "Qwen/Qwen3-32B-FP8" or "Qwen/Qwen3-32B-FP8" in ck[0]["command"]
    assert ck[0]["summary"]["kv_cache_tokens"] > best["summary"]["kv_cache_tokens"]
    assert "FP8 checkpoint of the same model" in ck[0]["tradeoffs"][0]


def test_70b_on_two_h100_keeps_headroom(capsys):
    rc, d = _fit(capsys, "--model", "meta-llama/Meta-Llama-3.1-70B", "--gpu", "H100", "--num-gpus", "2", "--context", "32768")
    assert rc == 0
    for c in d["candidates"]:
        assert c["summary"]["margin_gib"] >= 0.02 * 79.1 - 0.01  # the headroom floor: 2 % of the card
        assert c["flags"]["max_num_batched_tokens"] >= 1024


def test_s3_one_full_request_needs_the_cpu_tier_sized_against_host_ram(capsys):
    rc, d = _fit(capsys, *S3, "--host-ram-gib", "256")
    tier = d["cpu_tier"]
    assert tier["needs_cpu_tier"] is True
    assert tier["bytes_per_token"] == 131072  # 64 × 2 × 8 × 128 × 1 (fp8), over the 4 GPUs
    assert tier["one_request_bytes"] == 750_000 * 131072  # 91.55 GiB
    assert tier["gpu_max_len"] < 750_000
    text = " ".join(tier["lines"])
    assert "needs the CPU tier" in text and "totals over all workers" in text
    assert "92 forward steps" in text  # 750,000 tokens at 8,192 per step
    # host.ram_model on the newest release: the 200 GiB tier is one exact-size /dev/shm file, so the server
    # holds 216.07 GiB (the same figure as check's and host's host_ram) and fits a 256 GiB host.
    assert tier["launch_cpu_bytes"] == 214748364800 and round(tier["host_need_bytes"] / 2**30, 2) == 216.07
    assert "fits" in text and "does NOT fit" not in text
    assert rc == 1 and d["goal_met"] is False  # the candidates lower 750,000: the goal is not met (fit exits 1, as --model would)
    best = d["candidates"][0]
    assert best["plan"]["starts"] and best["plan"]["max_model_len"] < 750_000
    cpu = best["flags"]["kv_transfer_config"]["kv_connector_extra_config"]["cpu_bytes_to_use"]
    assert cpu == 214748364800  # the user's tier is kept: it fits
    # On a 200 GiB host it does not: the tier shrinks to what fits next to the rest (a whole GiB from 0.27).
    rc, d = _fit(capsys, *S3, "--host-ram-gib", "200")
    tier = d["cpu_tier"]
    # the size check and host propose too: 85 % of 200 GiB - 16.07 (workers, API server, token ids), whole GiB
    assert "does NOT fit" in " ".join(tier["lines"]) and tier["largest_fit_bytes"] == 153 * 2**30


def test_s3_without_host_ram_asks_for_it(capsys):
    rc, d = _fit(capsys, *S3)
    assert any("--host-ram-gib" in line for line in d["cpu_tier"]["lines"])
