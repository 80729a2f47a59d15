"""The activation term follows the profile run's phases and the sampler path of the release."""

from __future__ import annotations

import dataclasses

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
    s = dataclasses.replace(s, model_runner_v2=False)
    t = activation_peak(m, s)
    # 1024 rows x 128,256 x (2 bf16 logits + 36 bytes while the CUDA sort runs) ~ 4.7 GiB; the
    # H100 0.11 records log 4.76 GiB for this model (S114)
    assert 4.5 * GiB < t.bytes < 4.9 * GiB
    assert "[sort]" in t.formula


def test_mrv2_profile_pass_is_logits_only_through_032():
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    s = dataclasses.replace(_settings(m, "0.32.0", max_num_seqs=1024, max_num_batched_tokens=8192), model_runner_v2=True)
    t32 = activation_peak(m, s)
    t33 = activation_peak(m, dataclasses.replace(s, version=(0, 33, 0)))
    assert "[mrv2]" in t32.formula and "[mrv2-warm]" in t33.formula
    assert t33.bytes > t32.bytes
    # 0.33: logits (2) + the warm-up pass's fp32 copy (4) + in-place masking / fp32 logprobs (4)
    assert t33.bytes - 150 * 2**20 >= 1024 * 128256 * (2 + 8)
    # 0.32: the forward phase sets the peak; the sampler phase is the logits and a few KiB


def test_flashinfer_env_settles_the_033_path():
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    s = dataclasses.replace(_settings(m, "0.33.0", max_num_seqs=1024, max_num_batched_tokens=8192), model_runner_v2=True)
    plain = activation_peak(m, s)  # 0.33's flag table: VLLM_USE_FLASHINFER_SAMPLER defaults on
    off = activation_peak(m, s, env={"VLLM_USE_FLASHINFER_SAMPLER": "0"})
    assert "FlashInfer" in plain.formula and "Triton" in off.formula
    assert off.bytes > plain.bytes
    assert plain.low <= plain.bytes <= plain.high


def test_activation_element_size_follows_act_dtype_bytes():
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    s = _settings(m, "0.32.0", max_num_seqs=8, max_num_batched_tokens=16384)
    half = activation_peak(m, s)

    full = activation_peak(m, dataclasses.replace(s, act_dtype_bytes=4))
    base = 150 * 2**20
    assert abs((full.bytes - base) / (half.bytes - base) - 2.0) < 0.05


def test_gdn_scan_is_not_a_function_of_the_token_budget_in_the_profile():
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    g = phases.gdn_layer(m, 1)
    assert g is not None and "scan skipped" in g.formula
    # linear in T through the projections only: doubling T doubles the forward phase exactly
    a, _, _ = phases.forward_peak_bytes(m, 4096, 1, 2)
    b, _, _ = phases.forward_peak_bytes(m, 8192, 1, 2)
    assert b == 2 * a
