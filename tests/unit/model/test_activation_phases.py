"""The activation term follows the profile run's phases and the sampler path of the release."""

from __future__ import annotations


from oomguard.inputs.model_config import load_model
from oomguard.model import phases, sampler
from oomguard.model.activation import activation_peak
from oomguard.model.engine import resolve
from oomguard.units import GiB

H100 = 80 * GiB


def _settings(model, version, **flags):
    return resolve(model, flags, {}, version=version, gpu_total_bytes=H100, gpu_name="H100-SXM-80GB")


def test_peak_is_the_largest_phase_not_the_sum():
    m = load_model("Qwen/Qwen3-30B-A3B")
    s = _settings(m, "0.32.0", max_num_batched_tokens=8192, max_num_seqs=1024)
    t = activation_peak(m, s)
    fwd, kept, _ = phases.forward_peak_bytes(m, 8192, 1, 2)
    samp = sampler.sampler_peak(min(1024, 8192), m.vocab_size, 2, version=s.version, engine=s.engine, mrv2=s.model_runner_v2)
    summed = fwd + samp.bytes
    assert t.bytes < summed
    assert t.bytes >= max(fwd, samp.bytes)
    assert "phase" in t.formula and "docs/memory-model.md" in t.source


def test_sampler_dominates_at_h100_defaults_for_mrv1_sort_path():
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    s = _settings(m, "0.12.0", max_num_seqs=1024, max_num_batched_tokens=8192)
    s = s._replace(model_runner_v2=False)
    t = activation_peak(m, s)
    # 1024 rows x 128,256 x (2 bf16 logits + 36 bytes while the CUDA sort runs) ~ 4.7 GiB; the
    # H100 0.11 records log 4.76 GiB for this model (S114)
    assert 4.5 * GiB < t.bytes < 4.9 * GiB
    assert "[sort]" in t.formula


def test_mrv2_profile_pass_is_logits_only_through_032():
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    s = _settings(m, "0.32.0", max_num_seqs=1024, max_num_batched_tokens=8192)._replace(model_runner_v2=True)
    t32 = activation_peak(m, s)
    t33 = activation_peak(m, s._replace(version=(0, 33, 0)))
    assert "[mrv2]" in t32.formula and "[mrv2-warm]" in t33.formula
    assert t33.bytes > t32.bytes
    # 0.33: logits (2) + the warm-up pass's fp32 copy (4) + in-place masking / fp32 logprobs (4)
    assert t33.bytes >= 1024 * 128256 * (2 + 8)
    # 0.32: the forward phase sets the peak; the sampler phase is the logits and a few KiB


def test_flashinfer_env_settles_the_033_path():
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    s = _settings(m, "0.33.0", max_num_seqs=1024, max_num_batched_tokens=8192)._replace(model_runner_v2=True)
    plain = activation_peak(m, s)  # 0.33's flag table: VLLM_USE_FLASHINFER_SAMPLER defaults on
    off = activation_peak(m, s, env={"VLLM_USE_FLASHINFER_SAMPLER": "0"})
    assert "FlashInfer" in plain.formula and "Triton" in off.formula
    assert off.bytes > plain.bytes
    assert plain.low <= plain.bytes <= plain.high


def test_activation_element_size_follows_act_dtype_bytes():
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    s = _settings(m, "0.32.0", max_num_seqs=8, max_num_batched_tokens=16384)
    half = activation_peak(m, s)

    full = activation_peak(m, s._replace(act_dtype_bytes=4))
    assert abs(full.bytes / half.bytes - 2.0) < 0.05  # no constant allowance: every byte scales


def test_gdn_scan_is_not_a_function_of_the_token_budget_in_the_profile():
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    g = phases.gdn_layer(m, 1)
    assert g is not None and "scan skipped" in g.formula
    # linear in T through the projections only: doubling T doubles the forward phase exactly
    a, _, _ = phases.forward_peak_bytes(m, 4096, 1, 2)
    b, _, _ = phases.forward_peak_bytes(m, 8192, 1, 2)
    assert b == 2 * a


def test_flashinfer_is_the_only_profiled_path_before_the_forward_native_warm_pass():
    """0.10.1 MRV1 ran one sampler pass with no generators (PR #41375 added the second): with
    VLLM_USE_FLASHINFER_SAMPLER=1 the profile sees flashinfer_sample's 4 + 4 + 4 bytes per logit
    beside the logits; unset, 0.10's "on when installed" default stays the sort path's estimate."""
    from oomguard.model import sampler

    N, V = 256, 152064
    on = sampler.sampler_peak(N, V, 2, version=(0, 10, 1), engine="V1", mrv2=False, env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    unset = sampler.sampler_peak(N, V, 2, version=(0, 10, 1), engine="V1", mrv2=False, flashinfer_default=True)
    assert on.path == "flashinfer" and on.bytes == N * sampler.padded_vocab(V) * 2 + N * V * 12
    assert unset.path == "sort" and unset.low <= on.bytes < unset.bytes
    assert on.high == N * sampler.padded_vocab(V) * 2 + sampler.sort_path_bytes(N, V, 2, (0, 10, 1), platform="cuda")
    # from the warm pass on, the native path sets the phase whatever the env says
    later = sampler.sampler_peak(N, V, 2, version=(0, 21, 0), engine="V1", mrv2=False, env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    assert later.path == "triton"


def test_a_kept_gate_up_sets_the_mlp_peak_at_down_proj_on_cuda():
    """qwen2.py's MLP (``gate_up, _ = ...; x = act(gate_up)``) keeps gate_up through down_proj:
    3H + 3I per token; 0.32's LlamaMLP rebinds ``x`` and frees it first: 2H + 3I at the activation.
    The V0 Llama of 0.6.4 kept it (S001/S002: peak_torch − weights = 2.07 / 2.99 GiB at 20,000 /
    29,000 tokens, Llama-3.1-8B)."""
    llama = load_model("meta-llama/Llama-3.1-8B-Instruct")
    qwen = load_model("Qwen/Qwen3-8B")
    H, I = llama.hidden_size, llama.intermediate_size
    new = {p.name: p.per_token for p in phases.dense_layer(llama, 1, version=(0, 32, 0))}
    old = {p.name: p.per_token for p in phases.dense_layer(llama, 1, version=(0, 6, 4))}
    assert new["mlp"] == 2 * H + 3 * I and old["mlp"] == 3 * H + 3 * I
    Hq, Iq = qwen.hidden_size, qwen.intermediate_size
    assert {p.name: p.per_token for p in phases.dense_layer(qwen, 1, version=(0, 32, 0))}["mlp"] == 3 * Hq + 3 * Iq
    # the CPU build's native SiluAndMul peaks at the activation either way (what the oracle measures)
    assert {p.name: p.per_token for p in phases.dense_layer(qwen, 1, platform="cpu")}["mlp"] == 4 * Hq + 4 * Iq
    for T, logged in ((20000, 2.07), (29000, 2.99)):
        fwd, _, _ = phases.forward_peak_bytes(llama, T, 1, 2, version=(0, 6, 4))
        assert abs(fwd / 2**30 - logged) < 0.02
