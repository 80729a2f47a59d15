"""OG2xx: KV cache capacity — one request of max-model-len, concurrency, explicit pool sizes.

vLLM sizes the KV pool at start-up (what the memory budget leaves, or
``--kv-cache-memory-bytes``) and then checks that one request of
``max_model_len`` tokens fits. Everything else is a capacity question: how many
sequences of the traffic's real length fit at once.
"""

from __future__ import annotations

from oomguard.check.finding import Severity
from oomguard.check.rule import rule
from oomguard.check.rules.common import gib, round_down, round_len
from oomguard.model.non_torch import CUDA_CONTEXT_BYTES
from oomguard.model.failures import FailureClass
from oomguard.model.failures import FailureClass as F
from oomguard.model.engine import mamba_blocks_per_request
from oomguard.units import GiB, MiB

# failures vLLM raises before (or independently of) sizing the pool: the pool's numbers still hold
_BEFORE_POOL = (FailureClass.MAX_LEN_EXCEEDS_MODEL, FailureClass.CONFIG_ERROR, FailureClass.STARTUP_FREE_MEMORY)


def kv_short(plan) -> bool:
    """One max-model-len request does not fit the pool (also when vLLM would stop earlier
    for a reason another rule reports)."""
    if plan.failure is FailureClass.KV_TOO_SMALL:
        return True
    if plan.failure is not None and plan.failure not in _BEFORE_POOL:
        return False
    t = plan.tight_rank
    avail = t.kv_bytes - t.layout.bytes_per_block
    return avail > 0 and plan.one_request_bytes > avail


def _fitting_len(ctx, plan) -> tuple[int | None, object]:
    """A round max-model-len at or below the plan's largest fitting length that fits the pool."""
    fit = plan.max_fitting_len or 0
    cand = round_len(fit)
    for _ in range(12):
        if cand < 16:
            return None, None
        p = ctx.replan([ctx.edit("max_model_len", cand)])
        if not kv_short(p) and (p.starts or p.failure in _BEFORE_POOL):
            return cand, p
        if not kv_short(p):
            return None, None
        cand = round_len(int(cand * 0.9))
    return None, None


def _util_that_fits(ctx, *, limit: float = 0.95) -> float | None:
    """The smallest --gpu-memory-utilization (0.01 steps, at most ``limit``) that makes the launch start."""
    if ctx.is_set("kv_cache_memory_bytes"):
        return None
    if ctx.other_gpu_use_bytes > 0:
        # a shared card keeps room for the neighbours to double (OG302)
        total = ctx.plan.gpu.total_bytes
        free = total - CUDA_CONTEXT_BYTES - 2 * ctx.other_gpu_use_bytes - 2 * GiB
        limit = min(limit, round_down(free / total, 0.01))
    u = round(ctx.plan.settings.gpu_memory_utilization + 0.01, 2)
    while u <= limit + 1e-9:
        p = ctx.replan([ctx.edit("gpu_memory_utilization", u)])
        if p.starts or (p.failure in _BEFORE_POOL and not kv_short(p)):
            return u
        u = round(u + 0.01, 2)
    return None


