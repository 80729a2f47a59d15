"""The native adapters added for issue 18 and the terms derived with them.

Layer specs, groups and weight numel are compared with vLLM 0.32 itself in
tests/unit/test_kv_oracle.py (scripts/vllm_kv_oracle.py); these tests pin the behaviour the
planner builds on them: DeepSeek-V4's packed layout and a real start-up log, the sliding-window
in-flight reservation per release, Mamba-only block sizes, Llama-4's chunked groups, the pooling
runner, the CUDA sort temporaries in the sampler and the shape of the CUDA-graph estimate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oomguard.errors import InputError
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model import sampler
from oomguard.model.cudagraph import cudagraph_estimate, graph_modes
from oomguard.model.engine import resolve
from oomguard.model.kv_spec import kv_layout, layer_kv_specs
from oomguard.model.planner import plan_launch
from oomguard.units import GiB

ORACLE_CONFIGS = Path(__file__).resolve().parents[2] / "data" / "oracle" / "configs"


def test_deepseek_v4_flash_packs_five_groups_into_one_block():
    m = load_model("deepseek-ai/DeepSeek-V4-Flash")
    specs = layer_kv_specs(m, 4, "auto")
    layout = kv_layout(specs)
    # every layer's SWA cache, 41 compressed caches, 21 indexer key caches, 41 compressor states
    # and 21 indexer compressor states (vLLM 0.32 registers 167 caches)
    assert len(specs) == 167
    assert sorted((g.kind, g.block_size, g.bytes_per_block, len(g.specs)) for g in layout.groups) == [
        ("mla", 256, 1002240, 62),
        ("sliding_window", 4, 870912, 42),
        ("sliding_window", 8, 656640, 20),
        ("sliding_window", 64, 786240, 21),
        ("sliding_window", 64, 823680, 22),
    ]
    assert layout.bytes_per_block == 1002240  # replicated on every TP rank: the same at TP 4


def test_deepseek_v4_refuses_a_16_bit_kv_cache_as_vllm_does():
    m = load_model("deepseek-ai/DeepSeek-V4-Flash")
    with pytest.raises(InputError, match="fp8_ds_mla"):
        layer_kv_specs(m, 1, "bfloat16")


def test_deepseek_v4_flash_pinned_pool_gives_the_logged_tokens():
    # S072 (tests/data/calibration/startup.jsonl): 0.27.1, TP 2 on H200, T 8192, 98,304 tokens per
    # request, "Available KV cache memory: 50.51 GiB", 752,889 tokens, 7.66x
    m = load_model("deepseek-ai/DeepSeek-V4-Flash")
    flags = {"tensor_parallel_size": 2, "max_model_len": 98304, "max_num_batched_tokens": 8192}
    lo = plan_launch(m, lookup_gpu("H200"), {**flags, "kv_cache_memory_bytes": int(50.505 * GiB)}, version="0.27.1")
    hi = plan_launch(m, lookup_gpu("H200"), {**flags, "kv_cache_memory_bytes": int(50.515 * GiB)}, version="0.27.1")
    assert lo.kv_cache_tokens <= 752889 <= hi.kv_cache_tokens
    assert round(lo.max_concurrency, 2) == 7.66


def test_sliding_window_reserves_every_batch_in_flight_from_027():
    m = load_model("openai/gpt-oss-20b")
    flags = {"max_model_len": 8192, "max_num_batched_tokens": 8192}
    old = resolve(m, flags, {}, version="0.25.1", gpu=lookup_gpu("H100"))
    new = resolve(m, flags, {}, version="0.27.1", gpu=lookup_gpu("H100"))
    assert old.max_concurrent_batches == 1  # window - 1 + T before PR #47728
    assert new.async_scheduling and new.max_concurrent_batches == 2  # V1 runner, async, PP 1
    off = resolve(m, {**flags, "async_scheduling": False}, {}, version="0.27.1", gpu=lookup_gpu("H100"))
    assert off.max_concurrent_batches == 1


def test_mamba_only_block_is_the_request_and_hybrids_align_to_attention():
    pure = load_model(str(ORACLE_CONFIGS / "transformers-mamba2-defaults"))
    assert {sp.block_size for sp in layer_kv_specs(pure, 1, "auto", max_model_len=4096)} == {4096}
    jamba = load_model(str(ORACLE_CONFIGS / "transformers-jamba-defaults"))
    specs = layer_kv_specs(jamba, 1, "auto")
    assert {sp.block_size for sp in specs} == {80}  # vLLM 0.32 (oracle): attention block raised to the Mamba page
    assert len({sp.page_size_bytes for sp in specs}) == 1


def test_mamba_only_model_plans_without_prefix_caching_blocks():
    m = load_model(str(ORACLE_CONFIGS / "transformers-mamba-defaults"))
    p = plan_launch(m, lookup_gpu("A10"), {"max_model_len": 2048})
    assert p.starts and p.blocks_per_request == 1  # one state per request, no "align" block


def test_llama4_scout_has_three_chunked_groups_and_one_global():
    m = load_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    layout = kv_layout(layer_kv_specs(m, 1, "auto"))
    kinds = sorted((g.kind, len(g.specs)) for g in layout.groups)
    assert kinds == [("chunked_local", 12)] * 3 + [("full", 12)]
    # a long request holds chunk + in-flight tokens in the chunked groups, everything in the global one
    p = plan_launch(m, lookup_gpu("H200"), {"tensor_parallel_size": 8, "max_model_len": 1_000_000}, version="0.25.1", num_gpus=8)
    assert p.blocks_per_request == 3 * ((8192 + 8192) // 16) + 1_000_000 // 16


def test_pooling_runner_has_no_sampler_phase():
    m = load_model("Qwen/Qwen3-0.6B")
    gen = plan_launch(m, lookup_gpu("H100"), {"max_model_len": 8192}, version="0.11.0")
    pool = plan_launch(m, lookup_gpu("H100"), {"max_model_len": 8192, "runner": "pooling"}, version="0.11.0")
    assert "[sort]" in gen.tight_rank.activation.formula and "sampler [" not in pool.tight_rank.activation.formula
    assert pool.tight_rank.activation.bytes < gen.tight_rank.activation.bytes / 4


def test_encoder_only_model_keeps_no_kv_cache():
    m = load_model(str(ORACLE_CONFIGS / "transformers-bert-defaults"))
    p = plan_launch(m, lookup_gpu("A10"), {})
    assert p.starts and not p.layout.groups
    assert any(msg.startswith("no KV cache") for msg in p.messages)


def test_cuda_sort_temporaries_set_the_sort_path_peak():
    N, V = 1024, 128256
    cpu = sampler.sort_path_bytes(N, V, 2, (0, 12, 0))
    cuda = sampler.sort_path_bytes(N, V, 2, (0, 12, 0), platform="cuda")
    assert cpu == N * V * 22  # the post-sort tensors (the CPU oracle's figure)
    assert cuda == N * V * (4 + 4 + 8 + sampler.CUDA_SORT_TEMP_BYTES)  # 36: while the sort runs


def test_cudagraph_term_follows_vllms_estimate_shape():
    m = load_model("Qwen/Qwen3-8B")
    s = resolve(m, {"max_model_len": 8192}, {}, version="0.33.0", gpu=lookup_gpu("H100"))
    modes = dict(graph_modes(m, s))
    assert set(modes) == {"PIECEWISE", "FULL"} and len(modes["PIECEWISE"]) == s.num_capture_sizes
    assert all(x <= s.max_num_seqs for x in modes["FULL"])
    t = cudagraph_estimate(m, s)
    assert t.low < t.bytes < t.high and "max over modes (first capture)" in t.formula
    eager = cudagraph_estimate(m, s._replace(cudagraph_mode="NONE"))
    assert eager.bytes == 0


def test_v0_graph_verdict_uses_the_low_end_of_the_estimate():
    # V0 captures graphs after the KV pool, in the card's last (1 - utilization): on a T4 at 0.95 the
    # central graph estimate would not fit beside the CUDA context but its low end does; vLLM 0.6
    # starts such launches, so the plan claims cudagraph-oom only when even the low end overflows.
    m = load_model("Qwen/Qwen2.5-3B-Instruct")
    g = lookup_gpu("T4")
    flags = {"dtype": "half", "max_model_len": 4096}
    at95 = plan_launch(m, g, {**flags, "gpu_memory_utilization": 0.95}, version="0.6.6")
    graphs = at95.tight_rank.cuda_graph
    assert at95.starts and graphs.low < graphs.bytes
    assert g.total_bytes - at95.tight_rank.requested_bytes < graphs.bytes + 0.5 * GiB  # central + context overflow
    at97 = plan_launch(m, g, {**flags, "gpu_memory_utilization": 0.97}, version="0.6.6")
    assert at97.failure is not None and at97.failure.value == "cudagraph-oom"


def test_longrope_defaults_to_the_short_length_from_0_11_1():
    # vLLM PR #27431 (0.11.1+): the registry sweep records max_model_len 4096 for Phi-4-mini on 0.32
    m = load_model("microsoft/Phi-4-mini-instruct")
    assert m.original_max_position_embeddings == 4096
    new = plan_launch(m, lookup_gpu("H100"), {}, version="0.32.0")
    old = plan_launch(m, lookup_gpu("H100"), {}, version="0.11.0")
    assert new.settings.max_model_len == 4096 and old.settings.max_model_len == 131072
    # the long factors stay reachable: the derived limit is still the scaled length
    asked = plan_launch(m, lookup_gpu("H100"), {"max_model_len": 131072}, version="0.32.0")
    assert asked.settings.max_model_len == 131072


def _arch(config_dir: str, arch: str):
    import json

    from oomguard.inputs.model_config import describe_config

    catalog = Path(__file__).resolve().parents[3] / "src" / "oomguard" / "data" / "models"
    cfg = json.loads((catalog / config_dir / "config.json").read_text())
    return describe_config(dict(cfg, architectures=[arch]), source=arch, name=arch)


def test_backbones_vllm_maps_to_a_generative_class_run_the_generate_runner():
    # registry _EMBEDDING_MODELS maps LlamaModel (and MistralModel) to LlamaForCausalLM: runner "generate" in the sweep
    m = _arch("meta-llama__Llama-3.2-1B", "LlamaModel")
    assert not m.pooling and any("--runner pooling" in n for n in m.notes)
    gen = plan_launch(m, lookup_gpu("H100"), {"max_model_len": 8192}, version="0.32.0")
    pool = plan_launch(m, lookup_gpu("H100"), {"max_model_len": 8192, "runner": "pooling"}, version="0.32.0")
    assert gen.settings.async_scheduling and not pool.settings.async_scheduling
    # a backbone with its own pooling class stays pooling unless --runner generate says otherwise
    q = _arch("Qwen__Qwen3-0.6B", "Qwen3Model")
    assert q.pooling
    assert plan_launch(q, lookup_gpu("H100"), {"max_model_len": 8192, "runner": "generate"}, version="0.32.0").settings.async_scheduling


def test_language_model_only_drops_the_vision_tower_and_keeps_audio():
    # calibration S028: Gemma-4 E2B with --language-model-only loads 8.89 GiB on 0.21
    m = load_model("google/gemma-4-E2B-it")
    assert 0 < m.audio_params < m.vision_params
    full = plan_launch(m, lookup_gpu("L4"), {"max_model_len": 8192}, version="0.21.0")
    lm = plan_launch(m, lookup_gpu("L4"), {"max_model_len": 8192, "language_model_only": True}, version="0.21.0")
    dropped = full.tight_rank.weights.bytes - lm.tight_rank.weights.bytes
    assert dropped == pytest.approx((m.vision_params - m.audio_params) * 2, rel=0.01)
    assert abs(lm.tight_rank.weights.bytes / GiB - 8.89) / 8.89 < 0.01
    assert any("--language-model-only" in msg for msg in lm.messages)
