"""The start-up ledger: budget identity, verdicts, versions."""

import pytest

from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.planner import plan_launch
from oomguard.units import GiB


@pytest.fixture(scope="module")
def llama8b():
    return load_model("meta-llama/Llama-3.1-8B-Instruct")


def test_ledger_adds_up_to_requested(llama8b):
    p = plan_launch(llama8b, lookup_gpu("H100"), {"max_model_len": 32768})
    r = p.tight_rank
    spent = r.weights.bytes + r.non_torch.bytes + r.activation.bytes + r.cuda_graph.bytes
    assert abs(r.requested_bytes - spent - r.kv_bytes) <= 1
    assert p.starts and p.failure is None
    assert p.settings.gpu_memory_utilization == 0.92  # default from 0.20
    assert p.settings.max_num_batched_tokens == 8192  # H100 serve tier


def test_older_version_defaults(llama8b):
    p = plan_launch(llama8b, lookup_gpu("A100-80GB"), {"max_model_len": 8192}, version="0.11.0")
    assert p.settings.gpu_memory_utilization == 0.9
    assert p.settings.max_num_batched_tokens == 2048  # A100 excluded from the 70 GiB tier
    assert p.tight_rank.cuda_graph.bytes > 0 and not p.settings.estimate_cudagraphs


def test_graph_estimate_changes_pool_from_020(llama8b):
    before = plan_launch(llama8b, lookup_gpu("L40S"), {"gpu_memory_utilization": 0.9, "max_model_len": 8192}, version="0.19.0")
    after = plan_launch(llama8b, lookup_gpu("L40S"), {"gpu_memory_utilization": 0.9, "max_model_len": 8192}, version="0.20.0")
    assert after.tight_rank.kv_bytes < before.tight_rank.kv_bytes


def test_max_num_batched_tokens_moves_the_pool(llama8b):
    small = plan_launch(llama8b, lookup_gpu("A100-80GB"), {"max_model_len": 32768, "max_num_batched_tokens": 2048})
    big = plan_launch(llama8b, lookup_gpu("A100-80GB"), {"max_model_len": 32768, "max_num_batched_tokens": 65536})
    assert big.tight_rank.activation.bytes > small.tight_rank.activation.bytes
    assert big.kv_cache_tokens < small.kv_cache_tokens


def test_weights_do_not_fit(llama8b):
    p = plan_launch(load_model("meta-llama/Meta-Llama-3.1-70B"), lookup_gpu("A100-80GB"), {})
    assert not p.starts and p.failure.value == "weights-oom"


def test_kv_too_small_gives_vllm_message_and_largest_len(llama8b):
    p = plan_launch(llama8b, lookup_gpu("RTX-4090"), {"max_model_len": 131072})
    assert p.failure.value == "kv-too-small"
    assert "estimated maximum model length is" in p.error
    assert 0 < p.max_fitting_len < 131072
    ok = plan_launch(llama8b, lookup_gpu("RTX-4090"), {"max_model_len": p.max_fitting_len})
    assert ok.starts


def test_no_kv_memory(llama8b):
    p = plan_launch(llama8b, lookup_gpu("RTX-4090"), {"gpu_memory_utilization": 0.6, "max_model_len": 4096})
    assert p.failure.value == "no-kv-memory"
    assert "No available memory for the cache blocks" in p.error


