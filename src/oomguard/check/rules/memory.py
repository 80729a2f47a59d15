"""OG3xx: the GPU memory budget — utilization, other tenants, CUDA graphs, weights, profile run.

``--gpu-memory-utilization`` is a fraction of the whole card that vLLM claims
for itself; the rest of the card is for the CUDA context, anything that sits
outside the budget (CUDA graphs before 0.20), and other processes.
"""

from __future__ import annotations

from oomguard.check.finding import Severity
from oomguard.check.rule import rule
from oomguard.check.rules.common import (
    gib,
    peak_activation,
    round_down,
    suggest_chunk,
)
from oomguard.model.failures import FailureClass
from oomguard.model.failures import FailureClass as F
from oomguard.units import GiB, MiB

from oomguard.fit.goalfix import SHARED_MARGIN_BYTES, graph_slack, headroom_floor, shared_util_cap, util_for_headroom  # noqa: E402  (one rule for check and fit)


def _context_bytes(plan, ctx) -> int:
    """On the card before vLLM's snapshot, other tenants aside: the CUDA context and the
    communicators the release builds first (the planner's baseline, per release)."""
    return max(0, plan.baseline_bytes - ctx.other_gpu_use_bytes)


@rule(
    "OG301",
    "startup-free-memory",
    title="Utilization asks for more than the GPU has free",
    severity=Severity.ERROR,
    why="""At start-up vLLM checks that the free memory is at least total × `--gpu-memory-utilization`
    and stops with "Free memory on device ... is less than desired GPU memory utilization" when
    other processes (another model, a notebook, a stale vLLM) already hold part of the card. The
    utilization is a share of the whole card, not of what is free.""",
    fix="""The largest `--gpu-memory-utilization` (0.01 steps) that leaves the headroom floor (2 % of
    the card, at least 0.5 GiB) free at the prefill peak, re-planned to start: the rule every
    utilization fix of check and fit follows.""",
    example="vllm serve MODEL --gpu-memory-utilization 0.9   # 12 GiB of the 80 GiB already used",
    use_instead="vllm serve MODEL --gpu-memory-utilization 0.83",
    predicts=(F.STARTUP_FREE_MEMORY,),
)
def startup_free(ctx):
    r = startup_free.rule
    plan = ctx.plan
    if plan.failure is not FailureClass.STARTUP_FREE_MEMORY:
        return
    total = plan.gpu.total_bytes
    free = total - _context_bytes(plan, ctx) - ctx.other_gpu_use_bytes
    u = util_for_headroom(plan, ctx.other_gpu_use_bytes, headroom_floor(total), graph_slack(plan))  # goalfix's one answer
    fix = [ctx.edit("gpu_memory_utilization", u)] if u > 0 else []
    after = ctx.replan(fix) if fix else None
    tail = f" --gpu-memory-utilization {u} asks for {gib(total * u)}" + ("." if after is not None and after.starts else f", but then the launch fails ({after.failure.value if after is not None and after.failure else 'nothing fits'}).")
    yield r.finding(
        ctx,
        f"{gib(ctx.other_gpu_use_bytes)} are held by other processes ({ctx.other_gpu_use_source or 'given'}), leaving {gib(free)} free, "
        f"but --gpu-memory-utilization {plan.settings.gpu_memory_utilization} asks for {gib(plan.tight_rank.requested_bytes)}: vLLM stops at start-up." + tail,
        dests=["gpu_memory_utilization"],
        fix=fix,
        numbers={"free_gib": round(free / GiB, 2), "requested_gib": round(plan.tight_rank.requested_bytes / GiB, 2), "suggested_utilization": u},
    )


