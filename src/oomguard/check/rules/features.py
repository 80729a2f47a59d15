"""OG8xx: model features with memory or hardware consequences.

Speculative decoding (draft / MTP weights and extra KV slots), multimodal
profile budgets, and quantization or dtype kernels the GPU's compute capability
cannot run natively.
"""

from __future__ import annotations

from oomguard.check.context import json_value
from oomguard.check.finding import Severity
from oomguard.check.needs import Needs
from oomguard.check.rule import rule
from oomguard.check.rules.common import gib, memory_failure
from oomguard.model.failures import FailureClass as F
from oomguard.units import GiB

_MTP = ("mtp", "deepseek_mtp", "qwen3_next_mtp", "ernie_mtp", "glm4_moe_mtp", "mimo_mtp", "qwen3_5_mtp")


def _quant_method(ctx) -> str:
    """The weight format the kernels see: the flag, else the checkpoint's method
    (ModelOpt's mixed 4-bit checkpoints are NVFP4)."""
    q = ctx.flags.get("quantization")
    if q:
        return str(q).lower()
    qc = ctx.model.quantization
    if qc.method.startswith("modelopt") and qc.bits == 4:
        return "nvfp4"
    return qc.method


@rule(
    "OG801",
    "speculative-decoding-memory",
    title="Speculative decoding takes memory from the KV pool",
    severity=Severity.INFO,
    why="""A draft model or MTP head is loaded next to the target (its weights, and for a separate
    draft its own KV cache), and each running sequence reserves `num_speculative_tokens` extra
    slots per step (and, on hybrid models, extra state blocks). Reports that "the KV cache shrank"
    after enabling it are this.""",
    fix="""None automatic; the message gives what it costs.""",
    example="""vllm serve MODEL --speculative-config '{"method":"mtp","num_speculative_tokens":3}'""",
)
def spec_memory(ctx):
    r = spec_memory.rule
    spec = json_value(ctx.flags.get("speculative_config"))
    if not isinstance(spec, dict) or not spec:
        return
    plan = ctx.plan
    base = ctx.replan([ctx.edit("speculative_config", None)])
    dw = max(x.weights.bytes for x in plan.ranks) - max(x.weights.bytes for x in base.ranks)
    dkv = base.kv_cache_tokens - plan.kv_cache_tokens
    k = spec.get("num_speculative_tokens")
    yield r.finding(
        ctx,
        f"speculative decoding ({spec.get('method') or spec.get('model') or 'draft'}, {k} tokens): about {gib(dw)} more weights per GPU"
        + (f" and {dkv:,} fewer KV tokens ({base.kv_cache_tokens:,} without it)" if plan.starts and base.starts else "")
        + "; a separate draft model's own weights and KV are not included.",
        dests=["speculative_config"],
        numbers={"extra_weights_gib": round(dw / GiB, 2), "kv_tokens_without": base.kv_cache_tokens, "kv_tokens_with": plan.kv_cache_tokens},
    )


@rule(
    "OG802",
    "mtp-without-mtp-layers",
    title="MTP speculative decoding on a checkpoint without MTP layers",
    severity=Severity.ERROR,
    needs=(Needs.MODEL,),
    why="""Multi-token-prediction speculative decoding runs the checkpoint's own MTP layers
    (`num_nextn_predict_layers`, `mtp_num_hidden_layers`). A config without them (many quantized
    or distilled re-uploads drop them) fails at start-up when vLLM builds the drafter.""",
    fix="""Remove `--speculative-config` (or use a checkpoint that keeps the MTP layers).""",
    example="""vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config '{"method":"mtp","num_speculative_tokens":1}'""",
    use_instead="vllm serve meta-llama/Llama-3.1-8B-Instruct",
    predicts=(F.CONFIG_ERROR,),
)
def mtp_missing(ctx):
    r = mtp_missing.rule
    spec = json_value(ctx.flags.get("speculative_config"))
    if not isinstance(spec, dict) or str(spec.get("method") or "") not in _MTP or ctx.model.num_mtp_layers > 0:
        return
    yield r.finding(
        ctx,
        f"--speculative-config method {spec.get('method')} needs MTP layers, and {ctx.model.name}'s config has none: vLLM fails to build the drafter.",
        dests=["speculative_config"],
        fix=[ctx.edit("speculative_config", None)],
    )


