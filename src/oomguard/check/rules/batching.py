"""OG1xx: the per-step token budget (``--max-num-batched-tokens``) and the activation peak.

The transient activation memory of a prefill step grows with the tokens
processed in that step, not with the context length. vLLM's start-up profile
run executes one step of ``max_num_batched_tokens`` tokens, and a long prompt
at run time does the same, so a budget tied to a very long context makes every
long prefill materialise activations for the whole prompt (S1, S2).
"""

from __future__ import annotations

from oomguard.check.finding import Severity
from oomguard.check.rule import rule
from oomguard.check.rules.common import (
    gib,
    memory_failure,
    peak_activation,
    suggest_chunk,
)
from oomguard.model.failures import FailureClass
from oomguard.model.failures import FailureClass as F

_LONG = 32768


@rule(
    "OG101",
    "batched-tokens-at-long-context",
    title="Token budget per step equals a very long context",
    severity=Severity.ERROR,
    why="""`--max-num-batched-tokens` sets how many tokens one forward step may process. Set
    equal (or close) to a very long `--max-model-len`, one long prompt is prefilled in a single
    step, and that step's activations (hidden states, MLP intermediates, attention workspaces)
    scale with the whole prompt: vLLM's start-up profile run executes exactly that step and
    dies with `torch.OutOfMemoryError`, or, if it passes, the first long request does.
    Lowering `--gpu-memory-utilization` does not help; chunking the prefill does.""",
    fix="""Chunked prefill with a budget from the chunked-prefill table (8192, 4096, 2048, 1024, 512, 256): the
    largest whose predicted activation peak stays under 10 % of the GPU's headroom after weights
    and whose re-planned launch starts. The predicted peak before and after is reported.""",
    example="vllm serve MODEL --max-model-len 1048576 --max-num-batched-tokens 1048576",
    use_instead="vllm serve MODEL --max-model-len 1048576 --max-num-batched-tokens 8192",
    predicts=(F.PROFILE_OOM, F.RUNTIME_OOM, F.KV_TOO_SMALL, F.NO_KV_MEMORY),
)
def batched_tokens_at_long_context(ctx):
    r = batched_tokens_at_long_context.rule
    plan = ctx.plan
    s = plan.settings
    T, L = s.max_num_batched_tokens, s.max_model_len
    if not ctx.is_set("max_num_batched_tokens") or L < _LONG or T < L // 2 or T <= 16384:
        return
    if not s.enable_chunked_prefill:
        return  # OG102/OG103 speak about the unchunked case
    t, after, edits = suggest_chunk(ctx)
    if t is None:
        return
    before_peak = peak_activation(plan)
    fails = memory_failure(plan) and plan.failure in (FailureClass.PROFILE_OOM, FailureClass.NO_KV_MEMORY, FailureClass.KV_TOO_SMALL)
    sev = Severity.ERROR if fails or before_peak > 0.25 * plan.gpu.total_bytes else Severity.WARNING
    verdict = f"the launch will not start ({plan.failure.value})" if not plan.starts else "the first long prompt takes the same step at run time"
    yield r.finding(
        ctx,
        f"--max-num-batched-tokens {T:,} lets one step prefill a {L:,}-token prompt at once: the predicted activation peak is "
        f"{gib(before_peak)} per GPU ({verdict}). With --max-num-batched-tokens {t:,} the peak is {gib(peak_activation(after))} and a "
        f"{L:,}-token prompt takes {-(-L // t)} steps.",
        dests=["max_num_batched_tokens", "max_model_len"],
        severity=sev,
        fix=edits,
        numbers={
            "max_num_batched_tokens": T,
            "max_model_len": L,
            "activation_peak_gib_before": round(before_peak / 2**30, 2),
            "activation_peak_gib_after": round(peak_activation(after) / 2**30, 2),
            "suggested_max_num_batched_tokens": t,
            "prefill_steps_after": -(-L // t),
        },
    )


@rule(
    "OG102",
    "unchunked-budget-below-max-model-len",
    title="Chunked prefill off with a token budget below max-model-len",
    severity=Severity.ERROR,
    why="""Without chunked prefill a prompt must be scheduled in one step, so vLLM refuses to
    start when `--max-num-batched-tokens` is smaller than `--max-model-len` ("max_num_batched_tokens
    (T) is smaller than max_model_len (L) ... Please increase max_num_batched_tokens or decrease
    max_model_len"). Chunked prefill is off when `--no-enable-chunked-prefill` is given, and by
    default on the V0 engine (vLLM < 0.8) for contexts up to 32K.""",
    fix="""Turn chunked prefill on (`--enable-chunked-prefill`), which keeps the smaller budget and
    lets long prompts be prefilled in several steps.""",
    example="vllm serve MODEL --no-enable-chunked-prefill --max-model-len 32768 --max-num-batched-tokens 8192",
    use_instead="vllm serve MODEL --enable-chunked-prefill --max-model-len 32768 --max-num-batched-tokens 8192",
    predicts=(F.CONFIG_ERROR, F.BAD_ARGUMENT),
)
def unchunked_budget_below_len(ctx):
    r = unchunked_budget_below_len.rule
    s = ctx.plan.settings
    if s.enable_chunked_prefill or not ctx.is_set("max_num_batched_tokens"):
        return
    T, L = s.max_num_batched_tokens, s.max_model_len
    if T >= L:
        return
    how = "--no-enable-chunked-prefill is given" if ctx.flags.get("enable_chunked_prefill") is False else f"the {s.engine} engine of vLLM {ctx.version_label} leaves it off for contexts up to 32K"
    yield r.finding(
        ctx,
        f"chunked prefill is off ({how}) and --max-num-batched-tokens {T:,} < --max-model-len {L:,}: vLLM refuses to start. "
        "Enable chunked prefill to keep the smaller budget.",
        dests=["max_num_batched_tokens", "enable_chunked_prefill", "max_model_len"],
        fix=[ctx.edit("enable_chunked_prefill", True)],
        numbers={"max_num_batched_tokens": T, "max_model_len": L},
    )


from oomguard.fit.goalfix import S2_BUDGETS, headroom_outside_budget, s2_edits, s2_option, unchunked_step_matters, unchunked_whole_prompt  # noqa: E402  (one S2 rule for check and fit)


def _act_range(plan) -> tuple[int, int, int]:
    """(estimate, low, high) of the tightest rank's activation peak."""
    r = max(plan.ranks, key=lambda x: x.activation.bytes)
    t = r.activation
    return t.bytes, (t.low if t.low is not None else t.bytes), (t.high if t.high is not None else t.bytes)


def s2_chunk(ctx, base=()):
    """S2's fix, verified by plan: chunked prefill with the first budget of S2's table whose
    re-planned launch starts (max-num-seqs lowered to the budget when it is larger).
    Returns (tokens, plan, edits) or (None, None, [])."""
    base = [e for e in base if e.dest not in ("max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill")]
    for t in S2_BUDGETS:
        edits = base + [ctx.edit(d, v) for d, v in s2_edits(ctx.plan, t).items()]
        p = ctx.replan(edits)
        if p.starts or p.failure not in (FailureClass.PROFILE_OOM, FailureClass.NO_KV_MEMORY, FailureClass.STARTUP_FREE_MEMORY):
            return t, p, edits
    return None, None, []


@rule(
    "OG103",
    "unchunked-prefill-step",
    title="Without chunked prefill each prefill step processes a whole prompt",
    severity=Severity.ERROR,
    why="""When chunked prefill is off and `--max-num-batched-tokens` is not given, vLLM sets the
    budget to `max(max_model_len, default)`: the start-up profile run measures one step of that many
    tokens, and every long prompt at run time is prefilled in one such step. The V0 engine (vLLM
    < 0.8) did this by default for any context up to 32K. The profile counts what PyTorch allocated
    at its peak; under traffic each new largest prefill (a longer prompt, a few more concurrent
    requests) grows the caching allocator's reserved pool once, and it stays: nvidia-smi shows memory
    climbing in steps until one step has nowhere to go (an OOM after hours of traffic).
    Lowering `--gpu-memory-utilization` does not bound that peak; chunking the prefill does. On
    long contexts the unchunked activation peak alone can exceed the card at start-up. The rule
    speaks only when the step matters: the profile fails on it; one max-length prompt's step is
    larger than what the launch leaves outside its budget (the room the allocator's growth past
    the profile can take); or TP spans more than two GPUs without NVLink, where custom all-reduce
    is off and each step's all-reduces run through NCCL outside the profile.""",
    fix="""Chunked prefill with the budget for ordinary online serving, `--enable-chunked-prefill
    --max-num-batched-tokens 1024` (512, then 256, when the re-planned launch does not start with
    1024), with `--max-num-seqs` no larger than the budget. The re-planned peak is reported next to
    the unchunked one. On releases where chunked prefill is the default this rule is silent.""",
    example="vllm serve MODEL --tensor-parallel-size 8 --max-model-len 8192   # vLLM 0.6.x",
    use_instead="vllm serve MODEL --tensor-parallel-size 8 --max-model-len 8192 --enable-chunked-prefill --max-num-batched-tokens 1024",
    predicts=(F.PROFILE_OOM, F.RUNTIME_OOM, F.KV_TOO_SMALL, F.NO_KV_MEMORY),
)
def unchunked_profile(ctx):
    r = unchunked_profile.rule
    plan = ctx.plan
    s = plan.settings
    if not unchunked_whole_prompt(plan, ctx.flags):
        return
    L, T = s.max_model_len, s.max_num_batched_tokens
    # one long prompt on its own: the same plan with a single sequence, so the step's forward
    # activations show without the sampler rows of a full decode batch
    one = [ctx.edit("max_num_seqs", 1)]
    one_plan = ctx.replan(one)
    why = unchunked_step_matters(plan, one_plan)
    if why is None:
        return  # the step fits what the launch leaves outside its budget, on NVLink or <= 2 GPUs
    if plan.starts:
        # the launch starts: fit --from's first answer too (goalfix.s2_option), the headroom floor kept
        o = s2_option(ctx.plan_with, dict(ctx.flags), dict(ctx.env), plan, other_gpu_use_bytes=ctx.other_gpu_use_bytes)
        if o is None:
            return
        t, after, edits = dict(o.edits)["max_num_batched_tokens"], o.plan, [ctx.edit(d, v) for d, v in o.edits]
    else:
        t, after, edits = s2_chunk(ctx)
        if t is None:
            return
    before, lo, hi = _act_range(plan)
    a_after, a_lo, a_hi = _act_range(after)
    p_whole, _, p_whole_hi = _act_range(one_plan)
    room = headroom_outside_budget(plan)
    risk = {
        "fails": "",
        "headroom": f" One such step is more than the {gib(room)} the launch leaves outside its budget, so the allocator's first growth past the profile has nowhere to go.",
        "pcie-nccl": f" The step is spread over {plan.num_gpus} GPUs on PCIe without NVLink: custom all-reduce is off, so each whole-prompt step's all-reduces run through NCCL, outside what the profile counted.",
    }[why]
    p_chunk, _, p_chunk_hi = _act_range(ctx.replan([e for e in edits if e.dest != "max_num_seqs"] + one))
    by_default = ctx.flags.get("enable_chunked_prefill") is None
    why_off = (
        f"vLLM {ctx.version_label} ({s.engine}) leaves chunked prefill off for max-model-len up to 32,768"
        if by_default
        else "--no-enable-chunked-prefill"
    )
    sev = Severity.ERROR if memory_failure(plan) and after.starts else Severity.WARNING
    outcome = (
        f"the launch will not start ({plan.failure.value})"
        if not plan.starts
        else "start-up passes, but each new largest prefill grows PyTorch's reserved pool beyond what the profile counted "
        "(memory climbing in steps, then torch.OutOfMemoryError under traffic)"
    )
    quant = getattr(ctx.model, "quantization", None)
    qname = str(getattr(quant, "method", quant) or "").lower()
    caveat = (
        f" On V0, confirm that the {qname.upper()} kernel of this release accepts chunked prefill (older releases refused some)."
        if s.engine == "V0" and any(k in qname for k in ("awq", "gptq"))
        else ""
    )
    yield r.finding(
        ctx,
        f"{why_off}, so each prefill step processes up to {T:,} tokens (max(max_model_len, default)): one {L:,}-token prompt "
        f"is prefilled in a single step costing {gib(p_whole)} of activations per GPU (up to {gib(p_whole_hi)}); the profile "
        f"peak is {gib(before)} (range {gib(lo)}–{gib(hi)}); {outcome}. With --enable-chunked-prefill --max-num-batched-tokens "
        f"{t:,} (the budget for ordinary online serving) a prompt's step costs {gib(p_chunk)} (up to {gib(p_chunk_hi)}), the profile peak "
        f"is {gib(a_after)} (range {gib(a_lo)}–{gib(a_hi)}), a {L:,}-token prompt takes {-(-L // t)} steps, and the launch "
        + ("starts" if after.starts else f"still fails for another reason ({after.failure.value})")
        + f" with {after.kv_cache_tokens:,} KV tokens"
        + (f" (with --gpu-memory-utilization {after.settings.gpu_memory_utilization}, which keeps the headroom floor free at the peak)"
           if any(e.dest == "gpu_memory_utilization" for e in edits) else "")
        + f".{risk}{caveat}",
        dests=["enable_chunked_prefill", "max_model_len"],
        severity=sev,
        fix=edits,
        numbers={
            "tokens_per_step": T,
            "prompt_step_activation_gib_before": round(p_whole / 2**30, 2),
            "prompt_step_activation_gib_after": round(p_chunk / 2**30, 2),
            "chunked_by_default": False,
            "activation_peak_gib_before": round(before / 2**30, 2),
            "activation_peak_range_gib_before": [round(lo / 2**30, 2), round(hi / 2**30, 2)],
            "activation_peak_gib_after": round(a_after / 2**30, 2),
            "activation_peak_range_gib_after": [round(a_lo / 2**30, 2), round(a_hi / 2**30, 2)],
            "suggested_max_num_batched_tokens": t,
            "kv_cache_tokens_after": after.kv_cache_tokens,
            "starts_after": after.starts,
            "risk": why,
            "headroom_outside_budget_gib": round(room / 2**30, 2),
        },
    )


@rule(
    "OG104",
    "large-token-budget",
    title="Token budget far above what the GPU's headroom supports",
    severity=Severity.ERROR,
    why="""A per-step budget above vLLM's own defaults (2048–16384) buys little throughput once
    the GPU is compute-bound, but the activation peak grows linearly with it and is taken from
    the KV cache pool (or, at run time, from nothing). Operators who hit this bounded the peak first
    (256–1024), then raised the budget step by step while watching memory.""",
    fix="""The largest budget from the chunked-prefill table whose predicted activation peak stays under 10 % of
    the headroom after weights and whose launch starts.""",
    example="vllm serve MODEL --max-num-batched-tokens 65536",
    use_instead="vllm serve MODEL --max-num-batched-tokens 8192",
    predicts=(F.PROFILE_OOM, F.RUNTIME_OOM, F.NO_KV_MEMORY, F.KV_TOO_SMALL),
)
def large_token_budget(ctx):
    r = large_token_budget.rule
    plan = ctx.plan
    s = plan.settings
    T, L = s.max_num_batched_tokens, s.max_model_len
    if not ctx.is_set("max_num_batched_tokens") or T <= 16384:
        return
    if s.enable_chunked_prefill and L >= _LONG and T >= L // 2:
        return  # OG101
    if not s.enable_chunked_prefill and T < L:
        return  # OG102
    before = peak_activation(plan)
    if before < 0.05 * plan.gpu.total_bytes and plan.starts:
        return
    t, after, edits = suggest_chunk(ctx)
    if t is None or t >= T:
        return
    sev = Severity.ERROR if memory_failure(plan) and after.starts else Severity.WARNING
    yield r.finding(
        ctx,
        f"--max-num-batched-tokens {T:,} gives a predicted activation peak of {gib(before)} per GPU "
        f"({before / plan.gpu.total_bytes:.0%} of the card)"
        + (f"; the launch will not start ({plan.failure.value})" if not plan.starts else "")
        + f". {t:,} keeps it at {gib(peak_activation(after))}.",
        dests=["max_num_batched_tokens"],
        severity=sev,
        fix=edits,
        numbers={
            "activation_peak_gib_before": round(before / 2**30, 2),
            "activation_peak_gib_after": round(peak_activation(after) / 2**30, 2),
            "suggested_max_num_batched_tokens": t,
        },
    )


@rule(
    "OG105",
    "budget-below-max-num-seqs",
    title="Token budget smaller than max-num-seqs",
    severity=Severity.ERROR,
    why="""Every running sequence needs at least one token of the per-step budget, so vLLM rejects
    `--max-num-batched-tokens` smaller than `--max-num-seqs` at start-up ("max_num_batched_tokens
    (T) must be greater than or equal to max_num_seqs (S)").""",
    fix="""Lower `--max-num-seqs` to the budget when you set it; otherwise raise the budget to
    `max-num-seqs`.""",
    example="vllm serve MODEL --max-num-batched-tokens 128 --max-num-seqs 256",
    use_instead="vllm serve MODEL --max-num-batched-tokens 256 --max-num-seqs 256",
    predicts=(F.CONFIG_ERROR, F.BAD_ARGUMENT),
)
def budget_below_seqs(ctx):
    r = budget_below_seqs.rule
    s = ctx.plan.settings
    T, S = s.max_num_batched_tokens, s.max_num_seqs
    if T >= S or not (ctx.is_set("max_num_batched_tokens") or ctx.is_set("max_num_seqs")):
        return
    fix = [ctx.edit("max_num_seqs", T)] if ctx.is_set("max_num_seqs") else [ctx.edit("max_num_batched_tokens", S)]
    yield r.finding(
        ctx,
        f"--max-num-batched-tokens {T:,} is smaller than max-num-seqs {S:,}: vLLM refuses to start.",
        dests=["max_num_batched_tokens", "max_num_seqs"],
        fix=fix,
        numbers={"max_num_batched_tokens": T, "max_num_seqs": S},
    )


@rule(
    "OG106",
    "tiny-token-budget",
    title="Token budget so small it costs throughput",
    severity=Severity.INFO,
    why="""A budget of a few hundred tokens bounds the activation peak tightly, but long prompts
    then take many steps and decode batches are starved: operators have seen 256 halve their
    throughput and lengthen TTFT, while 1024 kept the peak under control with throughput
    restored. Use the smallest budgets only while memory is tight.""",
    fix="""1024 when the re-planned launch still starts and its activation peak stays under 10 %
    of the headroom after weights.""",
    example="vllm serve MODEL --max-num-batched-tokens 256",
    use_instead="vllm serve MODEL --max-num-batched-tokens 1024",
)
def tiny_token_budget(ctx):
    r = tiny_token_budget.rule
    plan = ctx.plan
    s = plan.settings
    T = s.max_num_batched_tokens
    if not ctx.is_set("max_num_batched_tokens") or T >= 512 or not plan.starts:
        return
    edits = [ctx.edit("max_num_batched_tokens", 1024)]
    if s.max_num_seqs > 1024 and ctx.is_set("max_num_seqs"):
        return
    after = ctx.replan(edits)
    if not after.starts:
        return
    from oomguard.check.rules.common import headroom_after_weights

    if peak_activation(after) > 0.10 * headroom_after_weights(ctx, after):
        return
    yield r.finding(
        ctx,
        f"--max-num-batched-tokens {T} bounds the peak at {gib(peak_activation(plan))} but a {s.max_model_len:,}-token prompt "
        f"takes {-(-s.max_model_len // T)} steps; 1024 would cost {gib(peak_activation(after))} and still start.",
        dests=["max_num_batched_tokens"],
        fix=edits,
        numbers={"activation_peak_gib_at_1024": round(peak_activation(after) / 2**30, 2)},
    )
