"""The profile run's phases and the live bytes of each (pure arithmetic; docs/memory-model.md,
"Activation peak: phases").

vLLM's ``profile_run`` is a sequence, so its transient peak is the largest phase plus what earlier
phases leave alive, not a sum:

1. multimodal encoder dummy (first PP rank): the encoder's own transients; its outputs stay in
   the encoder cache until ``reset_encoder_cache`` at the end of the run;
2. the LM forward over T tokens (``_dummy_run(is_profile=True)``: attention metadata is None, so
   attention kernels are skipped and their outputs zero-filled), with the MoE workspaces and the
   GDN/Mamba chunked-scan scratch *inside* the layer that uses them; the forward returns
   ``hidden_states [T, H]``, and MoE workspaces persist in the workspace manager;
3. the sampler (last PP rank) on ``hidden_states[logits_indices]``: see ``sampler.py``.

Per-layer shapes follow vLLM's layer code; ``platform="cpu"`` gives the same layer on vLLM's CPU
build (what scripts/vllm_activation_oracle.py measures), whose custom-op choices differ from
CUDA's in two places: ``SiluAndMul`` runs ``forward_native`` (silu and mul as two [T, I] tensors,
where ``torch.ops._C.silu_and_mul`` writes one), and ``fused_add_rms_norm`` is out of place (one
more [T, H] alive). Everything is in elements per token; callers multiply by T and the element
size.
"""

from __future__ import annotations

from dataclasses import dataclass

from oomguard.model.description import ModelDescription

GDN_CHUNK = 64  # FLA chunk size: model_executor/layers/fla/ops/chunk.py (BT = 64)


@dataclass(frozen=True)
class LayerPeak:
    name: str
    per_token: float  # elements per token (activation dtype) at this layer's peak
    retained_per_token: float = 0.0  # persists after the layer (MoE workspace manager)
    fp32_per_token: float = 0.0  # fp32 elements per token (scan scratch), counted at 4 bytes
    formula: str = ""


def dense_layer(m: ModelDescription, tp: int, platform: str = "cuda", inter: int | None = None) -> list[LayerPeak]:
    """Attention (skipped kernel, zero-filled output) and the dense MLP of one decoder layer."""
    H, D = m.hidden_size, m.head_size
    hq, hkv = m.num_attention_heads / tp, max(1.0, m.num_kv_heads / tp)
    if m.mla is not None:
        a = m.mla
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        # layers/mla.py::MultiHeadLatentAttentionWrapper.forward: fused_qkv_a_proj output
        # [T, q_lora + kv_lora + rope] (or kv_a_proj_with_mqa without q_lora), q_a_layernorm and
        # kv_a_layernorm outputs, q_b_proj [T, Hq·qk], the zero-filled [T, Hq·v] attention output
        # (kv_b_proj runs inside the skipped backend), o_proj [T, H].
        ql = a.q_lora_rank or 0
        lat = a.kv_lora_rank + a.qk_rope_head_dim
        attn = ql + lat + ql + a.kv_lora_rank + hq * qk + hq * a.v_head_dim + H
        attn_f = (f"MLA qkv_a {ql + lat} + q_a_norm {ql} + kv_a_norm {a.kv_lora_rank} + q_b {hq * qk:.0f} "
                  f"+ out {hq * a.v_head_dim:.0f} + o_proj {H}")
    else:
        qkv = (hq + 2 * hkv) * D
        attn = qkv + hq * D + H
        attn_f = f"qkv {qkv:.0f} + out {hq * D:.0f} + o_proj {H}"
    I = (inter if inter is not None else (m.intermediate_size or 4 * H)) / tp
    # CPU build: fused_add_rms_norm is out of place, so from the second layer on the previous
    # layer's output pair is still referenced while the new pair exists: two more [T, H] than
    # CUDA's in-place kernel keeps (measured: 4H + 4I/TP on every dense config, TP 1-4).
    extra_h = 2 * H if platform == "cpu" else 0
    mlp = 2 * I + (2 * I if platform == "cpu" else I)
    out = [LayerPeak("attention", 2 * H + extra_h + attn, formula=f"2H + {attn_f}")]
    if inter != 0:
        out.append(LayerPeak("mlp", 2 * H + extra_h + mlp, formula=f"2H + gate_up {2 * I:.0f} + act {mlp - 2 * I:.0f}"))
    return out


def moe_layer(m: ModelDescription, tp: int, platform: str = "cuda") -> LayerPeak:
    """One MoE layer. CUDA, Triton experts (fused_moe/experts/triton_moe.py::workspace_shapes and
    modular_kernel.py): workspace13 [M, k, max(I_e/TP, H)], whose storage the [M, H] output
    reuses, and workspace2 [M, k, max(2·I_e/TP, H)], M = T; the workspace manager keeps them after
    the layer. Router logits [T, E], top-k weights (fp32) and ids (int32). Shared experts run a
    dense MLP beside the routed ones. The CPU build's expert kernels report zero-sized workspaces
    and keep their scratch internal: only the [M, H] output is a tensor there."""
    assert m.moe is not None
    H, k, ie = m.hidden_size, m.moe.top_k, m.moe.expert_intermediate_size / tp
    E = m.moe.num_experts
    route = E + 2 * k * 4 / 4  # router logits (b) + top-k weights and ids (4 bytes each, in b=4 units)
    sh = m.moe.shared_intermediate_size / tp
    if platform == "cpu":
        ws, kept = H, 0.0
        shared = 4 * sh + H if sh else 0  # silu and mul apart, plus the shared output
        extra_h = H
        ws_f = f"output {H} (CPU experts keep scratch internal)"
    else:
        ws = k * (max(ie, H) + max(2 * ie, H))
        kept = ws
        shared = 3 * sh + H if sh else 0
        extra_h = 0
        ws_f = f"workspaces {k}·(max(I_e/TP,H)+max(2I_e/TP,H)) = {ws:.0f}"
    return LayerPeak(
        "moe",
        2 * H + extra_h + ws + shared + route,
        retained_per_token=kept,
        formula=f"2H + {ws_f}" + (f" + shared MLP {shared:.0f}" if shared else "") + f" + router {route:.0f}",
    )