def test_max_len_exceeds_model_and_env_override():
    m = load_model("meta-llama/Llama-2-7b-chat-hf")
    p = plan_launch(m, lookup_gpu("A100-80GB"), {"max_model_len": 8192})
    assert p.failure.value == "max-len-exceeds-model"
    p2 = plan_launch(m, lookup_gpu("A100-80GB"), {"max_model_len": 8192}, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert p2.failure is None


def test_tp_must_divide_heads():
    m = load_model("Qwen/Qwen2.5-7B")  # 28 heads
    p = plan_launch(m, lookup_gpu("A100-80GB"), {"tensor_parallel_size": 8}, num_gpus=8)
    assert p.failure.value == "config-error"


def test_startup_free_memory_with_other_process(llama8b):
    p = plan_launch(llama8b, lookup_gpu("A100-80GB"), {"gpu_memory_utilization": 0.9}, other_gpu_use_bytes=10 * GiB)
    assert p.failure.value == "startup-free-memory"


def test_v0_profiles_max_len_without_chunked_prefill(llama8b):
    p = plan_launch(llama8b, lookup_gpu("RTX-3090"), {"max_model_len": 20000, "gpu_memory_utilization": 0.9}, version="0.6.6")
    assert p.settings.engine == "V0"
    assert p.settings.max_num_batched_tokens == 20000  # max(L, 2048) without chunked prefill


def test_json_contract_names(llama8b):
    d = plan_launch(llama8b, lookup_gpu("H100"), {}).to_dict()
    for k in ("vllm_version", "max_model_len", "block_size", "per_gpu", "kv_cache_tokens", "num_gpu_blocks", "max_concurrency", "starts", "failure", "messages"):
        assert k in d
    for k in ("total_gib", "requested_gib", "weights_gib", "activation_peak_gib", "non_torch_gib", "cuda_graph_gib", "kv_cache_gib"):
        assert k in d["per_gpu"]


def test_auto_fit_max_model_len(llama8b):
    p = plan_launch(llama8b, lookup_gpu("RTX-4090"), {"max_model_len": -1})
    assert p.starts
    assert p.settings.max_model_len < 131072
    assert p.messages[0].startswith("Auto-fit max_model_len: reduced from 131072 to")


def test_pipeline_stages_check_their_own_layers():
    m = load_model("meta-llama/Meta-Llama-3.1-70B")
    p = plan_launch(m, lookup_gpu("A100-80GB"), {"pipeline_parallel_size": 2, "tensor_parallel_size": 2, "max_model_len": 131072}, num_gpus=4)
    # each stage stores 40 of 80 layers: one request needs half the whole-model KV per GPU
    assert len(p.ranks) == 2
    assert p.one_request_bytes == 40 * 16 * 2 * 4 * 128 * 2 * (131072 // 16)


def test_num_gpu_blocks_override_sizes_the_pool(llama8b):
    p = plan_launch(llama8b, lookup_gpu("H100"), {"max_model_len": 32768, "num_gpu_blocks_override": 100})
    assert p.num_gpu_blocks == 100
    assert p.failure.value == "kv-too-small"  # 100 blocks × 16 tokens < 32768


def test_vision_encoder_profile_and_text_only_switch():
    m = load_model("Qwen/Qwen2.5-VL-7B-Instruct")
    with_mm = plan_launch(m, lookup_gpu("L40S"), {"max_model_len": 8192})
    text_only = plan_launch(m, lookup_gpu("L40S"), {"max_model_len": 8192, "limit_mm_per_prompt": {"image": 0, "video": 0}})
    # the largest image (65,536 patches) through the vision tower is part of the profile peak
    # phases, not sums: the encoder phase (1.46 GiB of tower activations + kept outputs) replaces the forward as the peak
    assert with_mm.tight_rank.activation.bytes - text_only.tight_rank.activation.bytes > 1.0 * 2**30
    assert "vision encoder" in with_mm.tight_rank.activation.formula


def test_term_sources_cite_the_shipped_doc_and_code_paths(llama8b):
    """Users have docs/memory-model.md, not the project's internal reference notes."""
    from pathlib import Path

    import oomguard

    p = plan_launch(llama8b, lookup_gpu("H100"), {"max_model_len": 8192, "tensor_parallel_size": 2}, num_gpus=2)
    r = p.tight_rank
    for term in (r.weights, r.non_torch, r.cuda_graph):
        assert "docs/memory-model.md#" in term.source and "vllm-memory" not in term.source
        assert ".py" in term.source
    model_dir = Path(oomguard.__file__).parent / "model"
    # activation.py's Term belongs to the activation oracle work (issue 10 items 1-3).
    offenders = [f.name for f in model_dir.rglob("*.py") if "vllm-memory" in f.read_text() and f.name != "activation.py"]
    assert not offenders
    doc = (Path(oomguard.__file__).parents[2] / "docs" / "memory-model.md").read_text()
    for anchor in ("## Weights", "## Non-torch", "## CUDA graphs", "## dtype", "## Flags", "## Activation", "## KV cache"):
        assert anchor in doc


@pytest.mark.parametrize("version", ["0.20.0", "0.25.0", "0.33.0"])
def test_hybrid_state_blocks_follow_prefix_caching_not_the_release(version):
    """Align mode (one more state block per request) whenever prefix caching is on for a hybrid."""
    from oomguard.model.engine import mamba_blocks_per_request

    m = load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    kw = dict(version=version, num_gpus=4)
    on = plan_launch(m, lookup_gpu("H200"), {"max_model_len": 8192, "tensor_parallel_size": 4, "enable_prefix_caching": True}, **kw)
    off = plan_launch(m, lookup_gpu("H200"), {"max_model_len": 8192, "tensor_parallel_size": 4, "enable_prefix_caching": False}, **kw)
    assert mamba_blocks_per_request(m, on.settings) == 2 and mamba_blocks_per_request(m, off.settings) == 1
    mamba_groups = sum(1 for g in on.layout.groups if g.kind == "mamba")
    assert mamba_groups >= 1 and on.blocks_per_request == off.blocks_per_request + mamba_groups
    default = plan_launch(m, lookup_gpu("H200"), {"max_model_len": 8192, "tensor_parallel_size": 4}, **kw)
    assert default.settings.enable_prefix_caching == (version >= "0.25")  # the default moved in 0.25
