"""Roofline estimates: chunk counts, monotonic trends, and the catalog numbers they rest on."""

from __future__ import annotations

import pytest

from oomguard.fit.roofline import LABEL, Roofline, active_params, prefill_steps
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model


def test_s3_chunked_prefill_is_92_steps():
    # scenarios.md S3: 750,000 tokens at 8,192 per step is 92 forward steps
    assert prefill_steps(750_000, 8192) == 92
    assert prefill_steps(8192, 8192) == 1
    assert prefill_steps(8193, 8192) == 2
    assert prefill_steps(0, 8192) == 0


def test_label_says_estimate():
    assert "estimate" in LABEL and "roofline" in LABEL and "50%" in LABEL


def test_active_params_moe_counts_top_k_only():
    dense = active_params(load_model("Qwen/Qwen3-32B"))
    moe = active_params(load_model("Qwen/Qwen3-30B-A3B"))
    assert 28e9 < dense < 34e9
    assert 2e9 < moe < 4e9  # "A3B": about 3B active


def _rl(model_id="meta-llama/Llama-2-13b-chat-hf", gpu="RTX-3090", tp=8, eager=False):
    m, g = load_model(model_id), lookup_gpu(gpu)
    return Roofline.build(m, g, tensor_parallel_size=tp, weights_bytes=26e9 / tp, kv_bytes_per_token=102400, eager=eager)


def test_smaller_chunks_cost_prefill_throughput_and_shorten_the_stall():
    rl = _rl()
    assert rl.prefill_tokens_per_s(8192, 256) < rl.prefill_tokens_per_s(8192, 2048)
    assert rl.mixed_step_s(256, 8, 4096) < rl.mixed_step_s(2048, 8, 4096)
    # TTFT grows with the number of chunks, but the compute is the same: within a factor of two here
    assert rl.prefill_s(8192, 256) < 2 * rl.prefill_s(8192, 8192)


def test_decode_throughput_grows_with_concurrency_and_falls_with_context():
    rl = _rl()
    assert rl.decode_tokens_per_s(32, 4096) > rl.decode_tokens_per_s(1, 4096)
    assert rl.decode_tokens_per_s(8, 32768) < rl.decode_tokens_per_s(8, 1024)
    assert rl.decode_tokens_per_s(0, 1024) == 0


def test_eager_decode_is_slower_than_graphs():
    assert _rl(eager=True).decode_step_s(1, 1024) > _rl(eager=False).decode_step_s(1, 1024)


def test_decode_is_bandwidth_bound_at_batch_one():
    rl = _rl()
    # one step reads the weights once: step time >= weights / usable bandwidth
    assert rl.decode_step_s(1, 16) == pytest.approx(rl.weights_bytes / rl.bandwidth + rl.step_overhead_s, rel=0.05)


def test_long_prompt_attention_dominates():
    rl = _rl("Qwen/Qwen2.5-7B-Instruct", "A100-80GB", 1)
    short = rl.prefill_s(8192, 8192)
    long = rl.prefill_s(1_048_576, 8192)
    assert long > 128 * short  # quadratic attention: more than linear in length