def gdn_layer(m: ModelDescription, tp: int) -> LayerPeak | None:
    """Gated DeltaNet (layers/mamba/gdn/qwen_gdn_linear_attn.py) in the profile run.

    ``_forward_core`` returns early when attention metadata is None (the profile run): the conv1d
    and the FLA chunked scan never run at the token budget. Only ``_warmup_prefill_kernels`` runs
    them, on T = FLA_CHUNK_SIZE = 64 dummy tokens (third_party/flash_linear_attention/ops/utils.py),
    so the scan scratch in the profile is a fixed few MiB, not a function of T (issue #52872: real
    prefills peak above the profile). What scales with T: in_proj_qkvz [T, conv_dim + Hv·Dv],
    in_proj_ba [T, 2·Hv], for Qwen3-Next's interleaved layout the rearranged q/k/v copies and their
    concatenation (2·conv_dim), the zero-filled core output and the gated norm [T, Hv·Dv] each,
    out_proj [T, H]."""
    layer = next((l for l in m.layers if l.mamba is not None), None)
    if layer is None or layer.mamba.variant != "gdn":
        return None
    st = layer.mamba
    H = m.hidden_size
    hv = st.num_heads / tp
    vd = hv * st.head_v_dim
    conv = st.conv_dim / tp
    interleaved = 2 * conv if m.model_type == "qwen3_next" else 0
    per = 2 * H + (conv + vd) + 2 * hv + interleaved + vd + vd + H
    return LayerPeak("gdn", per,
                     formula=f"2H + qkvz {conv + vd:.0f} + ba {2 * hv:.0f}" + (f" + q/k/v copies and cat {interleaved:.0f}" if interleaved else "")
                     + f" + core out {vd:.0f} + norm {vd:.0f} + out_proj {H} (scan skipped; warm-up at T={GDN_CHUNK})")


def layer_peaks(m: ModelDescription, tp: int, platform: str = "cuda") -> list[LayerPeak]:
    peaks: list[LayerPeak] = []
    dense_mlp = m.moe is None or m.moe.num_dense_layers > 0 or m.moe.dense_alongside
    inter = None
    if m.moe is not None:
        inter = (m.moe.dense_intermediate_size or m.intermediate_size) if dense_mlp else 0
    peaks += dense_layer(m, tp, platform, inter=inter)
    if m.moe is not None:
        peaks.append(moe_layer(m, tp, platform))
    g = gdn_layer(m, tp)
    if g is not None:
        peaks.append(g)
    return peaks


def forward_peak_bytes(m: ModelDescription, T: int, tp: int, b: int, platform: str = "cuda", *,
                       workspace_manager: bool = True) -> tuple[int, int, LayerPeak]:
    """(peak bytes of the LM forward, bytes retained after it, the layer that sets the peak).

    ``workspace_manager``: MoE workspaces outlive the layer (v1/worker/workspace.py, 0.27+);
    before that they were per-call temporaries."""
    peaks = layer_peaks(m, tp, platform)
    top = max(peaks, key=lambda p: p.per_token * b + p.fp32_per_token * 4)
    retained = max((p.retained_per_token for p in peaks), default=0.0) if workspace_manager else 0.0
    # The MoE workspace of an earlier layer stays allocated while a later dense/attention layer
    # runs; charge it beside the largest non-MoE layer as well.
    others = [p for p in peaks if p.retained_per_token == 0]
    best = top.per_token * b + top.fp32_per_token * 4
    if others and retained:
        o = max(others, key=lambda p: p.per_token * b + p.fp32_per_token * 4)
        best = max(best, (o.per_token + retained) * b + o.fp32_per_token * 4)
    return int(T * best), int(T * retained * b), top


def encoder_phase_bytes(m: ModelDescription, T: int, b: int) -> tuple[int, int, str]:
    """(encoder transient peak, encoder outputs retained through the LM forward, formula).

    The encoder runs on the largest item the processor allows, repeated to fill the encoder
    budget (multimodal/encoder_budget.py): per layer, qkv + attention output + the MLP pair over
    every patch. Its outputs (≈ budget × H_lm) stay in the encoder cache."""
    v = m.vision
    if not v:
        return 0, int(T * m.hidden_size * b), f"encoder outputs {T}·{m.hidden_size}·{b}"
    items = max(1, max(T, v["tokens"]) // v["tokens"])
    enc = items * v["patches"] * (4 * v["hidden"] + 2 * v["intermediate"]) * b
    kept = items * v["tokens"] * m.hidden_size * b
    return int(enc), int(kept), f"encoder {items}×{v['patches']} patches·(4·{v['hidden']}+2·{v['intermediate']})·{b}; outputs kept {items}·{v['tokens']}·{m.hidden_size}·{b}"