@rule(
    "OG201",
    "kv-too-small-for-max-model-len",
    title="max-model-len does not fit in the KV cache pool",
    severity=Severity.ERROR,
    why="""After weights, activations and graphs, the KV cache pool must hold at least one request
    of `max_model_len` tokens; otherwise vLLM stops at start-up with "To serve at least one request
    with the model's max seq len (L), (X GiB KV cache is needed, which is larger than the available
    KV cache memory (Y GiB)" (V0: "The model's max seq len (L) is larger than the maximum number of
    tokens that can be stored in KV cache"). A CPU offloading tier does not change this: a running
    request's KV lives on the GPU.""",
    fix="""`--max-model-len` set to the largest length that fits (rounded down to a multiple of 1024
    and re-planned to start). When a higher `--gpu-memory-utilization` (≤ 0.95) or a larger
    `--kv-cache-memory-bytes` would fit the length instead, the message says so.""",
    example="vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072   # on a 24 GB card",
    use_instead="vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 40960",
    predicts=(F.KV_TOO_SMALL,),
)
def kv_too_small(ctx):
    r = kv_too_small.rule
    plan = ctx.plan
    if not kv_short(plan):
        return
    s = plan.settings
    L = s.max_model_len
    tight = plan.tight_rank
    avail = max(0, tight.kv_bytes - tight.layout.bytes_per_block)
    new_len, after = _fitting_len(ctx, plan)
    alt = ""
    u = _util_that_fits(ctx)
    if u is not None:
        alt = f" Alternatively --gpu-memory-utilization {u} fits {L:,} tokens."
    elif s.kv_cache_memory_bytes is not None:
        need = plan.one_request_bytes + tight.layout.bytes_per_block
        room = tight.total_bytes - tight.weights.bytes - tight.non_torch.bytes - tight.activation.bytes - tight.cuda_graph.bytes - plan.outside_bytes
        if need <= room - 256 * MiB:
            alt = f" Alternatively --kv-cache-memory-bytes {int(-(-need // (256 * MiB)) * 256 * MiB)} ({gib(need)}) fits {L:,} tokens."
        else:
            alt = f" Even the whole card ({gib(max(room, 0))} after weights and activations) cannot hold one {L:,}-token request: it needs {gib(need)} per GPU."
    if s.kv_cache_dtype == "auto" and ctx.model.dtype_bytes == 2:
        p8 = ctx.replan([ctx.edit("kv_cache_dtype", "fp8")])
        if p8.starts or (p8.failure in _BEFORE_POOL and not kv_short(p8)):
            alt += f" Or --kv-cache-dtype fp8 halves the KV bytes and keeps {L:,} tokens ({p8.kv_cache_tokens:,} in the pool)."
    fix = [ctx.edit("max_model_len", new_len)] if new_len else []
    yield r.finding(
        ctx,
        f"one {L:,}-token request needs {gib(plan.one_request_bytes)} of KV cache per GPU but the pool has {gib(avail)} "
        f"({plan.kv_cache_tokens:,} tokens): vLLM will stop at start-up. Largest max-model-len the KV pool holds: {plan.max_fitting_len:,}."
        + (f" Use --max-model-len {new_len:,}." if new_len else "")
        + alt,
        dests=["max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes"] if ctx.is_set("max_model_len") else ["gpu_memory_utilization", "kv_cache_memory_bytes"],
        fix=fix,
        numbers={
            "max_model_len": L,
            "one_request_kv_gib": round(plan.one_request_bytes / GiB, 2),
            "available_kv_gib": round(avail / GiB, 2),
            "kv_cache_tokens": plan.kv_cache_tokens,
            "max_fitting_len": plan.max_fitting_len,
            "suggested_max_model_len": new_len,
            "utilization_that_fits": u,
        },
    )


@rule(
    "OG202",
    "no-kv-memory",
    title="Nothing is left for the KV cache",
    severity=Severity.ERROR,
    why="""`--gpu-memory-utilization` × the card is the whole budget; weights, non-torch memory,
    the profile run's activation peak and (vLLM ≥ 0.20) the CUDA-graph estimate come out of it
    first. When they take it all, vLLM stops with "No available memory for the cache blocks".""",
    fix="""The smallest `--gpu-memory-utilization` ≤ 0.95 that starts; else a smaller token budget;
    else a larger tensor-parallel size when more GPUs are available. Quantization or CPU offload
    are named when nothing else fits.""",
    example="vllm serve MODEL --gpu-memory-utilization 0.5   # weights take 60 % of the card",
    use_instead="vllm serve MODEL --gpu-memory-utilization 0.9",
    predicts=(F.NO_KV_MEMORY,),
)
def no_kv_memory(ctx):
    r = no_kv_memory.rule
    plan = ctx.plan
    if plan.failure is not FailureClass.NO_KV_MEMORY:
        return
    t = plan.tight_rank
    s = plan.settings
    fix = []
    how = ""
    u = _util_that_fits(ctx)
    if u is not None:
        fix = [ctx.edit("gpu_memory_utilization", u)]
        how = f" --gpu-memory-utilization {u} starts."
    else:
        from oomguard.check.rules.common import suggest_chunk

        tok, p, edits = suggest_chunk(ctx)
        if tok is not None and tok < s.max_num_batched_tokens:
            fix, how = edits, f" --max-num-batched-tokens {tok} starts."
        else:
            from oomguard.check.rules.parallel import larger_tp

            tp, _ = larger_tp(ctx)
            if tp:
                fix, how = [ctx.edit("tensor_parallel_size", tp)], f" --tensor-parallel-size {tp} starts."
            else:
                how = " Nothing on this card fits: quantize the model, use more GPUs, or a larger card."
    graphs = f" − CUDA graphs {gib(t.cuda_graph.bytes)}" if s.estimate_cudagraphs and t.cuda_graph.bytes else ""
    yield r.finding(
        ctx,
        f"the budget {gib(t.requested_bytes)} (× {s.gpu_memory_utilization}) − weights {gib(t.weights.bytes)} − non-torch {gib(t.non_torch.bytes)} "
        f"− activation {gib(t.activation.bytes)}{graphs} = {gib(t.kv_bytes)} for the KV cache: vLLM stops with 'No available memory for the cache blocks'." + how,
        dests=["gpu_memory_utilization"],
        fix=fix,
        numbers={"requested_gib": round(t.requested_bytes / GiB, 2), "kv_gib": round(t.kv_bytes / GiB, 2), "weights_gib": round(t.weights.bytes / GiB, 2)},
    )


