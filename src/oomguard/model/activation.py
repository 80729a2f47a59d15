"""The profile run's transient peak (forward, sampler warm-up, workspaces).

``activation_peak`` follows the profile run as the sequence it is (docs/memory-model.md,
"Activation peak: phases"; ``model/phases.py``): encoder dummy, LM forward (MoE workspaces and
GDN scan scratch inside the layer that uses them), then the sampler (``model/sampler.py``) once
the forward's tensors are freed. The peak is the largest phase plus what earlier phases leave
alive. The per-layer shapes and the sampler paths are checked against vLLM 0.32 itself on the
CPU build (scripts/vllm_activation_oracle.py); CUDA-only differences are derived from source.
"""

from __future__ import annotations

from oomguard.model import phases, sampler
from oomguard.model.description import ModelDescription
from oomguard.model.engine import EngineSettings
from oomguard.model.estimate import Term
from oomguard.units import GiB, MiB

# No allowance is added for the items once thought to sit in a V1 profile peak: the rotary cos/sin
# caches are module buffers created in load_model (inside the weights figure), the runner's index
# and position buffers are allocated in GPUModelRunner.__init__ (before the profile's peak baseline,
# memory_profiling's before_profile), so neither is in torch_peak_increase. Every V1 record that
# logs its peak agrees (tests/data/calibration: S015, S059, S110-S119 within 1 % without it; the
# 150 MiB allowance kept before made each 0.10-0.15 GiB high). Allocator rounding stays in the
# range's top (RANGE_SLACK).
RANGE_SLACK = 256 * MiB


def _flashinfer_default(version: tuple[int, int, int]) -> bool:
    """VLLM_USE_FLASHINFER_SAMPLER's default from the release's flag table (None = off from
    0.11.1, PR #26859; None meant "on when installed" before; True from 0.21)."""
    from oomguard.versions import get_release

    try:
        d = get_release(".".join(map(str, version))).env_default("VLLM_USE_FLASHINFER_SAMPLER")
    except Exception:  # noqa: BLE001 - a release outside the tables: the documented history
        d = None if version < (0, 21, 0) else True
    if d is None:
        return version < (0, 11, 1)
    return bool(d)


POOLING_TASKS = ("embed", "embedding", "score", "classify", "reward", "pooling")


def pooling_runner(m: ModelDescription, e: EngineSettings) -> bool:
    """vLLM picks the pooling runner for pooling architectures (encoder-only embedders, *ForSequenceClassification)
    and for ``--runner pooling`` / a pooling ``--task`` / ``--convert`` (config/model.py::_get_runner_type)."""
    return m.pooling or str(getattr(e, "runner", "") or "") in POOLING_TASKS


