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


from oomguard.model.description import ModelDescription
from oomguard.records import NamedTuple

GDN_CHUNK = 64  # FLA chunk size: third_party/flash_linear_attention/ops/utils.py (FLA_CHUNK_SIZE)
# Attention with per-head q/k RMSNorm (q_norm, k_norm): RMSNorm returns new q and k tensors.
QK_NORM_TYPES = frozenset({
    "qwen3", "qwen3_moe", "qwen3_next", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe",
    "gemma3", "gemma3_text", "gemma3n", "gemma4", "gemma4_text", "olmo2", "olmoe",
})
# Gated MLPs whose forward rebinds one name (``x, _ = self.gate_up_proj(x); x = act(x); x, _ =
# self.down_proj(x)``), so gate_up is freed before down_proj runs: read in the 0.32 wheel (llama.py
# LlamaMLP, which mistral and phi3 reuse or copy, and the files listed). Every other gated MLP there
# (qwen2.py's, which qwen3 imports, gemma*, deepseek_v2, granite, glm4_moe, ...) writes
# ``gate_up, _ = ...; x = act(gate_up)``: gate_up stays alive through down_proj, whose output then
# sits beside residual, input, gate_up and the activation: 3H + 3I per token, not 2H + 3I. The V0
# Llama of 0.6.4 kept it too (S001/S002: 110.6 KB per token logged between 20,000 and 29,000
# tokens = (3H + 3I)·2 for Llama-3.1-8B); the release where llama.py moved to the rebinding form is
# not known: ASSUMED 0.32 (the first read), the kept form before it.
REBIND_MLP_TYPES = frozenset({"llama", "mistral", "phi3", "bailing_moe", "falcon_h1", "step1"})
REBIND_MLP_SINCE = (0, 32, 0)
# MLPs without a gate (fc1 -> activation -> fc2): no gate_up pair, plain torch ops on every platform.
UNGATED_TYPES = frozenset({"opt", "gpt2", "phi", "gpt_neox", "gpt_bigcode", "falcon", "bloom", "mpt", "starcoder2"})


class LayerPeak(NamedTuple):
    """The activation peak of one layer kind during a forward pass."""
    name: str
    per_token: float  # elements per token (activation dtype) at this layer's peak
    retained_per_token: float = 0.0  # persists after the layer (MoE workspace manager)
    fp32_per_token: float = 0.0  # fp32 elements per token (scan scratch), counted at 4 bytes
    formula: str = ""


def keeps_gate_up(m: ModelDescription, version: tuple[int, int, int] | None) -> bool:
    """Whether the gated MLP's gate_up output is still referenced when down_proj runs."""
    v = version or REBIND_MLP_SINCE
    return not (m.model_type in REBIND_MLP_TYPES and v >= REBIND_MLP_SINCE)