@rule(
    "OG302",
    "shared-gpu-margin",
    title="Utilization leaves too little room on a shared GPU",
    severity=Severity.WARNING,
    why="""On a card shared with other processes, the memory outside vLLM's budget is all the others
    have to grow into. With 0.9 of an 80 GB card, about 8 GB is left for the CUDA context and
    everyone else; when a neighbour allocates more during vLLM's profile run, vLLM fails with
    "Error in memory profiling", and later either of them hits CUDA OOM. Leave a margin.""",
    fix="""The largest `--gpu-memory-utilization` (0.05 steps) that leaves 2 GiB beyond what the
    other processes hold now, if the launch still starts with it.""",
    example="vllm serve MODEL --gpu-memory-utilization 0.9   # nvidia-smi shows 6 GiB used by others",
    use_instead="vllm serve MODEL --gpu-memory-utilization 0.85",
    predicts=(F.STARTUP_FREE_MEMORY, F.RUNTIME_OOM),
)
def shared_margin(ctx):
    r = shared_margin.rule
    plan = ctx.plan
    if ctx.other_gpu_use_bytes <= 0 or plan.failure is FailureClass.STARTUP_FREE_MEMORY:
        return
    total = plan.gpu.total_bytes
    want = max(SHARED_MARGIN_BYTES, ctx.other_gpu_use_bytes)  # room for the neighbours to double
    margin = total - _context_bytes(plan, ctx) - ctx.other_gpu_use_bytes - plan.tight_rank.requested_bytes
    if margin >= want:
        return
    u = shared_util_cap(plan, ctx.other_gpu_use_bytes) or 0.0
    fix = []
    how = " Lowering it would not leave room for the KV cache: move the other processes."
    if u > 0:
        edit = ctx.edit("gpu_memory_utilization", u)
        after = ctx.replan([edit])
        if after.starts:
            fix, how = [edit], f" --gpu-memory-utilization {u} leaves {gib(total - _context_bytes(plan, ctx) - ctx.other_gpu_use_bytes - total * u)} and still starts."
        elif after.failure is FailureClass.KV_TOO_SMALL and after.max_fitting_len:
            from oomguard.check.rules.common import round_len

            new_len = round_len(after.max_fitting_len)
            both = [edit, ctx.edit("max_model_len", new_len)]
            if ctx.replan(both).starts:
                fix = both
                how = (f" At --gpu-memory-utilization {u} the pool holds a request of at most {after.max_fitting_len:,} tokens: "
                       f"with --max-model-len {new_len:,} it starts (or keep the length with --kv-cache-dtype fp8).")
    yield r.finding(
        ctx,
        f"--gpu-memory-utilization {plan.settings.gpu_memory_utilization} claims {gib(plan.tight_rank.requested_bytes)} of {gib(total)}; with "
        f"{gib(ctx.other_gpu_use_bytes)} held by other processes ({ctx.other_gpu_use_source or 'given'}) only {gib(max(margin, 0))} stay free for them to grow "
        f"(want {gib(want)})." + how,
        dests=["gpu_memory_utilization"],
        fix=fix,
        numbers={"other_gpu_use_gib": round(ctx.other_gpu_use_bytes / GiB, 2), "margin_gib": round(margin / GiB, 2), "suggested_utilization": u if fix else None},
    )


@rule(
    "OG303",
    "cuda-graphs-outside-budget",
    title="CUDA graphs do not fit beside the utilization budget",
    severity=Severity.ERROR,
    why="""Before vLLM 0.20 (and whenever `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0`), CUDA graphs are
    captured after the KV pool is allocated and their memory sits outside
    `--gpu-memory-utilization`: a utilization that leaves less than the graph pool plus the CUDA
    context fails during "Capturing CUDA graphs" with CUDA OOM.""",
    fix="""The largest `--gpu-memory-utilization` (0.01 steps) that leaves the headroom floor (2 % of
    the card, at least 0.5 GiB) plus the graph estimate's error free at the prefill peak (fit
    requires the same); `--enforce-eager` if no utilization does.""",
    example="vllm serve MODEL --gpu-memory-utilization 0.98   # vLLM 0.15",
    use_instead="vllm serve MODEL --gpu-memory-utilization 0.93",
    predicts=(F.CUDAGRAPH_OOM,),
)
def graphs_outside(ctx):
    r = graphs_outside.rule
    plan = ctx.plan
    s = plan.settings
    t = plan.tight_rank
    g = max(x.cuda_graph.bytes for x in plan.ranks)
    if not g or s.estimate_cudagraphs or s.kv_cache_memory_bytes is not None:
        return
    total = plan.gpu.total_bytes
    left = total - t.requested_bytes - _context_bytes(plan, ctx) - ctx.other_gpu_use_bytes - g
    # the graph pool is fixed once captured, so the only risk is the estimate being low: speak when
    # the estimate fails, and (as a note) when the room left is within the estimate's own range
    g_hi = max((x.cuda_graph.high or x.cuda_graph.bytes) for x in plan.ranks)
    if left >= g_hi - g and plan.failure is not FailureClass.CUDAGRAPH_OOM:
        return
    # the floor plus the graph estimate's error left free at the peak: fit's rule too (goalfix)
    u = util_for_headroom(plan, ctx.other_gpu_use_bytes, headroom_floor(total), g_hi - g)
    fix = [ctx.edit("gpu_memory_utilization", u)]
    if u <= 0 or not ctx.replan(fix).starts:
        fix = [ctx.edit("enforce_eager", True)]
    sev = Severity.ERROR if left < 0 or plan.failure is FailureClass.CUDAGRAPH_OOM else Severity.INFO
    yield r.finding(
        ctx,
        f"vLLM {ctx.version_label} captures CUDA graphs (≈{gib(g)}) outside the {gib(t.requested_bytes)} budget: "
        f"{gib(left)} would be left on the card" + (" — capture runs out of memory." if left < 0 else f", less than the graph estimate's range (up to {gib(g_hi)}): capture fits by the estimate, not by its upper bound.")
        + (f" Use --gpu-memory-utilization {u}." if fix[0].dest == "gpu_memory_utilization" else " Use --enforce-eager."),
        dests=["gpu_memory_utilization", "enforce_eager"],
        severity=sev,
        fix=fix,
        numbers={"cuda_graph_gib": round(g / GiB, 2), "left_gib": round(left / GiB, 2)},
    )