@rule(
    "OG203",
    "max-num-seqs-above-kv-capacity",
    title="max-num-seqs far above what the KV pool holds at the real input length",
    severity=Severity.WARNING,
    why="""The question is "average input length × concurrency ≤ KV capacity?", not "how many
    sequences?". When `--max-num-seqs` is far above what the pool holds at the traffic's average
    length, the limit is never reached: requests queue or are preempted (recomputed) once the pool
    fills, while the sampler and CUDA graphs are still sized for the larger batch. Given with
    `--avg-input-len` (and `--avg-output-len`, `--concurrency`).""",
    fix="""`--max-num-seqs` set to the number of average-length sequences the pool holds.""",
    example="oomguard check start_api.sh --avg-input-len 32768   # --max-num-seqs 96, pool of 327,680 tokens",
    use_instead="--max-num-seqs 10",
)
def seqs_above_capacity(ctx):
    r = seqs_above_capacity.rule
    plan = ctx.plan
    isl = ctx.options.avg_input_len
    if not isl or plan.num_gpu_blocks <= 0:
        return
    per_seq = isl + (ctx.options.avg_output_len or 0)
    tokens = plan.kv_cache_tokens
    cap = tokens / per_seq
    S = plan.settings.max_num_seqs
    conc = ctx.options.concurrency
    numbers = {"kv_cache_tokens": tokens, "avg_tokens_per_sequence": per_seq, "sequences_that_fit": round(cap, 1), "max_num_seqs": S}
    if conc:
        numbers["concurrency"] = conc
        if conc * per_seq > tokens:
            yield r.finding(
                ctx,
                f"{conc} concurrent requests × {per_seq:,} tokens = {conc * per_seq:,} tokens, but the KV pool holds {tokens:,}: "
                f"about {max(int(cap), 0)} run at once and the rest queue (or are preempted and recomputed).",
                dests=["max_num_seqs"],
                numbers=numbers,
            )
    if 2 * max(cap, 1) < S:
        new = max(1, round(cap) if abs(cap - round(cap)) < 0.01 else int(cap))
        yield r.finding(
            ctx,
            f"at an average of {per_seq:,} tokens per sequence the pool ({tokens:,} tokens) holds about {cap:.1f} sequences, "
            f"so --max-num-seqs {S} is never reached. Size for average length × concurrency ≤ capacity: --max-num-seqs {new}.",
            dests=["max_num_seqs"],
            fix=[ctx.edit("max_num_seqs", new)],
            numbers=numbers,
        )