def activation_peak(m: ModelDescription, e: EngineSettings, *, last_stage: bool = True, env: dict | None = None) -> Term:
    b = int(getattr(e, "act_dtype_bytes", 2))
    T, S, tp = e.max_num_batched_tokens, e.max_num_seqs, e.tensor_parallel_size
    H = m.hidden_size
    N = min(S, T)

    # Phase 2: the LM forward (attention skipped), MoE workspace retained after it.
    fwd, fwd_kept, top = phases.forward_peak_bytes(m, T, tp, b, workspace_manager=e.version >= (0, 27, 0),
                                                   version=e.version)
    parts = [f"forward {T}·{b}·({top.name}: {top.formula}) = {fwd / GiB:.2f} GiB"]

    # Phase 1: the multimodal encoder; its outputs stay alive through phases 2 and 3.
    enc, enc_kept = 0, 0
    enc_range = (0.8, 1.3)
    if m.family == "mllama" and m.is_multimodal:
        # V0's encoder-decoder profile: one full-size dummy image per sequence, all in one pass
        # (architectures/mllama.py; an estimate fitted on record S005, with its range)
        from oomguard.model.architectures import mllama

        enc = int(S * mllama.IMAGE_PEAK_PER_SEQ / tp)
        enc_range = mllama.RANGE if e.version >= mllama.OVERCOUNT_BEFORE else mllama.RANGE_BEFORE_07
        if e.version < mllama.OVERCOUNT_BEFORE:
            parts.insert(0, "before 0.7.0 the encoder-decoder profile over-counted (vllm PR #12126): the peak is higher, "
                            "range ×1-×2.5")
        parts.insert(0, f"V0 encoder-decoder profile: {S} sequences × one full-size image × "
                        f"{mllama.IMAGE_PEAK_PER_SEQ / GiB:.3f} GiB (estimate fitted on S005) / TP {tp} = {enc / GiB:.2f} GiB")
    elif m.is_multimodal and e.mm_profile:
        enc, enc_kept, enc_f = phases.encoder_phase_bytes(m, T, b)
        parts.insert(0, f"vision encoder {enc_f}")

    # Phase 3: the sampler on N rows, beside hidden_states [T, H] and the retained buffers.
    samp = None
    pooling = pooling_runner(m, e)
    if pooling:
        parts.append("pooling runner: the profile ends with the pooler over the hidden states, no sampler "
                     "(gpu_model_runner.py::_dummy_pooler_run)")
    if last_stage and not pooling:
        samp = sampler.sampler_peak(
            N, m.vocab_size, b, version=e.version, engine=e.engine, mrv2=e.model_runner_v2,
            tp=tp, env=env, flashinfer_default=_flashinfer_default(e.version),
        )
        parts.append(f"sampler [{samp.path}] {samp.formula} = {samp.bytes / GiB:.2f} GiB")
    hidden_kept = T * H * b + N * H * b  # the forward's output and its [N, H] gather
    phase_bytes = {
        "encoder": enc,
        "forward": fwd + enc_kept,
        "sampler": (samp.bytes + hidden_kept + fwd_kept + enc_kept) if samp else 0,
    }
    worst = max(phase_bytes, key=phase_bytes.get)
    peak = phase_bytes[worst]
    lo_s = samp.low if samp else 0
    hi_s = samp.high if samp else 0
    low = max(enc * (enc_range[0] if enc_range[0] < 0.8 else 1.0), 0.8 * fwd + enc_kept,
              (lo_s + hidden_kept + fwd_kept + enc_kept) if samp else 0)
    high = max(enc_range[1] * enc, 1.25 * fwd + enc_kept, (hi_s + hidden_kept + fwd_kept + enc_kept) if samp else 0) + RANGE_SLACK
    kept = []
    if enc_kept:
        kept.append(f"encoder outputs {enc_kept / GiB:.2f}")
    if fwd_kept:
        kept.append(f"MoE workspace {fwd_kept / GiB:.2f}")
    formula = (
        "max over phases (" + "; ".join(parts) + ")"
        + f" → {worst} phase {phase_bytes[worst] / GiB:.2f} GiB"
        + (f" incl. retained {', '.join(kept)} GiB" if kept else "")
    )
    if e.engine == "V0":  # V0's own profile run: its model runner and sampler, not V1's
        source = (
            "docs/memory-model.md §Activation peak: phases, §Sampler warm-up; "
            "worker/model_runner.py::GPUModelRunnerBase.profile_run (V0), model_executor/layers/sampler.py"
        )
    else:
        source = (
            "docs/memory-model.md §Activation peak: phases, §Sampler warm-up; "
            "v1/worker/gpu_model_runner.py::profile_run/_dummy_sampler_run, "
            "v1/worker/gpu/model_runner.py::profile_run, v1/sample/ops/topk_topp_sampler.py"
        )
    assumption = (samp.assumption if samp else "not the last PP stage: no sampler") + (
        "; layer shapes are CUDA's (fused silu_and_mul, in-place add-norm, Triton MoE workspaces: "
        "derived from source, the CPU oracle checks the CPU build's variant)"
    )
    return Term(
        "activation peak (profile run)",
        int(peak),
        formula + f" [{assumption}]",
        source,
        exact=False,
        low=int(min(low, peak)),
        high=int(max(high, peak)),
    )