@rule(
    "OG803",
    "multimodal-profile-budget",
    title="Multimodal inputs inflate the profile run",
    severity=Severity.WARNING,
    why="""For a multimodal model vLLM's profile run also encodes the largest inputs
    `--limit-mm-per-prompt` allows (images, video frames) and keeps an encoder cache of that
    budget: the activation peak and the reserved memory grow with the limits, and the KV pool
    shrinks. Text-only deployments should say so; image-only ones should cap video.""",
    fix="""For the warning (many items per prompt): one image and no video. The info suggests
    `--limit-mm-per-prompt` (or `--language-model-only` where the release has it) for text-only
    serving.""",
    example="""vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt '{"image":16,"video":4}'""",
    use_instead="""vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt '{"image":1,"video":0}'""",
    needs=(Needs.MODEL,),
)
def mm_budget(ctx):
    r = mm_budget.rule
    if not ctx.model.is_multimodal or ctx.flags.get("language_model_only"):
        return
    lim = json_value(ctx.flags.get("limit_mm_per_prompt"))
    if isinstance(lim, dict) and lim:
        counts = {k: (v.get("count", 1) if isinstance(v, dict) else v) for k, v in lim.items()}
        total = sum(int(v) for v in counts.values() if isinstance(v, (int, float)))
        if total > 8 or int(counts.get("video", 0) or 0) > 2:
            # a warning only where the planned launch fails for memory; a launch that starts pays in
            # KV tokens, which is a trade-off to state, not an alarm
            plan = ctx.plan
            fails = plan is not None and memory_failure(plan)
            cost = "" if plan is None else (f"; the launch will not start ({plan.failure.value})" if fails else f"; the launch starts with {plan.kv_cache_tokens:,} KV tokens")
            yield r.finding(
                ctx,
                f"--limit-mm-per-prompt {counts}: the profile run encodes that many items at their largest size; "
                f"the peak and encoder cache grow with it{cost}. Cap it to what clients send.",
                dests=["limit_mm_per_prompt"],
                severity=Severity.WARNING if fails or plan is None else Severity.INFO,
                fix=[ctx.edit("limit_mm_per_prompt", {"image": 1, "video": 0})],
            )
        return
    alt = "--language-model-only" if ctx.has_flag("language_model_only") else "--limit-mm-per-prompt '{\"image\":0,\"video\":0}'"
    yield r.finding(
        ctx,
        f"{ctx.model.name} is multimodal: the profile run reserves room for the largest image/video inputs. If you serve text only, add {alt}; "
        "otherwise cap --limit-mm-per-prompt to what clients send.",
        dests=["limit_mm_per_prompt"],
        severity=Severity.INFO,
    )


@rule(
    "OG804",
    "fp8-below-ada",
    title="FP8 weights on a GPU without FP8 tensor cores",
    severity=Severity.ERROR,
    needs=(Needs.MODEL, Needs.GPU),
    why="""FP8 matmuls need compute capability 8.9 (Ada, Hopper) or newer. On Ampere (8.0/8.6) vLLM
    falls back to Marlin weight-only kernels: the weights stay FP8-sized, activations run in
    16 bit, and throughput drops. Below 8.0 (V100, T4) there is no FP8 kernel at all.""",
    fix="""None automatic on 8.x (it works, slower); on older GPUs remove `--quantization fp8` /
    use a 16-bit or AWQ/GPTQ checkpoint.""",
    example="vllm serve Qwen/Qwen3-32B-FP8   # A100",
    predicts=(F.CONFIG_ERROR,),
)
def fp8_old_gpu(ctx):
    r = fp8_old_gpu.rule
    if _quant_method(ctx) not in ("fp8", "fbgemm_fp8", "ptpc_fp8"):
        return
    if ctx.gpu.supports_fp8:
        return
    if ctx.gpu.fp8 == "weight-only":
        yield r.finding(
            ctx,
            f"{ctx.gpu.name} ({ctx.gpu.target}) has no FP8 tensor cores: vLLM runs the FP8 weights through "
            "Marlin weight-only kernels (16-bit activations, slower). It starts; the cost is throughput.",
            dests=["quantization"],
            # it starts (runpod-workers/worker-vllm#213 on A100): a throughput note, not an alarm
            severity=Severity.INFO,
        )
        return
    fix = [ctx.edit("quantization", None)] if ctx.flags.get("quantization") else []
    yield r.finding(
        ctx,
        f"{ctx.gpu.name} ({ctx.gpu.target}) cannot run FP8 weights: vLLM stops at start-up."
        + (" Remove --quantization fp8." if fix else " Use a 16-bit, AWQ or GPTQ checkpoint."),
        dests=["quantization"],
        fix=fix,
    )


