"""OG9xx: operating practice — what a flag does not do, and what to confirm.

Informational rules: nothing here stops a launch, but each one is a mistake
S1's operators made (expecting prefix caching to save memory, dropping
``--enforce-eager`` while still debugging) or a number worth knowing before the
first long request.
"""

from __future__ import annotations

from oomguard.check.finding import Severity
from oomguard.check.rule import rule
from oomguard.check.rules.common import gib
from oomguard.units import GiB


@rule(
    "OG901",
    "prefix-caching-first-request",
    title="Prefix caching does not save memory on a first request",
    severity=Severity.INFO,
    why="""`--enable-prefix-caching` lets a request reuse the KV blocks of an earlier request with the
    same prefix: it saves prefill compute (TTFT) when prefixes repeat. The first request of a
    prefix, and every request with a new one, needs its full KV cache: it does not make a
    1M-token request fit, and does not lower the activation peak.""",
    fix="""None: keep it for repeated prefixes (system prompts, multi-turn chats).""",
    example="vllm serve MODEL --enable-prefix-caching --max-model-len 1048576",
)
def prefix_caching(ctx):
    r = prefix_caching.rule
    if ctx.flags.get("enable_prefix_caching") is not True:
        return
    yield r.finding(
        ctx,
        "--enable-prefix-caching saves prefill work when prefixes repeat; the first request of each prefix still needs its whole KV cache "
        "and the same activation peak.",
        dests=["enable_prefix_caching"],
    )


@rule(
    "OG902",
    "enforce-eager-tradeoff",
    title="--enforce-eager trades decode speed for memory",
    severity=Severity.INFO,
    why="""`--enforce-eager` skips CUDA-graph capture: start-up is faster and the graph pool's memory
    goes to the KV cache, which is what you want while debugging memory. Graphs make decode
    markedly faster; remove the flag once the launch is stable, and re-check (the graphs take
    their memory back).""",
    fix="""None automatic: keep it while debugging.""",
    example="vllm serve MODEL --enforce-eager",
)
def enforce_eager(ctx):
    r = enforce_eager.rule
    if not ctx.flags.get("enforce_eager"):
        return
    plan = ctx.plan
    graphs = ctx.replan([ctx.edit("enforce_eager", None)])
    g = max(x.cuda_graph.bytes for x in graphs.ranks)
    if not (graphs.starts and plan.starts):
        pool = "shrinks."
    elif graphs.kv_cache_tokens == plan.kv_cache_tokens:
        # before vLLM 0.20 the graphs are captured after the KV pool is sized, outside the utilization
        # budget: the pool is the same and the graphs take the memory left beside it (OG303)
        pool = (f"keeps its {plan.kv_cache_tokens:,} tokens: vLLM {ctx.version_label} captures the graphs outside the "
                "utilization budget, in the memory left beside it.")
    else:
        pool = f"would hold {graphs.kv_cache_tokens:,} tokens instead of {plan.kv_cache_tokens:,}."
    yield r.finding(
        ctx,
        f"--enforce-eager: no CUDA graphs (≈{gib(g)} per GPU saved). Keep it while debugging; without it decode is faster and the KV pool "
        + pool,
        dests=["enforce_eager"],
        numbers={"cuda_graph_gib_without_eager": round(g / GiB, 2)},
    )


@rule(
    "OG903",
    "long-prefill-steps",
    title="A full-length prompt takes many prefill steps",
    severity=Severity.INFO,
    why="""With chunked prefill, a prompt of N tokens is prefilled in ceil(N / max-num-batched-tokens)
    steps, interleaved with other requests' decode steps: time to first token grows with it (e.g.
    750,000 tokens at 8,192 per step is 92 steps, 40–60 s without a prefix hit). Confirm
    the figures under load: P99 TTFT and the prefix-cache hit rate, not mean throughput.""",
    fix="""None.""",
    example="vllm serve MODEL --max-model-len 750000 --max-num-batched-tokens 8192",
)
def long_prefill(ctx):
    r = long_prefill.rule
    s = ctx.plan.settings
    if s.max_model_len < 131072 or not s.enable_chunked_prefill:
        return
    steps = -(-s.max_model_len // s.max_num_batched_tokens)
    if steps < 32:
        return
    yield r.finding(
        ctx,
        f"a {s.max_model_len:,}-token prompt takes {steps} prefill steps of {s.max_num_batched_tokens:,} tokens; expect TTFT to scale with it.",
        dests=["max_model_len", "max_num_batched_tokens"],
        numbers={"prefill_steps": steps},
    )


@rule(
    "OG904",
    "default-max-model-len-is-huge",
    title="max-model-len left at a very long derived default",
    severity=Severity.INFO,
    why="""Without `--max-model-len` vLLM uses the model's whole context (128K–1M for recent models):
    the start-up check needs one request of that length to fit, and the scheduler admits
    prompts that long. Setting the length the traffic needs gives a clearer capacity picture
    and a start-up that does not depend on the model card.""",
    fix="""None automatic: set `--max-model-len` to what you serve.""",
    example="vllm serve meta-llama/Llama-3.1-8B-Instruct",
    use_instead="vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768",
)
def default_len(ctx):
    r = default_len.rule
    s = ctx.plan.settings
    if ctx.is_set("max_model_len") or s.max_model_len < 131072:
        return
    yield r.finding(
        ctx,
        f"max-model-len defaults to {s.max_model_len:,} ({s.max_model_len_source}); the pool holds {ctx.plan.kv_cache_tokens:,} tokens. "
        "Set --max-model-len to the longest prompt + output you serve.",
        dests=["max_model_len"],
        numbers={"max_model_len": s.max_model_len},
    )