@rule(
    "OG204",
    "kv-cache-memory-bytes-set",
    title="--kv-cache-memory-bytes replaces profiling: the headroom is yours",
    severity=Severity.ERROR,
    why="""With `--kv-cache-memory-bytes` (or its abbreviation `--kv-cache-memory`) vLLM skips the
    memory measurement: the value is the KV pool per GPU as-is, `--gpu-memory-utilization` no
    longer sizes the pool but is still checked at start-up (free memory ≥ total × utilization),
    and nothing checks that weights + KV + activation peak + CUDA graphs fit on the card. If they
    do not, the first long prefill (or graph capture) runs out of memory.""",
    fix="""When the sum exceeds the card: the largest `--kv-cache-memory-bytes` (multiple of 256 MiB)
    that leaves 0.5 GiB free after weights, activation peak, graphs and the CUDA context.""",
    example="vllm serve MODEL --kv-cache-memory-bytes 20G   # 24 GB card, 8 GiB of weights",
    use_instead="vllm serve MODEL --kv-cache-memory-bytes 14G",
    predicts=(F.PROFILE_OOM, F.RUNTIME_OOM, F.CUDAGRAPH_OOM),
)
def kv_bytes_set(ctx):
    r = kv_bytes_set.rule
    plan = ctx.plan
    s = plan.settings
    if s.kv_cache_memory_bytes is None:
        return
    kv = s.kv_cache_memory_bytes
    worst = max(plan.ranks, key=lambda x: x.weights.bytes + x.activation.bytes + x.cuda_graph.bytes + x.non_torch.bytes)
    other = worst.weights.bytes + worst.non_torch.bytes + worst.activation.bytes + worst.cuda_graph.bytes + plan.outside_bytes
    total = worst.total_bytes
    free = total - other - kv
    numbers = {
        "kv_cache_memory_gib": round(kv / GiB, 2),
        "weights_gib": round(worst.weights.bytes / GiB, 2),
        "activation_peak_gib": round(worst.activation.bytes / GiB, 2),
        "cuda_graph_gib": round(worst.cuda_graph.bytes / GiB, 2),
        "left_on_card_gib": round(free / GiB, 2),
        "kv_cache_tokens": plan.kv_cache_tokens,
    }
    util_note = (
        f" --gpu-memory-utilization {s.gpu_memory_utilization} no longer sizes the pool but still requires {gib(plan.tight_rank.requested_bytes)} free at start-up."
    )
    if free < 512 * MiB:
        new = int(round_down(total - other - 512 * MiB, 256 * MiB))
        if new < 256 * MiB:
            return  # weights and the activation peak alone overflow: OG101/OG104/OG305 say why
        fix = [ctx.edit("kv_cache_memory_bytes", new)] if new > 0 else []
        yield r.finding(
            ctx,
            f"--kv-cache-memory-bytes {gib(kv)} + weights {gib(worst.weights.bytes)} + activation peak {gib(worst.activation.bytes)} "
            f"+ CUDA graphs {gib(worst.cuda_graph.bytes)} + context and others exceed the {gib(total)} card by {gib(-free + 512 * MiB)} "
            "(with 0.5 GiB to spare); vLLM does not check this and runs out of memory."
            + (f" Use --kv-cache-memory-bytes {new} ({gib(new)})." if new > 0 else ""),
            dests=["kv_cache_memory_bytes"],
            fix=fix,
            numbers=numbers,
        )
        return
    yield r.finding(
        ctx,
        f"--kv-cache-memory-bytes fixes the KV pool at {gib(kv)} per GPU ({plan.kv_cache_tokens:,} tokens); "
        f"{gib(free)} stay free on the card after weights, the predicted activation peak and graphs." + util_note,
        dests=["kv_cache_memory_bytes", "gpu_memory_utilization"],
        severity=Severity.WARNING if free < 1 * GiB else Severity.INFO,
        numbers=numbers,
    )


@rule(
    "OG205",
    "num-gpu-blocks-override",
    title="--num-gpu-blocks-override bypasses the memory check",
    severity=Severity.ERROR,
    why="""`--num-gpu-blocks-override` replaces the profiled block count, for testing. vLLM then
    allocates that many blocks whatever the memory says (more than fits: out of memory at
    start-up or later), and a pool smaller than one `max_model_len` request cannot serve it.""",
    fix="""Remove the override and let vLLM size the pool.""",
    example="vllm serve MODEL --num-gpu-blocks-override 2048 --max-model-len 34048",
    use_instead="vllm serve MODEL --max-model-len 34048",
    predicts=(F.KV_TOO_SMALL, F.RUNTIME_OOM),
)
def blocks_override(ctx):
    r = blocks_override.rule
    n = ctx.flags.get("num_gpu_blocks_override")
    if not n:
        return
    plan = ctx.plan
    profiled = ctx.replan([ctx.edit("num_gpu_blocks_override", None)])
    tokens = int(n) * plan.block_size
    L = plan.settings.max_model_len
    fix = [ctx.edit("num_gpu_blocks_override", None)]
    if int(n) > profiled.num_gpu_blocks:
        yield r.finding(ctx, f"{n} blocks forced, but only {profiled.num_gpu_blocks:,} fit in the memory budget: the pool will not fit on the GPU.", dests=["num_gpu_blocks_override"], fix=fix, numbers={"override_blocks": int(n), "profiled_blocks": profiled.num_gpu_blocks})
    elif plan.failure is FailureClass.KV_TOO_SMALL or tokens < L:
        yield r.finding(ctx, f"{n} blocks × {plan.block_size} tokens = {tokens:,} tokens cannot hold one {L:,}-token request: vLLM stops at start-up.", dests=["num_gpu_blocks_override", "max_model_len"], fix=fix, numbers={"override_tokens": tokens, "max_model_len": L})
    else:
        yield r.finding(ctx, f"--num-gpu-blocks-override {n} fixes the pool at {tokens:,} tokens (the budget would give {profiled.num_gpu_blocks:,} blocks); it is meant for tests.", dests=["num_gpu_blocks_override"], severity=Severity.WARNING, fix=fix)