@rule(
    "OG805",
    "nvfp4-not-native",
    title="NVFP4 weights on a GPU before Blackwell",
    severity=Severity.ERROR,
    needs=(Needs.MODEL, Needs.GPU),
    why="""NVFP4 runs natively only on Blackwell (compute capability 10.0+). Older GPUs from 8.0 use
    emulation or Marlin W4A16 fallbacks (weight-only, slower, and not in every release); below
    8.0 there is no kernel.""",
    fix="""None automatic: a Blackwell GPU, or an AWQ/GPTQ/FP8 checkpoint for this one.""",
    example="vllm serve nvidia/Qwen3.6-35B-A3B-NVFP4   # H100",
    predicts=(F.CONFIG_ERROR,),
)
def nvfp4_old_gpu(ctx):
    r = nvfp4_old_gpu.rule
    if _quant_method(ctx) not in ("nvfp4", "modelopt_fp4"):
        return
    if ctx.gpu.native_fp4:
        return
    # NVFP4's weight-only fallbacks (Marlin W4A16, emulation) are CUDA kernels from sm80
    fallback = ctx.gpu.platform == "cuda" and ctx.gpu.cc_major_minor >= (8, 0)
    yield r.finding(
        ctx,
        f"{ctx.gpu.name} ({ctx.gpu.target}) has no native FP4: "
        + ("vLLM falls back to weight-only kernels (slower)." if fallback else "no NVFP4 kernel runs on it; vLLM stops at start-up."),
        dests=["quantization"],
        severity=Severity.WARNING if fallback else Severity.ERROR,
    )


@rule(
    "OG806",
    "bf16-unsupported",
    title="bfloat16 on a GPU below compute capability 8.0",
    severity=Severity.ERROR,
    needs=(Needs.MODEL, Needs.GPU),
    why="""bfloat16 needs compute capability 8.0 (Ampere) or newer. On V100, T4 and older vLLM stops
    with "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" when
    `--dtype bfloat16` is given; with `--dtype auto` it casts a bfloat16 checkpoint to float16,
    which some models (trained in bf16) overflow in.""",
    fix="""`--dtype half`.""",
    example="vllm serve Qwen/Qwen3-8B --dtype bfloat16   # Tesla T4",
    use_instead="vllm serve Qwen/Qwen3-8B --dtype half",
    predicts=(F.CONFIG_ERROR,),
)
def bf16_old_gpu(ctx):
    r = bf16_old_gpu.rule
    g = ctx.gpu
    if not g.no_bf16:  # the GPU catalog's dtypes for the target
        return
    dtype = str(ctx.flags.get("dtype") or "auto").lower()
    if dtype == "bfloat16":
        yield r.finding(
            ctx,
            f"{g.name} ({g.target}) has no bfloat16: vLLM stops at start-up. Use --dtype half.",
            dests=["dtype"],
            fix=[ctx.edit("dtype", "half")],
        )
    elif dtype == "auto" and ctx.model.dtype == "bfloat16":
        yield r.finding(
            ctx,
            f"{ctx.model.name} is bfloat16 and {g.name} has no bfloat16: vLLM will run it in float16; watch for overflow (NaN / garbage output).",
            dests=["dtype"],
            severity=Severity.INFO,
        )


_COMPATIBLE = {
    "gptq": {"gptq", "gptq_marlin", "gptq_bitblas", "marlin"},
    "awq": {"awq", "awq_marlin"},
    "fp8": {"fp8", "fbgemm_fp8"},
    "compressed-tensors": {"compressed-tensors", "compressed_tensors"},
    "bitsandbytes": {"bitsandbytes"},
    "gguf": {"gguf"},
    "nvfp4": {"modelopt_fp4", "nvfp4", "modelopt"},
    "mxfp4": {"mxfp4"},
}


