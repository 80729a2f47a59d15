"""OG7xx: tensor / pipeline parallelism, visible GPUs and the interconnect between them."""

from __future__ import annotations

from oomguard.check.finding import Severity
from oomguard.check.needs import Needs
from oomguard.check.rule import rule
from oomguard.check.rules.common import valid_tp
from oomguard.model.failures import FailureClass as F


def available_gpus(ctx) -> int | None:
    """GPUs the launch can use, when the user or the evidence says (None: unknown)."""
    return ctx.num_gpus


def larger_tp(ctx):
    """The smallest tensor-parallel size above the current one that is valid for the
    model, fits the available GPUs (≤ 8 when unknown) and starts. (tp, plan) or (None, None)."""
    cur = int(ctx.flags.get("tensor_parallel_size") or 1)
    pp = int(ctx.flags.get("pipeline_parallel_size") or 1)
    limit = available_gpus(ctx) or 8
    for tp in (2, 4, 8, 16):
        if tp <= cur or tp * pp > limit or not valid_tp(ctx.model, tp):
            continue
        p = ctx.replan([ctx.edit("tensor_parallel_size", tp)])
        if p.starts:
            return tp, p
    return None, None


def _best_tp_at_most(ctx, limit: int):
    """The largest valid tensor-parallel size ≤ limit whose launch starts (or just the largest valid)."""
    valid = [tp for tp in range(limit, 0, -1) if valid_tp(ctx.model, tp)]
    for tp in valid:
        if ctx.replan([ctx.edit("tensor_parallel_size", tp)]).starts:
            return tp
    return valid[0] if valid else None


@rule(
    "OG701",
    "tp-does-not-divide-heads",
    title="Tensor-parallel size does not divide the attention heads",
    severity=Severity.ERROR,
    why="""Tensor parallelism splits attention heads evenly across GPUs: vLLM refuses a size that
    does not divide the number of attention heads ("Total number of attention heads (H) must be
    divisible by tensor parallel size (T)"), or, above the KV-head count, one the KV heads do not
    divide.""",
    fix="""The largest valid tensor-parallel size below the given one whose launch starts.""",
    example="vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 3",
    use_instead="vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2",
    predicts=(F.CONFIG_ERROR,),
)
def tp_heads(ctx):
    r = tp_heads.rule
    tp = int(ctx.flags.get("tensor_parallel_size") or 1)
    if tp == 1 or valid_tp(ctx.model, tp):
        return
    m = ctx.model
    new = _best_tp_at_most(ctx, tp - 1)
    yield r.finding(
        ctx,
        f"{m.num_attention_heads} attention heads ({m.num_kv_heads} KV heads) cannot be split across {tp} GPUs: vLLM refuses to start."
        + (f" Use --tensor-parallel-size {new}." if new else ""),
        dests=["tensor_parallel_size"],
        fix=[ctx.edit("tensor_parallel_size", new)] if new else [],
        numbers={"num_attention_heads": m.num_attention_heads, "num_kv_heads": m.num_kv_heads, "tensor_parallel_size": tp},
    )