def dense_layer(m: ModelDescription, tp: int, platform: str = "cuda", inter: int | None = None,
                version: tuple[int, int, int] | None = None) -> list[LayerPeak]:
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
        # attn_output_gate (Qwen3-Next / Qwen3.5): q_proj doubles (q and gate), and
        # attn_output * sigmoid(gate) adds two [T, Hq·D] tensors.
        gate = m.attn_output_gate
        qkv = ((2 if gate else 1) * hq + 2 * hkv) * D
        qkn = (hq + hkv) * D if m.model_type in QK_NORM_TYPES else 0
        attn = qkv + qkn + hq * D + (2 * hq * D if gate else 0) + H
        attn_f = (f"qkv {qkv:.0f}" + (f" + q/k norm {qkn:.0f}" if qkn else "") + f" + out {hq * D:.0f}"
                  + (f" + gate {2 * hq * D:.0f}" if gate else "") + f" + o_proj {H}")
    if tp > 1:
        # RowParallelLinear's all-reduce is out of place (pynccl / custom all-reduce; the CPU
        # build's too): the reduced [T, H] exists beside the partial o_proj output.
        attn += H
        attn_f += f" + all-reduce {H}"
    I = (inter if inter is not None else (m.intermediate_size or 4 * H)) / tp
    extra_h = 2 * H if platform == "cpu" else 0
    hh = f"{2 + extra_h // H}H"
    out = [LayerPeak("attention", 2 * H + extra_h + attn, formula=f"{hh} + {attn_f}")]
    if inter != 0:
        if m.model_type in UNGATED_TYPES:
            # fc1 [T, I] and the activation's new [T, I]; plain residual adds keep the previous
            # pair alive on CUDA too (no fused add-norm): 4H on both platforms.
            out.append(LayerPeak("mlp", 4 * H + 2 * I, formula=f"4H + fc1 {I:.0f} + act {I:.0f}"))
        else:
            act = 2 * I if platform == "cpu" else I
            at_act = 2 * H + extra_h + 2 * I + act
            # down_proj's moment on CUDA: residual, input, [gate_up,] activation, output (+ the
            # out-of-place all-reduce at TP > 1). On the CPU build the activation's moment (two
            # [T, I] temporaries of the native SiluAndMul) stays the larger either way.
            kept = platform != "cpu" and keeps_gate_up(m, version)
            at_down = 3 * H + (2 * I if kept else 0) + I + (H if tp > 1 else 0)
            if platform != "cpu" and at_down > at_act:
                out.append(LayerPeak("mlp", at_down, formula=f"3H + gate_up {2 * I:.0f} kept + act {I:.0f}"
                                     + (f" + all-reduce {H}" if tp > 1 else "") + " (at down_proj)"))
            else:
                out.append(LayerPeak("mlp", at_act, formula=f"{hh} + gate_up {2 * I:.0f} + act {act:.0f}"))
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
    route = E + 2 * k  # router logits (b) + top-k weights and ids (4 bytes each, as b = 4)
    sh = m.moe.shared_intermediate_size / tp
    shared_out = H if sh else 0
    reduce = H if tp > 1 else 0  # the out-of-place all-reduce of the layer's output
    total = H if sh else 0  # shared + routed summed into a new [T, H]
    if platform == "cpu":
        base = 4 * H  # see dense_layer: the out-of-place add-norm keeps the previous pair
        during = base + shared_out + H + H + route  # output + the common workspace ([M, H] on CPU)
        end = base + shared_out + H + total + reduce
        shared_run = base + 4 * sh + shared_out if sh else 0  # gate_up, silu and mul apart
        kept, ws = 0.0, H
        ws_f = f"output + workspace 2·{H} (CPU experts keep scratch internal)"
    else:
        base = 2 * H
        ws = k * (max(ie, H) + max(2 * ie, H))  # the [M, H] output lives in workspace13
        during = base + shared_out + ws + route
        end = base + shared_out + ws + total + reduce
        shared_run = base + 3 * sh + shared_out if sh else 0
        kept = ws
        ws_f = f"workspaces {k}·(max(I_e/TP,H)+max(2I_e/TP,H)) = {ws:.0f}"
    per = max(during, end, shared_run)
    return LayerPeak(
        "moe",
        per,
        retained_per_token=kept,
        formula=f"{base // H}H + {ws_f}" + (f" + shared out {H}" if sh else "") + f" + router {route:.0f}"
        + (f"; then sum {total} + all-reduce {reduce}" if (total or reduce) else ""),
    )


def gdn_layer(m: ModelDescription, tp: int, platform: str = "cuda") -> LayerPeak | None:
    """Gated DeltaNet (layers/mamba/gdn/qwen_gdn_linear_attn.py) in the profile run.

    ``_forward_core`` returns early when attention metadata is None (the profile run): the conv1d
    and the FLA chunked scan never run at the token budget. Only ``_warmup_prefill_kernels`` runs
    them, on T = FLA_CHUNK_SIZE = 64 dummy tokens (third_party/flash_linear_attention/ops/utils.py),
    so the scan scratch in the profile is a fixed few MiB, not a function of T (issue #52872: real
    prefills peak above the profile). What scales with T: in_proj_qkvz [T, conv_dim + Hv·Dv] and
    in_proj_ba [T, 2·Hv]; Qwen3-Next's interleaved layout (fix_query_key_value_ordering) copies
    q/k/v, concatenates them (2·conv_dim) and copies z and b/a; the zero-filled core output
    [T, Hv·Dv]; the gated RMSNorm (CUDA: one fused output; CPU build: forward_native keeps
    x·rsqrt, ·weight, silu(z) and the product, plus the [T, Hv] rsqrt); out_proj [T, H] and, at
    TP > 1, its out-of-place all-reduce."""
    layer = next((l for l in m.layers if l.mamba is not None), None)
    if layer is None or layer.mamba.variant != "gdn":
        return None
    st = layer.mamba
    H = m.hidden_size
    hv = st.num_heads / tp
    vd = hv * st.head_v_dim
    conv = st.conv_dim / tp
    cpu = platform == "cpu"
    base = 4 * H if cpu else 2 * H
    if m.model_type == "qwen3_next":
        copies = 2 * conv + vd + 2 * hv  # q/k/v copies + cat, z and b/a reshape copies
    else:
        copies = 0 if cpu else 2 * hv  # b.contiguous(), a.contiguous() on the CUDA path
    common = base + (conv + vd) + 2 * hv + copies + vd
    norm_point = common + (4 * vd + hv if cpu else vd)
    end_point = common + vd + H + (H if tp > 1 else 0)
    per = max(norm_point, end_point)
    return LayerPeak("gdn", per,
                     formula=f"{base // H}H + qkvz {conv + vd:.0f} + ba {2 * hv:.0f}" + (f" + copies {copies:.0f}" if copies else "")
                     + f" + core out {vd:.0f} + " + (f"norm {4 * vd + hv:.0f} (forward_native)" if cpu and norm_point >= end_point else f"norm {vd:.0f} + out_proj {H}" + (f" + all-reduce {H}" if tp > 1 else ""))
                     + f" (scan skipped; warm-up at T={GDN_CHUNK})")


