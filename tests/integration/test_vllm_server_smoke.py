"""Smoke tests for the real vLLM 0.32 CPU server fixtures (tests/integration/vllm_server.py).

They prove the infrastructure other integration tests rely on: the server comes up on the tiny
model, serves the OpenAI API, exposes the Prometheus metrics oomguard reads, honours extra args
(--api-key) through the factory, and a doomed start-up is captured as a failing run with the
error text in its log.
"""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.vllm

# Tiny model: 2 layers x 2 (K,V) x 2 KV heads x 32 head_dim x 4 B (float32) per token.
from vllm_server import TINY_KV_BYTES_PER_TOKEN, TINY_KV_CACHE_BYTES  # noqa: E402
CPU_BLOCK_SIZE = 128  # vLLM's CPU platform default block size


def _metric_samples(text: str) -> dict[str, list]:
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def test_models_lists_served_name(vllm_server):
    resp = httpx.get(vllm_server.url("/v1/models"), timeout=10)
    assert resp.status_code == 200
    ids = [m["id"] for m in resp.json()["data"]]
    assert ids == ["tiny"]
    assert resp.json()["data"][0]["max_model_len"] == 1024


def test_chat_completion_returns_text(vllm_server):
    resp = httpx.post(
        vllm_server.url("/v1/chat/completions"),
        json={
            "model": vllm_server.model,
            "messages": [{"role": "user", "content": "hello world"}],
            "max_tokens": 8,
            "temperature": 0,
        },
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert isinstance(body["choices"][0]["message"]["content"], str)
    assert body["choices"][0]["message"]["content"] != ""
    assert body["usage"]["completion_tokens"] == 8


def test_metrics_expose_kv_cache_usage_and_cache_config(vllm_server):
    resp = httpx.get(vllm_server.url("/metrics"), timeout=10)
    assert resp.status_code == 200
    samples = _metric_samples(resp.text)
    for name in (
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
    ):
        assert name in samples, f"{name} missing from /metrics"
    usage = samples["vllm:kv_cache_usage_perc"][0]
    assert usage.labels["model_name"] == "tiny"
    assert 0.0 <= usage.value <= 1.0

    info = samples["vllm:cache_config_info"][0].labels
    block_size = int(info["block_size"])
    assert block_size == CPU_BLOCK_SIZE
    assert int(info["kv_cache_memory_bytes"]) == TINY_KV_CACHE_BYTES
    # 128 MiB / (1 KiB/token * 128 tokens/block) = 1024 blocks.
    num_blocks = int(info["num_gpu_blocks"])
    assert num_blocks == TINY_KV_CACHE_BYTES // (TINY_KV_BYTES_PER_TOKEN * block_size)
    assert int(info["kv_cache_size_tokens"]) == num_blocks * block_size


def test_log_reports_cpu_kv_cache_size(vllm_server):
    log = vllm_server.log_text()
    assert "CPU KV cache size: 131,072 tokens" in log
    assert "Maximum concurrency for 1,024 tokens per request: 128.00x" in log


def test_server_with_api_key(vllm_server_with_key):
    from vllm_server import TEST_API_KEY

    server = vllm_server_with_key
    assert server.port != 0 and server.alive()
    assert httpx.get(server.url("/v1/models"), timeout=10).status_code == 401
    ok = httpx.get(
        server.url("/v1/models"), headers={"Authorization": f"Bearer {TEST_API_KEY}"}, timeout=10
    )
    assert ok.status_code == 200
    # /metrics and /health stay open without the key.
    assert httpx.get(server.url("/health"), timeout=10).status_code == 200


def test_failing_run_captures_kv_error(vllm_failing_run):
    # One 128-token block of 1 KiB/token is 128 KiB; vLLM reserves one null block, leaving none.
    run = vllm_failing_run(["--kv-cache-memory-bytes", "128K"])
    assert run.returncode != 0
    assert "ValueError: No available memory for the cache blocks." in run.log
    assert "Engine core initialization failed" in run.log
