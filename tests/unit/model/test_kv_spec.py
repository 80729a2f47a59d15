"""KV spec arithmetic against vllm-memory.md's worked examples (§2.7) and scenario S3."""

from oomguard.inputs.model_config import load_model
from oomguard.model.kv_spec import blocks_per_request, kv_layout, layer_kv_specs, per_token_bytes


def test_llama31_8b_per_token_bytes():
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    specs = layer_kv_specs(m, tp=1)
    assert per_token_bytes(specs) == 131072  # 32·2·8·128·2
    lay = kv_layout(specs)
    assert lay.bytes_per_block == 2 * 1024 * 1024
    assert blocks_per_request(lay, 131072, max_num_batched_tokens=8192) == 8192


def test_llama31_70b_tp4_and_tp8():
    m = load_model("meta-llama/Meta-Llama-3.1-70B")
    assert per_token_bytes(layer_kv_specs(m, tp=4)) == 81920
    assert per_token_bytes(layer_kv_specs(m, tp=8)) == 40960


def test_kv_heads_replicated_when_tp_exceeds_them():
    m = load_model("Qwen/Qwen2.5-0.5B-Instruct")  # 2 KV heads
    assert per_token_bytes(layer_kv_specs(m, tp=1)) == 12288
    # TP 4 > 2 KV heads: one (replicated) head per rank, bytes stop shrinking at TP 2
    assert per_token_bytes(layer_kv_specs(m, tp=4)) == per_token_bytes(layer_kv_specs(m, tp=2)) == 6144


def test_scenario_s3_fp8_tp4():
    m = load_model("tests/scenarios/s3/model")
    assert per_token_bytes(layer_kv_specs(m, tp=1, kv_cache_dtype="fp8_e4m3")) == 131072
    assert per_token_bytes(layer_kv_specs(m, tp=4, kv_cache_dtype="fp8_e4m3")) == 32768


def test_deepseek_mla_latent_replicated_on_every_rank():
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert per_token_bytes(layer_kv_specs(m, tp=1)) == 70272  # 61·576·2
    assert per_token_bytes(layer_kv_specs(m, tp=8)) == 70272
    assert per_token_bytes(layer_kv_specs(m, tp=8, kv_cache_dtype="fp8")) == 35136


def test_gemma3_groups_and_padding_match_worked_example():
    m = load_model("google/gemma-3-27b-it")
    lay = kv_layout(layer_kv_specs(m, tp=1))
    assert lay.padding_layers == 8
    assert lay.bytes_per_block == 10 * 131072
    bpr = blocks_per_request(lay, 131072, max_num_batched_tokens=8192, max_concurrent_batches=2)
    assert bpr == 14726


def test_qwen3_next_hybrid_block_size_and_groups():
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    lay = kv_layout(layer_kv_specs(m, tp=2))
    # 544-token blocks and 4 groups reproduce the logged 973,760 tokens (S059) from 44.59 GiB
    assert lay.block_size == 544
    assert lay.num_groups == 4
    num_blocks = int(44.59 * 2**30) // lay.bytes_per_block
    assert num_blocks // lay.num_groups * lay.block_size == 973760
