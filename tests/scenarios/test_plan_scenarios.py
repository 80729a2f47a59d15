"""Acceptance scenarios S1 and S3 (../shared/scenarios.md) through the real CLI."""

import json

from tests.conftest import SCENARIOS, run_cli


def _plan(*args):
    proc = run_cli("plan", *args, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_s1_start_up_failure_is_the_profile_run():
    rc, d = _plan(str(SCENARIOS / "s1" / "start_api.sh"), "--model", str(SCENARIOS / "s1" / "model"), "--gpu", "A100-80GB")
    assert rc == 1 and d["starts"] is False
    # a token budget equal to the 1M context: the profile run materialises 1M tokens of activations
    assert d["failure"] == "profile-oom"
    assert d["per_gpu"]["activation_peak_gib"] > 79.15
    assert d["max_num_batched_tokens"] == 1048576


def test_s1_chunked_prefill_moves_the_failure_to_kv_capacity():
    rc, d = _plan(str(SCENARIOS / "s1" / "start_api.sh"), "--model", str(SCENARIOS / "s1" / "model"), "--gpu", "A100-80GB",
                  "--max-num-batched-tokens", "8192")
    assert d["per_gpu"]["activation_peak_gib"] < 3
    # the first 1M request needs 56 GiB of bf16 KV; the pool holds a little less
    assert d["failure"] == "kv-too-small"
    assert d["one_request_kv_gib"] == 56.0
    assert 1_000_000 < d["max_fitting_model_len"] < 1_048_576
    rc, d = _plan(str(SCENARIOS / "s1" / "start_api.sh"), "--model", str(SCENARIOS / "s1" / "model"), "--gpu", "A100-80GB",
                  "--max-num-batched-tokens", "8192", "--kv-cache-dtype", "fp8")
    assert rc == 0 and d["starts"] and d["max_concurrency"] >= 1.0


def test_s3_kv_cache_size_327680_tokens():
    rc, d = _plan(str(SCENARIOS / "s3" / "start_api.sh"), "--model", str(SCENARIOS / "s3" / "model"), "--gpu", "RTX-4090",
                  "--num-gpus", "4", "--lenient", "--vllm-version", "0.25")
    assert d["kv_bytes_per_token"] == 32768  # 64 × 2 × (8/4) × 128 × 1
    assert d["per_gpu"]["kv_cache_gib"] == 10.0
    assert d["kv_cache_tokens"] == 327680
    assert "GPU KV cache size: 327,680 tokens" in d["log_lines"]
    # one 750,000-token request does not fit on the GPUs: it needs the CPU tier
    assert d["failure"] == "kv-too-small" and d["one_request_kv_gib"] > 10
    assert any("--rope-scaling" in n for n in d["launch_notes"])


def test_s3_newest_version_needs_long_max_model_len():
    rc, d = _plan(str(SCENARIOS / "s3" / "start_api.sh"), "--model", str(SCENARIOS / "s3" / "model"), "--gpu", "RTX-4090",
                  "--num-gpus", "4", "--lenient")
    # >= 0.30 treats YaRN's max_position_embeddings as already scaled (vllm-memory.md §3.2)
    assert d["failure"] == "max-len-exceeds-model"
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in d["error"]
    assert d["kv_cache_tokens"] == 327680