def _fp8_ok(ctx) -> bool:
    return ctx.gpu.supports_fp8 and not ctx.model.quantization.is_quantized


@rule(
    "OG304",
    "weights-do-not-fit",
    title="The weights do not fit on the GPU",
    severity=Severity.ERROR,
    why="""Each GPU holds its share of the weights (split by tensor and pipeline parallelism). When
    that share alone exceeds the card, loading fails with CUDA OOM ("Failed to load model - not
    enough GPU memory") before any KV cache is considered.""",
    fix="""The smallest larger `--tensor-parallel-size` that starts (within the GPUs available);
    else `--quantization fp8` on GPUs with FP8 support; else `--cpu-offload-gb` for the
    excess (slow, a last resort).""",
    example="vllm serve meta-llama/Meta-Llama-3.1-70B   # one A100 80GB",
    use_instead="vllm serve meta-llama/Meta-Llama-3.1-70B --tensor-parallel-size 2",
    predicts=(F.WEIGHTS_OOM,),
)
def weights_oom(ctx):
    r = weights_oom.rule
    plan = ctx.plan
    if plan.failure is not FailureClass.WEIGHTS_OOM:
        return
    from oomguard.check.rules.parallel import larger_tp

    w = max(x.weights.bytes for x in plan.ranks)
    total = plan.gpu.total_bytes
    tp, _ = larger_tp(ctx)
    fix, how = [], ""
    if tp:
        fix, how = [ctx.edit("tensor_parallel_size", tp)], f" --tensor-parallel-size {tp} splits them and starts."
    elif _fp8_ok(ctx) and ctx.replan([ctx.edit("quantization", "fp8")]).starts:
        fix, how = [ctx.edit("quantization", "fp8")], " --quantization fp8 halves them and starts."
    else:
        excess = w - (total - plan.baseline_bytes) + 4 * GiB
        gb = int(-(-excess // GiB))
        edit = [ctx.edit("cpu_offload_gb", gb)]
        if ctx.replan(edit).starts:
            fix, how = edit, f" --cpu-offload-gb {gb} keeps {gb} GiB of them in host RAM (every step reads them over PCIe: slow)."
        else:
            how = " Use more GPUs, a quantized checkpoint, or a larger card."
    yield r.finding(
        ctx,
        f"{gib(w)} of weights per GPU do not fit in {gib(total - plan.baseline_bytes)} free: loading fails with CUDA OOM." + how,
        dests=["tensor_parallel_size", "quantization"],
        fix=fix,
        numbers={"weights_per_gpu_gib": round(w / GiB, 2), "card_gib": round(total / GiB, 2)},
    )


@rule(
    "OG305",
    "profile-run-oom",
    title="The start-up profile run does not fit",
    severity=Severity.ERROR,
    why="""vLLM measures its activation peak by running one step of `max_num_batched_tokens`
    tokens over `max_num_seqs` sequences (plus the sampler over `max_num_seqs` rows and, for
    multimodal models, the largest encoder input). When weights plus that peak exceed the card,
    start-up dies with `torch.OutOfMemoryError` before the KV cache is sized.""",
    fix="""A smaller token budget from the chunked-prefill table (and `--max-num-seqs` no larger than it) that
    starts.""",
    example="vllm serve MODEL --max-num-batched-tokens 65536 --max-num-seqs 1024   # 24 GB card",
    use_instead="vllm serve MODEL --max-num-batched-tokens 2048 --max-num-seqs 256",
    predicts=(F.PROFILE_OOM,),
)
def profile_oom(ctx):
    r = profile_oom.rule
    plan = ctx.plan
    if plan.failure is not FailureClass.PROFILE_OOM:
        return
    s = plan.settings
    # OG101/OG103/OG104 own the cases where the budget was set to a long context or left unchunked
    if ctx.is_set("max_num_batched_tokens") and s.max_num_batched_tokens > 16384:
        return
    if not s.enable_chunked_prefill and not ctx.is_set("max_num_batched_tokens") and s.max_num_batched_tokens >= 8192:
        return
    tok, after, edits = suggest_chunk(ctx)
    how = ""
    fix = []
    if tok is not None and (tok < s.max_num_batched_tokens or any(e.dest == "max_num_seqs" for e in edits)):
        fix, how = edits, f" --max-num-batched-tokens {tok} (peak {gib(peak_activation(after))}) starts."
    else:
        seqs = max(1, s.max_num_seqs // 4)
        e = [ctx.edit("max_num_seqs", seqs)]
        if ctx.replan(e).starts:
            fix, how = e, f" --max-num-seqs {seqs} shrinks the sampler's share and starts."
    yield r.finding(
        ctx,
        f"weights {gib(max(x.weights.bytes for x in plan.ranks))} + predicted activation peak {gib(peak_activation(plan))} "
        f"(max_num_batched_tokens {s.max_num_batched_tokens:,}, max_num_seqs {s.max_num_seqs}) exceed the card: the profile run dies with CUDA OOM." + how,
        dests=["max_num_batched_tokens", "max_num_seqs"],
        fix=fix,
        numbers={"activation_peak_gib": round(peak_activation(plan) / GiB, 2)},
    )


@rule(
    "OG306",
    "utilization-leaves-no-headroom",
    title="Utilization so high the card has no headroom",
    severity=Severity.WARNING,
    why="""What `--gpu-memory-utilization` leaves of the card holds the CUDA context, NCCL and
    allocator fragmentation, and anything sized at run time that the profile run did not see (a
    prompt-logprobs request, a larger sampler batch). Less than about 2 % of the card (at least
    0.5 GiB) left is a launch that starts and later dies with CUDA OOM.""",
    fix="""The largest `--gpu-memory-utilization` (0.01 steps) that leaves that headroom, if the
    launch still starts with it.""",
    example="vllm serve MODEL --gpu-memory-utilization 0.99",
    use_instead="vllm serve MODEL --gpu-memory-utilization 0.95",
    predicts=(F.RUNTIME_OOM, F.CUDAGRAPH_OOM),
)
def no_headroom(ctx):
    r = no_headroom.rule
    plan = ctx.plan
    if not ctx.is_set("gpu_memory_utilization") or plan.settings.kv_cache_memory_bytes is not None:
        return
    if ctx.other_gpu_use_bytes > 0:
        return  # OG301/OG302
    total = plan.gpu.total_bytes
    need = headroom_floor(total)  # 2 % of the card, never below 0.5 GiB: every fix's floor (goalfix)
    left = total - _context_bytes(plan, ctx) - plan.tight_rank.requested_bytes
    if left >= need or plan.failure is FailureClass.CUDAGRAPH_OOM:
        return
    u = util_for_headroom(plan, 0, need, graph_slack(plan))
    fix = [ctx.edit("gpu_memory_utilization", u)] if u > 0 and ctx.replan([ctx.edit("gpu_memory_utilization", u)]).starts else []
    yield r.finding(
        ctx,
        f"--gpu-memory-utilization {plan.settings.gpu_memory_utilization} leaves {gib(left)} of the {gib(total)} card outside the budget "
        f"(want at least {gib(need)})." + (f" Use {u}." if fix else ""),
        dests=["gpu_memory_utilization"],
        fix=fix,
        numbers={"left_gib": round(left / GiB, 2), "suggested_utilization": u if fix else None},
    )


@rule(
    "OG307",
    "cudagraph-estimate-in-budget",
    title="vLLM ≥ 0.20 reserves CUDA-graph memory inside the budget",
    severity=Severity.INFO,
    why="""From vLLM 0.20 the CUDA-graph memory estimate is taken out of the `--gpu-memory-utilization`
    budget before the KV pool is sized (it used to sit outside). A launch tuned on 0.19 or older
    gets a smaller KV pool with the same utilization; vLLM logs the utilization that would keep
    the old pool size.""",
    fix="""None automatic: raise `--gpu-memory-utilization` by the graph share if the old pool size
    matters and the card has the room, or set `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0` to keep
    the old accounting.""",
    example="vllm serve MODEL --gpu-memory-utilization 0.9   # vLLM 0.20, large graph pool",
)
def graph_estimate(ctx):
    r = graph_estimate.rule
    plan = ctx.plan
    s = plan.settings
    g = plan.tight_rank.cuda_graph.bytes
    if not s.estimate_cudagraphs or g < 1 * GiB or not ctx.is_set("gpu_memory_utilization") or s.kv_cache_memory_bytes is not None:
        return
    eq = s.gpu_memory_utilization + g / plan.gpu.total_bytes
    yield r.finding(
        ctx,
        f"vLLM {ctx.version_label} takes the CUDA-graph estimate (≈{gib(g)}) out of the budget: the KV pool is that much smaller "
        f"than with the same utilization before 0.20 (equivalent: --gpu-memory-utilization {eq:.4f}).",
        dests=["gpu_memory_utilization"],
        numbers={"cuda_graph_gib": round(g / GiB, 2), "equivalent_utilization": round(eq, 4)},
    )