@rule(
    "OG702",
    "parallelism-exceeds-gpus",
    title="TP × PP × DP asks for more GPUs than are visible",
    severity=Severity.ERROR,
    why="""vLLM needs tensor × pipeline × data parallel GPUs, visible through `CUDA_VISIBLE_DEVICES`.
    Asking for more fails at start-up (or Ray waits for resources that never come).""",
    fix="""When more GPUs exist than `CUDA_VISIBLE_DEVICES` shows (nvidia-smi output), widen
    `CUDA_VISIBLE_DEVICES`; otherwise the largest valid tensor-parallel size that fits the visible
    GPUs and starts.""",
    example="CUDA_VISIBLE_DEVICES=0,1 vllm serve MODEL --tensor-parallel-size 4",
    use_instead="CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve MODEL --tensor-parallel-size 4",
    predicts=(F.CONFIG_ERROR,),
)
def world_exceeds(ctx):
    r = world_exceeds.rule
    have = available_gpus(ctx)
    if have is None:
        return
    tp = int(ctx.flags.get("tensor_parallel_size") or 1)
    pp = int(ctx.flags.get("pipeline_parallel_size") or 1)
    dp = int(ctx.flags.get("data_parallel_size") or 1)
    need = tp * pp * dp
    if need <= have:
        return
    src = ("--num-gpus" if ctx.options.num_gpus else "the manifest's GPU limit" if ctx.launch.manifest_gpus() is not None
           else "CUDA_VISIBLE_DEVICES" if ctx.visible_gpus is not None else "nvidia-smi")
    fix = []
    physical = len(ctx.smi.gpus) if ctx.smi is not None else (len(ctx.topology.gpus) if ctx.topology is not None else None)
    if ctx.visible_gpus is not None and physical is not None and physical >= need and ctx.options.num_gpus is None:
        fix = [ctx.edit("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(need)))]
        how = f" {physical} GPUs exist: set CUDA_VISIBLE_DEVICES={fix[0].value}."
    else:
        new = _best_tp_at_most(ctx, max(1, have // (pp * dp)))
        if new and new != tp:
            fix = [ctx.edit("tensor_parallel_size", new)]
            how = f" Use --tensor-parallel-size {new}."
        else:
            how = ""
    yield r.finding(
        ctx,
        f"TP {tp} × PP {pp} × DP {dp} = {need} GPUs, but {have} are available ({src}): vLLM cannot start." + how,
        dests=["tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"],
        fix=fix,
        numbers={"gpus_needed": need, "gpus_available": have},
    )


def _pp_partition_blocks(ctx, partition: list[int]) -> int:
    env = dict(ctx.env)
    env["VLLM_PP_LAYER_PARTITION"] = ",".join(map(str, partition))
    p = ctx.plan_with(ctx.flags, env)
    return min(r.num_blocks for r in p.ranks)


def _better_partition(ctx, pp: int, n_layers: int) -> tuple[list[int], int] | None:
    """Greedy: move one layer at a time from the tightest stage to its neighbour."""
    base = [n_layers // pp + (1 if i < n_layers % pp else 0) for i in range(pp)]
    cur = list(map(int, ctx.env["VLLM_PP_LAYER_PARTITION"].split(","))) if ctx.env.get("VLLM_PP_LAYER_PARTITION") else base
    best = _pp_partition_blocks(ctx, cur)
    start = best
    for _ in range(n_layers):
        env = dict(ctx.env)
        env["VLLM_PP_LAYER_PARTITION"] = ",".join(map(str, cur))
        plan = ctx.plan_with(ctx.flags, env)
        tight = min(range(pp), key=lambda i: plan.ranks[i].num_blocks)
        improved = False
        for nb in (tight - 1, tight + 1):
            if 0 <= nb < pp and cur[tight] > 1:
                cand = list(cur)
                cand[tight] -= 1
                cand[nb] += 1
                b = _pp_partition_blocks(ctx, cand)
                if b > best:
                    best, cur, improved = b, cand, True
                    break
        if not improved:
            break
    return (cur, best) if best > start * 1.05 else None


@rule(
    "OG703",
    "pipeline-stages-unequal",
    title="Pipeline stages hold unequal memory; the tightest decides",
    severity=Severity.WARNING,
    why="""With pipeline parallelism each stage has its own layers, and the first and last also the
    embeddings and LM head. vLLM sizes every stage's KV pool to the same block count: the stage with
    the least free memory decides, and the others' extra memory is wasted (or, with GPUs of
    different sizes, the small one fails first).""",
    fix="""`VLLM_PP_LAYER_PARTITION` moving layers off the tightest stage until the block counts
    balance, when that gains more than 5 %.""",
    example="vllm serve MODEL --pipeline-parallel-size 2   # stage 0: 2,000 blocks, stage 1: 1,400",
    use_instead="VLLM_PP_LAYER_PARTITION=17,15 vllm serve MODEL --pipeline-parallel-size 2",
    predicts=(F.KV_TOO_SMALL,),
)
def pp_unequal(ctx):
    r = pp_unequal.rule
    plan = ctx.plan
    pp = plan.settings.pipeline_parallel_size
    if pp < 2 or not plan.starts:
        return
    blocks = [x.num_blocks for x in plan.ranks]
    if min(blocks) >= 0.85 * max(blocks):
        return
    better = _better_partition(ctx, pp, ctx.model.num_layers)
    fix = [ctx.edit("VLLM_PP_LAYER_PARTITION", ",".join(map(str, better[0])))] if better else []
    yield r.finding(
        ctx,
        f"stage KV pools: {', '.join(f'stage {i}: {b:,} blocks' for i, b in enumerate(blocks))}; vLLM uses {min(blocks):,} on every stage."
        + (f" VLLM_PP_LAYER_PARTITION={fix[0].value} gives {better[1]:,}." if better else ""),
        dests=["pipeline_parallel_size"],
        fix=fix,
        numbers={"blocks_per_stage": blocks},
    )


@rule(
    "OG704",
    "tp-group-crosses-numa",
    title="A tensor-parallel group crosses the CPU interconnect (SYS)",
    severity=Severity.WARNING,
    needs=(Needs.TOPOLOGY,),
    why="""`nvidia-smi topo -m` showing `SYS` between GPUs of one tensor-parallel group means every
    all-reduce (two per layer per step) crosses the inter-socket link between NUMA nodes. TP
    scaling then collapses: four cards giving less than 3× one card's throughput, GPU utilisation
    under 40 %. Two TP-2 instances, each on the GPUs of one NUMA node and bound with `numactl`
    to it, usually serve more.""",
    fix="""None automatic (it changes the deployment): the message gives the two-instance layout
    and whether a TP-2 instance fits.""",
    example="vllm serve MODEL --tensor-parallel-size 4   # GPU0-1 on node 0, GPU2-3 on node 1",
    use_instead="CUDA_VISIBLE_DEVICES=0,1 numactl --cpunodebind=0 --membind=0 vllm serve MODEL --tensor-parallel-size 2 --port 8000\n"
    "CUDA_VISIBLE_DEVICES=2,3 numactl --cpunodebind=1 --membind=1 vllm serve MODEL --tensor-parallel-size 2 --port 8001",
)
def tp_numa(ctx):
    from oomguard.inputs.topology import LinkKind

    r = tp_numa.rule
    topo = ctx.topology
    tp = int(ctx.flags.get("tensor_parallel_size") or 1)
    if tp < 2:
        return
    order = ctx.visible_gpus if ctx.visible_gpus is not None else list(topo.gpus)
    order = [g for g in order if g in topo.gpus]
    crossing = topo.tp_groups_crossing(LinkKind.SYS, tp, order)
    if not crossing:
        return
    nodes = topo.gpus_by_numa_node()
    layout = "; ".join(f"NUMA node {n}: GPU{','.join(map(str, gs))}" for n, gs in sorted(nodes.items()))
    half = tp // 2
    fits = ""
    if ctx.plan is not None and half >= 1 and valid_tp(ctx.model, half):
        p = ctx.replan([ctx.edit("tensor_parallel_size", half)])
        fits = (
            f" A TP-{half} instance is predicted to start with {p.kv_cache_tokens:,} tokens of KV cache."
            if p.starts
            else f" A TP-{half} instance would not start ({p.failure.value}): keep TP {tp} or use larger GPUs."
        )
    groups = ", ".join("GPU" + "+".join(map(str, g)) for g in crossing)
    cmds = []
    for n, gs in sorted(nodes.items()):
        for i in range(0, len(gs) - half + 1, max(half, 1)):
            cmds.append(f"CUDA_VISIBLE_DEVICES={','.join(map(str, gs[i:i + half]))} numactl --cpunodebind={n} --membind={n} vllm serve ... --tensor-parallel-size {half}")
    yield r.finding(
        ctx,
        f"TP group(s) {groups} cross a SYS link (all-reduce goes through the CPU interconnect). {layout}. "
        f"Consider {len(cmds) or 2} × TP{half}: " + " | ".join(cmds[:4]) + "." + fits,
        dests=["tensor_parallel_size"],
        numbers={"tp_groups_crossing_sys": [list(g) for g in crossing]},
    )


@rule(
    "OG705",
    "tp-above-kv-heads",
    title="Tensor-parallel size above the KV-head count replicates the KV cache",
    severity=Severity.INFO,
    why="""With more GPUs than KV heads, each KV head is stored on several GPUs: the KV bytes per
    token per GPU stop shrinking with TP, so the extra GPUs add weight room but no context.""",
    fix="""None automatic; pipeline parallelism or data parallelism use the extra GPUs without
    replicating the cache.""",
    example="vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 16",
)
def tp_kv_heads(ctx):
    r = tp_kv_heads.rule
    m = ctx.model
    tp = int(ctx.flags.get("tensor_parallel_size") or 1)
    if m.family == "mla" or tp <= m.num_kv_heads or not valid_tp(m, tp):
        return
    yield r.finding(
        ctx,
        f"{m.num_kv_heads} KV heads on {tp} GPUs: each head is replicated {tp // m.num_kv_heads}×; "
        f"KV per token per GPU is {ctx.plan.kv_bytes_per_token:,.0f} B whatever the TP size above {m.num_kv_heads}.",
        dests=["tensor_parallel_size"],
        numbers={"num_kv_heads": m.num_kv_heads, "replication": tp // m.num_kv_heads},
    )


@rule(
    "OG706",
    "expert-parallel-on-dense-model",
    title="--enable-expert-parallel on a model without experts",
    severity=Severity.WARNING,
    needs=(Needs.MODEL,),
    why="""Expert parallelism distributes MoE experts across GPUs; on a dense model there are no
    experts and the flag changes nothing, which usually means the launch was copied from another
    model's.""",
    fix="""Remove `--enable-expert-parallel`.""",
    example="vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-expert-parallel",
    use_instead="vllm serve meta-llama/Llama-3.1-8B-Instruct",
)
def ep_dense(ctx):
    r = ep_dense.rule
    if not ctx.flags.get("enable_expert_parallel") or ctx.model.moe is not None:
        return
    yield r.finding(ctx, f"{ctx.model.name} has no experts: --enable-expert-parallel does nothing.", dests=["enable_expert_parallel"], fix=[ctx.edit("enable_expert_parallel", None)])