def mamba_layer(m: ModelDescription, tp: int, platform: str = "cuda") -> LayerPeak | None:
    """A Mamba1 / Mamba2 mixer in the profile run (layers/mamba/mamba_mixer.py, mamba_mixer2.py):
    with no attention metadata the conv and SSM kernels do not run at the token budget.

    Mamba2: in_proj's projected states [T, (I + conv_dim + heads)/TP] and the empty SSM output
    [T, I/TP] stay alive through the layer; conv_ssm_forward copies the x/B/C part twice
    (transpose-clone, then contiguous: 2·conv_dim/TP) before returning; the gated RMSNorm writes
    [T, I/TP] (one fused output on CUDA), out_proj [T, H] (+ the all-reduce at TP > 1).
    Mamba1: in_proj [T, 2I/TP], a contiguous copy of its x half [T, I/TP], out_proj [T, H]."""
    layer = next((l for l in m.layers if l.mamba is not None), None)
    if layer is None or layer.mamba.variant not in ("mamba1", "mamba2"):
        return None
    st, H = layer.mamba, m.hidden_size
    base = 4 * H if platform == "cpu" else 2 * H
    reduce = H if tp > 1 else 0
    I = st.conv_dim / tp
    if st.variant == "mamba1":
        per = base + 2 * I + I + H + reduce
        return LayerPeak("mamba", per, formula=f"{base // H}H + in_proj {2 * I:.0f} + x copy {I:.0f} + out_proj {H}")
    groups = st.n_groups + (0 if st.n_groups % tp == 0 else tp - st.n_groups)
    conv = (st.conv_dim + 2 * groups * st.state_size) / tp
    proj = I + conv + st.num_heads / tp
    # the CPU build's RMSNormGated.forward_native holds x·silu(gate) and its square at once (2I)
    norm = 2 * I if platform == "cpu" else I
    per = max(base + proj + I + 2 * conv, base + proj + I + norm, base + proj + I + I + H + reduce)
    return LayerPeak("mamba", per, formula=f"{base // H}H + in_proj {proj:.0f} + ssm out {I:.0f} + max(x/B/C copies {2 * conv:.0f}, "
                     f"norm {norm:.0f}, norm out {I:.0f} + out_proj {H}" + (f" + all-reduce {H}" if tp > 1 else "") + ") (scan skipped)")


def layer_peaks(m: ModelDescription, tp: int, platform: str = "cuda", version: tuple[int, int, int] | None = None) -> list[LayerPeak]:
    from oomguard.model.description import LayerKind

    peaks: list[LayerPeak] = []
    dense_mlp = m.moe is None or m.moe.num_dense_layers > 0 or m.moe.dense_alongside
    inter = None
    if m.moe is not None:
        inter = (m.moe.dense_intermediate_size or m.intermediate_size) if dense_mlp else 0
    # Mamba-family layers may carry no MLP (NemotronH "M", pure Mamba) and a model may have no
    # attention at all: only the blocks the model has set the peak.
    has_attn = any(l.kind not in (LayerKind.MAMBA, LayerKind.NONE) or l.kv_shared for l in m.layers)
    has_mlp = any(l.mlp_multiplier > 0 and not l.moe for l in m.layers)
    if not has_mlp and m.moe is None:
        inter = 0
    dense = dense_layer(m, tp, platform, inter=inter, version=version)
    peaks += [p for p in dense if p.name != "attention" or has_attn or m.mla is not None]
    if m.moe is not None:
        peaks.append(moe_layer(m, tp, platform))
    for extra in (gdn_layer(m, tp, platform), mamba_layer(m, tp, platform)):
        if extra is not None:
            peaks.append(extra)
    return peaks


def forward_peak_bytes(m: ModelDescription, T: int, tp: int, b: int, platform: str = "cuda", *,
                       workspace_manager: bool = True, version: tuple[int, int, int] | None = None) -> tuple[int, int, LayerPeak]:
    """(peak bytes of the LM forward, bytes retained after it, the layer that sets the peak).

    ``workspace_manager``: MoE workspaces outlive the layer (v1/worker/workspace.py, 0.27+);
    before that they were per-call temporaries."""
    peaks = layer_peaks(m, tp, platform, version)
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