@rule(
    "OG807",
    "quantization-mismatch",
    title="--quantization contradicts the checkpoint's quantization",
    severity=Severity.ERROR,
    needs=(Needs.MODEL,),
    why="""When a checkpoint is already quantized, `--quantization` must name the same method (or one
    of its kernels, e.g. `awq_marlin` for AWQ): vLLM stops with "Quantization method specified in
    the model config (X) does not match the quantization method specified in the `quantization`
    argument (Y)".""",
    fix="""Remove `--quantization` (vLLM reads the method from the checkpoint).""",
    example="vllm serve TheBloke/Mistral-7B-Instruct-v0.2-AWQ --quantization gptq",
    use_instead="vllm serve TheBloke/Mistral-7B-Instruct-v0.2-AWQ",
    predicts=(F.CONFIG_ERROR,),
)
def quant_mismatch(ctx):
    r = quant_mismatch.rule
    q = ctx.flags.get("quantization")
    m = ctx.model.quantization.method
    if not q or m == "none":
        return
    q = str(q).lower()
    if q in _COMPATIBLE.get(m, {m}):
        return
    yield r.finding(
        ctx,
        f"{ctx.model.name} is quantized with {m}, but --quantization {q}: vLLM refuses to start. Remove --quantization.",
        dests=["quantization"],
        fix=[ctx.edit("quantization", None)],
        numbers={"checkpoint_method": m, "flag": q},
    )


# Llama-3.2-Vision on vLLM's encoder-decoder runner. Records, not a derivation:
# - before vllm PR #12126 (0.7.0) the V0 profile over-counted: the default 256 failed on an A100 80GB
#   (vllm#9445, 0.6.3) and on 2x A10 (vllm#10034); 128 at 65,536 tokens failed "before this PR"
#   (PR #12126); 32 started (vllm#9445) and the maintainers give 16 (vllm#8879);
# - from 0.7.0 the profile peak grows ~0.286 GiB per sequence (PR #12126's H100 log: 36.63 GiB at
#   128 sequences, record S005), so a launch fails where weights + that peak exceed the budget.
_MLLAMA_SEQS_STARTED_PRE_07 = 32
_MLLAMA_SEQS_ADVISED = 16


def _mllama_peak_per_seq() -> int:
    # the one place for the fitted per-sequence peak (record S005): the memory model's adapter
    from oomguard.model.architectures.mllama import IMAGE_PEAK_PER_SEQ

    return int(IMAGE_PEAK_PER_SEQ)


def _mllama_weight_bytes(cfg: dict) -> int:
    """16-bit weights from the config: text layers (attention + MLP), embeddings and LM head,
    vision tower (local + global layers). Within 1 % of the 19.86 GiB vLLM logs for the 11B."""
    t, v = cfg.get("text_config") or {}, cfg.get("vision_config") or {}
    H, I, L = t.get("hidden_size", 0), t.get("intermediate_size", 0), t.get("num_hidden_layers", 0)
    kv = t.get("num_key_value_heads", 1) / max(t.get("num_attention_heads", 1), 1)
    text = L * (H * H * (2 + 2 * kv) + 3 * H * I) + 2 * t.get("vocab_size", 0) * H
    vh, vi = v.get("hidden_size", 0), v.get("intermediate_size", 0)
    vision = (v.get("num_hidden_layers", 0) + v.get("num_global_layers", 0)) * (4 * vh * vh + 2 * vh * vi)
    return int((text + vision) * 2)