@rule(
    "OG206",
    "mamba-state-limit",
    title="Hybrid model: max-num-seqs above the Mamba state blocks",
    severity=Severity.ERROR,
    why="""Hybrid models (Mamba, Gated DeltaNet, linear attention layers) keep a fixed-size state
    per running sequence, one block per sequence and group (plus one per speculative token, plus
    one with prefix caching in align mode). When the pool's blocks cannot give every one of
    `--max-num-seqs` sequences its state, vLLM caps or refuses the concurrency.""",
    fix="""`--max-num-seqs` set to the sequences whose state blocks fit.""",
    example="vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --max-num-seqs 1024 --gpu-memory-utilization 0.6",
    use_instead="vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --max-num-seqs 256 --gpu-memory-utilization 0.6",
    predicts=(F.MAMBA_STATE_LIMIT,),
)
def mamba_state(ctx):
    r = mamba_state.rule
    plan = ctx.plan
    if not ctx.model.is_hybrid or not plan.starts:
        return
    if not any(g.kind == "mamba" for g in plan.layout.groups):
        return
    s = plan.settings
    per_seq = mamba_blocks_per_request(ctx.model, s)
    fit = (plan.num_gpu_blocks - 1) // per_seq
    if s.max_num_seqs <= fit:
        return
    new = max(1, fit)
    yield r.finding(
        ctx,
        f"{s.max_num_seqs} sequences need {s.max_num_seqs * per_seq:,} state blocks per group ({per_seq} each) but the pool has {plan.num_gpu_blocks:,}: "
        f"at most {fit} sequences run. Use --max-num-seqs {new}.",
        dests=["max_num_seqs"],
        fix=[ctx.edit("max_num_seqs", new)],
        numbers={"num_gpu_blocks": plan.num_gpu_blocks, "state_blocks_per_seq": per_seq, "max_seqs_that_fit": fit},
    )


@rule(
    "OG207",
    "thin-kv-pool",
    title="The KV pool holds barely one full-length request",
    severity=Severity.INFO,
    why="""A pool that holds one or two requests of `max_model_len` starts, but under load the
    scheduler preempts (recomputes) long requests as soon as a second one arrives, and TTFT
    jumps. Either the traffic is short (then say so with `--avg-input-len`), or the context is
    longer than this card serves well.""",
    fix="""None automatic: lower `--max-model-len` to what the traffic needs, or give more memory
    to the pool.""",
    example="vllm serve MODEL --max-model-len 131072   # pool of 150,000 tokens",
)
def thin_pool(ctx):
    r = thin_pool.rule
    plan = ctx.plan
    s = plan.settings
    if not plan.starts or ctx.options.avg_input_len or s.max_num_seqs < 4 or s.max_model_len < 8192:
        return
    if plan.max_concurrency >= 1.5:
        return
    yield r.finding(
        ctx,
        f"the pool holds {plan.kv_cache_tokens:,} tokens: {plan.max_concurrency:.2f} requests of {s.max_model_len:,} tokens. "
        "Long requests will preempt each other under load; pass --avg-input-len to size for your traffic.",
        dests=["max_model_len"],
        numbers={"kv_cache_tokens": plan.kv_cache_tokens, "max_concurrency": round(plan.max_concurrency, 2)},
    )

