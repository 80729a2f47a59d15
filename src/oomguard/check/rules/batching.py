"""OG1xx: the per-step token budget (``--max-num-batched-tokens``) and the activation peak.

The transient activation memory of a prefill step grows with the tokens
processed in that step, not with the context length. vLLM's start-up profile
run executes one step of ``max_num_batched_tokens`` tokens, and a long prompt
at run time does the same, so a budget tied to a very long context makes every
long prefill materialise activations for the whole prompt (S1, S2).
"""

from __future__ import annotations

from oomguard.check.finding import Severity
from oomguard.check.registry import rule
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
    fix="""Chunked prefill with a budget from the S2 table (8192, 4096, 2048, 1024, 512, 256): the
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


@rule(
    "OG103",
    "unchunked-profile-of-full-context",
    title="Without chunked prefill the profile run processes the whole context",
    severity=Severity.ERROR,
    why="""When chunked prefill is off and `--max-num-batched-tokens` is not given, vLLM sets the
    budget to `max(max_model_len, default)`: the start-up profile run then prefills a full
    `max_model_len`-token step, and every long prompt does the same at run time. The V0 engine
    (vLLM < 0.8) did this by default for any context up to 32K. On long contexts the activation
    peak alone can exceed the card.""",
    fix="""Enable chunked prefill with an explicit budget from the S2 table (the largest whose
    predicted activation peak stays under 10 % of the headroom after weights).""",
    example="vllm serve MODEL --no-enable-chunked-prefill --max-model-len 131072",
    use_instead="vllm serve MODEL --enable-chunked-prefill --max-num-batched-tokens 8192 --max-model-len 131072",
    predicts=(F.PROFILE_OOM, F.KV_TOO_SMALL, F.NO_KV_MEMORY),
)
def unchunked_profile(ctx):
    r = unchunked_profile.rule
    plan = ctx.plan
    s = plan.settings
    if s.enable_chunked_prefill or ctx.is_set("max_num_batched_tokens"):
        return
    L, T = s.max_model_len, s.max_num_batched_tokens
    if T < 8192 or T < L:
        return
    chunk_on = [ctx.edit("enable_chunked_prefill", True)]
    t, after, edits = suggest_chunk(ctx, chunk_on)
    if t is None or t >= T:
        return
    before = peak_activation(plan)
    if plan.starts and before - peak_activation(after) < max(1 << 30, 0.05 * plan.gpu.total_bytes):
        return  # the unchunked step costs little here
    sev = Severity.ERROR if memory_failure(plan) and not after.failure else Severity.WARNING
    yield r.finding(
        ctx,
        f"chunked prefill is off, so vLLM {ctx.version_label} ({s.engine}) profiles and prefills {T:,} tokens per step "
        f"(max(max_model_len, default)): predicted activation peak {gib(before)} per GPU"
        + (f" and the launch will not start ({plan.failure.value})" if not plan.starts else "")
        + f". With --enable-chunked-prefill --max-num-batched-tokens {t:,}: {gib(peak_activation(after))}.",
        dests=["enable_chunked_prefill", "max_model_len"],
        severity=sev,
        fix=edits,
        numbers={
            "profiled_tokens": T,
            "activation_peak_gib_before": round(before / 2**30, 2),
            "activation_peak_gib_after": round(peak_activation(after) / 2**30, 2),
            "suggested_max_num_batched_tokens": t,
        },
    )


@rule(
    "OG104",
    "large-token-budget",
    title="Token budget far above what the GPU's headroom supports",
    severity=Severity.ERROR,
    why="""A per-step budget above vLLM's own defaults (2048–16384) buys little throughput once
    the GPU is compute-bound, but the activation peak grows linearly with it and is taken from
    the KV cache pool (or, at run time, from nothing). S2's operators bounded the peak first
    (256–1024), then raised the budget step by step while watching memory.""",
    fix="""The largest budget from the S2 table whose predicted activation peak stays under 10 % of
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
    then take many steps and decode batches are starved: S2's operators saw 256 halve their
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