@rule(
    "OG808",
    "encoder-decoder-profile-sequences",
    title="Llama-3.2-Vision profiles one full-size image per sequence",
    severity=Severity.ERROR,
    needs=(),
    why="""Llama-3.2-Vision (`mllama`) runs on vLLM's encoder-decoder runner, whose start-up profile
    builds `max_num_seqs` dummy requests and gives each one the largest image the model takes
    (`worker/enc_dec_model_runner.py::profile_run`: one `dummy_data_for_profiling(...,
    is_encoder_data=True)` per sequence), so the vision tower encodes `max_num_seqs` × 4 tiles ×
    1,601 patches in one pass. Before 0.7.0 (vllm PR #12126) the profile also over-counted: the
    default 256 failed on an 80 GB card and on 2 × A10, 32 started and vLLM's maintainers give 16.
    From 0.7.0 the peak grows about 0.29 GiB per sequence (PR #12126's log: 36.63 GiB at 128; a
    constant fitted on that one record, the memory model's estimate too: model/architectures/mllama.py),
    so the launch fails where the 16-bit weights and that peak exceed the budget. vLLM serves the
    architecture up to 0.10.2 only; later releases refuse it.""",
    fix="""`--max-num-seqs 16` (and `--enforce-eager` when it is not set: the encoder-decoder runner
    does not capture CUDA graphs).""",
    example="vllm serve meta-llama/Llama-3.2-11B-Vision-Instruct --max-model-len 1024   # vLLM 0.6.3",
    use_instead="vllm serve meta-llama/Llama-3.2-11B-Vision-Instruct --max-model-len 1024 --max-num-seqs 16 --enforce-eager",
    predicts=(F.PROFILE_OOM,),
)
def mllama_profile_seqs(ctx):
    r = mllama_profile_seqs.rule
    cfg = ctx.unmodelled_config
    if not cfg and ctx.model is not None and ctx.model.family == "mllama" and ctx.model.config_path:
        from pathlib import Path

        from oomguard.errors import OomguardError
        from oomguard.inputs.model_config import read_json

        try:  # modelled on the releases that serve it: the rule still reads the config's own fields
            cfg = read_json(Path(ctx.model.config_path))
        except (OomguardError, OSError, ValueError):
            return
    if str(cfg.get("model_type") or "") not in ("mllama", "mllama_text_model"):
        return
    seqs = ctx.flags.get("max_num_seqs")
    default = seqs is None
    if default:
        seqs = 256  # the default of every release that serves mllama (V0 scheduler)
    if not isinstance(seqs, int):
        return
    numbers = {"max_num_seqs": seqs, "profiled_patches": seqs * 4 * 1601, "suggested_max_num_seqs": _MLLAMA_SEQS_ADVISED}
    if ctx.version_tuple < (0, 7, 0):
        if seqs <= _MLLAMA_SEQS_STARTED_PRE_07:
            return
        why = f"before 0.7.0 the profile of {seqs:,} such sequences runs out of memory (256 failed on 80 GB cards, 32 started)"
    else:
        if ctx.gpu is None:
            return  # the budget needs the card
        tp = int(ctx.flags.get("tensor_parallel_size") or 1)
        util = float(ctx.flags.get("gpu_memory_utilization") or 0.9)
        budget = util * ctx.gpu.total_bytes - ctx.other_gpu_use_bytes
        weights, peak = _mllama_weight_bytes(cfg) / tp, seqs * _mllama_peak_per_seq() / tp
        numbers.update(weights_gib=round(weights / GiB, 2), profile_peak_gib=round(peak / GiB, 2), budget_gib=round(budget / GiB, 2))
        if weights + peak <= budget:
            return
        why = f"weights ≈ {gib(weights)} plus a profile peak ≈ {gib(peak)} (0.29 GiB per sequence, PR #12126) exceed the {gib(budget)} budget per GPU"
    fix = [ctx.edit("max_num_seqs", _MLLAMA_SEQS_ADVISED)]
    if not ctx.flags.get("enforce_eager"):
        fix.append(ctx.edit("enforce_eager", True))
    yield r.finding(
        ctx,
        f"max-num-seqs {seqs:,}{' (the default)' if default else ''}: vLLM {ctx.version_label}'s encoder-decoder profile gives each "
        f"dummy sequence a full-size image (4 tiles × 1,601 patches, {seqs * 4 * 1601:,} patches in all); {why}. "
        f"Use --max-num-seqs {_MLLAMA_SEQS_ADVISED}" + (" --enforce-eager." if len(fix) > 1 else "."),
        dests=["max_num_seqs", "enforce_eager"],
        fix=fix,
        numbers=numbers,
    )
