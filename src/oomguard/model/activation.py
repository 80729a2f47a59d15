"""The profile run's transient peak (forward, sampler warm-up, workspaces).

These are estimates (docs/memory-model.md#activation): each returns a ``Term`` with a
range. The forward term follows the dense-transformer peak
``b·T·[2H + max(3I/TP, (2Hq+2Hkv)D/TP + H)]``; the sampler term
``N·V·(b + 4c)`` with N = min(S, T) rows; MoE workspaces and GDN scan scratch
scale with T. Coefficients were calibrated on tests/data/calibration (see
benchmarks/calibration.py).
"""

from __future__ import annotations

from oomguard.model.description import ModelDescription
from oomguard.model.engine import EngineSettings
from oomguard.model.estimate import Term
from oomguard.units import GiB, MiB

FORWARD_ALPHA = 1.2  # temporaries beyond the named tensors (rotary, index buffers)
SAMPLER_C_V1_EARLY = 6.0  # V1 < 0.20: PyTorch sort path for top-k/top-p (values + int64 indices)
SAMPLER_C_V1 = 3.0  # >= 0.20: Triton / FlashInfer top-k/top-p kernels, fp32 copies only
SAMPLER_C_V0 = 10.0  # V0 sorted top-k/top-p and logprobs (PR #10511: 1.26 GiB at S=256, V=128k)
BASE_OVERHEAD = 150 * MiB


def activation_peak(m: ModelDescription, e: EngineSettings, *, last_stage: bool = True) -> Term:
    b = 2
    T, S, tp = e.max_num_batched_tokens, e.max_num_seqs, e.tensor_parallel_size
    H, D = m.hidden_size, m.head_size
    N = min(S, T)
    if e.engine == "V0":
        # V0 profiles max_num_seqs sequences totalling max_num_batched_tokens.
        N = min(S, T)
    inter = m.intermediate_size or 4 * H
    mlp = 3 * inter / tp
    if m.moe is not None:
        k = m.moe.top_k
        ie = m.moe.expert_intermediate_size
        mlp = max(mlp if m.moe.num_dense_layers else 0, k * max(2 * ie / tp, H) + 3 * m.moe.shared_intermediate_size / tp)
    attn = (2 * m.num_attention_heads + 2 * m.num_kv_heads) * D / tp + H
    fwd = FORWARD_ALPHA * b * T * (2 * H + max(mlp, attn))
    if e.engine == "V0":
        c = SAMPLER_C_V0
    else:
        c = SAMPLER_C_V1_EARLY if e.version < (0, 20, 0) else SAMPLER_C_V1
    sampler = N * m.vocab_size * (b + 4 * c) if last_stage else 0
    if e.model_runner_v2 and e.version >= (0, 29, 0) and last_stage:
        sampler += int(0.8 * N * m.vocab_size * 4)  # second warm-up sampler pass (PR #57926)
    extra = 0.0
    parts = []
    if m.moe is not None:
        # Triton fused-MoE workspaces (fused_moe/experts/triton_moe.py::workspace_shapes): two
        # [T·k, max(I_e/TP, H)]-class buffers plus the [T, H] output; kept by the workspace
        # manager (charged to C from 0.27, to X before): subtracted from the pool either way.
        k, ie = m.moe.top_k, m.moe.expert_intermediate_size
        ws = T * k * (max(ie / tp, H) + max(2 * ie / tp, H)) * b + T * H * b
        extra += ws
        parts.append(f"MoE workspace {T}·{k}·(max(I_e/TP,H)+max(2I_e/TP,H))·{b}")
    if m.is_hybrid:
        # GDN chunked-scan scratch grows with T (issue #52872: ~2 GiB intercept at T=2048).
        layer = next(l for l in m.layers if l.mamba is not None)
        st = layer.mamba
        extra += T * (st.conv_dim / tp) * 4 * 6
        parts.append("GDN scan scratch T·conv_dim/TP·24")
    if m.is_multimodal and e.mm_profile:
        extra += T * H * b * 2  # encoder outputs retained at the token budget
        parts.append("encoder outputs 2·T·H·b")
        v = m.vision
        if v:
            # The encoder runs on the largest item the processor allows (multimodal/encoder_budget.py):
            # per layer, qkv + attention output + the MLP pair over every patch, kept at peak ×1.5.
            items = max(1, max(T, v["tokens"]) // v["tokens"])
            enc = 1.5 * items * v["patches"] * (4 * v["hidden"] + 2 * v["intermediate"]) * b
            extra += enc
            parts.append(f"vision encoder {items}×{v['patches']} patches·(4·{v['hidden']}+2·{v['intermediate']})·{b}·1.5")
    # V0's summary reports the sampler-dominated peak alone (PR #10511: 1.26 GiB at S=256,
    # V=128k); V1 adds index buffers, rotary caches and allocator slack.
    base = 0 if e.engine == "V0" else BASE_OVERHEAD
    peak = max(fwd, sampler) + extra + base
    formula = (
        f"max(fwd {FORWARD_ALPHA}·{b}·{T}·(2·{H} + max(mlp {mlp:.0f}, attn {attn:.0f})) = {fwd / GiB:.2f} GiB, "
        f"sampler {N}·{m.vocab_size}·({b}+4·{c:g}) = {sampler / GiB:.2f} GiB)"
        + (f" + {' + '.join(parts)} = {extra / GiB:.2f} GiB" if parts else "")
        + (f" + {base // MiB} MiB" if base else "")
    )
    return Term(
        "activation peak (profile run)",
        int(peak),
        formula,
        "vllm-memory.md §5; v1/worker/gpu_model_runner.py::profile_run",
        exact=False,
        low=int(peak * 0.6),
        high=int(peak * 1.6 + 256 * MiB),
    )
