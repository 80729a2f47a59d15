"""Plain-language trade-offs of one candidate launch: what it buys, what it costs.

Each function returns one sentence with the numbers substituted. Speed figures
come from ``oomguard.fit.roofline`` and say so ("estimate, roofline, ±50%");
memory figures come from the memory model.
"""

from __future__ import annotations


from oomguard.fit.roofline import LABEL, Roofline, prefill_steps
from oomguard.records import NamedTuple
from oomguard.units import GiB


def _g(n: float) -> str:
    return f"{n / GiB:.2f}"


def _pct(x: float) -> str:
    return f"{abs(x) * 100:.0f}%"


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _secs(s: float) -> str:
    if s >= 120:
        return f"{s / 60:.1f} min"
    if s >= 1:
        return f"{s:.1f} s"
    return f"{s * 1000:.0f} ms"


class Context(NamedTuple):
    """What every trade-off sentence may need about one candidate."""

    gpu: object
    model: object
    roofline: Roofline
    token_budget: int
    ref_token_budget: int  # the launch's budget, or vLLM's default on this GPU
    ref_source: str  # "the launch's" / "vLLM's default"
    activation_bytes: int
    ref_activation_bytes: int
    activation_high_bytes: int
    max_model_len: int
    input_len: int
    kv_cache_dtype: str
    kv_bytes_per_token: float  # per GPU, this candidate's dtype
    eager: bool
    graphs_bytes: int
    cudagraph_mode: str
    utilization: float
    requested_bytes: int
    total_bytes: int
    footprint_bytes: int
    other_bytes: int
    kv_pool_bytes: int
    kv_cache_tokens: int
    one_request_bytes: int
    spare_bytes: int  # KV left after the goal's requests (one max-length, or C × I)
    pinned_kv_bytes: int | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    weights_bytes: int  # heaviest rank
    num_seqs: int
    capacity_at_input: int
    concurrency: int | None
    decode_concurrency: int


def token_budget(c: Context) -> str:
    T, ref = c.token_budget, c.ref_token_budget
    rl = c.roofline
    steps = prefill_steps(c.max_model_len, T)
    ttft = rl.prefill_s(c.max_model_len, T)
    tail = f"a max-length prompt ({c.max_model_len:,} tokens) takes {steps:,} steps of {T:,} (TTFT ≈ {_secs(ttft)} alone on the server; {LABEL})"
    if T == ref:
        return f"token budget --max-num-batched-tokens {T:,} ({c.ref_source}): activation peak {_g(c.activation_bytes)} GiB per GPU; {tail}"
    peak = c.ref_activation_bytes - c.activation_bytes
    speed = rl.prefill_tokens_per_s(c.input_len, T) / rl.prefill_tokens_per_s(c.input_len, ref) - 1
    if abs(peak) < 0.01 * GiB:
        mem = f"leaves the profiled activation peak at {_g(c.activation_bytes)} GiB per GPU (the sampler's max-num-seqs × vocab rows dominate it)"
    else:
        verb = "lowers" if peak > 0 else "raises"
        mem = f"{verb} the activation peak by {_g(abs(peak))} GiB per GPU ({_g(c.ref_activation_bytes)} → {_g(c.activation_bytes)} GiB)"
    pverb = "costs" if speed < 0 else "gains"
    return f"a token budget of {T:,} (vs {c.ref_source} {ref:,}) {mem} and {pverb} ~{_pct(speed)} of prefill throughput on {c.input_len:,}-token prompts; {tail}"


def kv_dtype(c: Context) -> str | None:
    gpu = c.gpu
    if c.kv_cache_dtype.startswith("fp8"):
        if gpu.supports_fp8:
            hw = f"{gpu.name} ({gpu.target}) has FP8 tensor cores, so attention can also run in FP8"
        else:
            hw = (
                f"{gpu.name} ({gpu.target}) has no FP8 tensor cores: vLLM stores the cache in fp8 and converts it to 16-bit "
                "for the attention math, so this saves memory, not compute"
            )
        return (
            f"fp8 KV cache ({c.kv_cache_dtype}) halves KV bytes per token ({c.kv_bytes_per_token * 2:,.0f} → {c.kv_bytes_per_token:,.0f} B/token per GPU), "
            f"so the same pool holds 2× the tokens; costs some accuracy (scales default to 1.0 unless the checkpoint ships them; "
            f"most visible on long-context retrieval): check your evals. {hw}"
        )
    if gpu.fp8_kv:
        return f"KV cache in the model dtype ({c.kv_bytes_per_token:,.0f} B/token per GPU): no accuracy cost; --kv-cache-dtype fp8 would hold 2× the tokens"
    return None


def graphs(c: Context) -> str:
    rl = c.roofline
    per_step = rl.num_layers * 40e-6 * 1000
    if c.eager:
        return (
            f"--enforce-eager: no CUDA graphs, so no graph memory and start-up is faster, but every decode step pays "
            f"~{per_step:.1f} ms of kernel launches ({LABEL}); keep it while debugging, drop it in production"
        )
    from oomguard.model.engine import graphs_label

    return f"CUDA graphs ({graphs_label(c.cudagraph_mode)}) cost ~{_g(c.graphs_bytes)} GiB per GPU (estimate) and make decode steps faster than --enforce-eager"


def memory_budget(c: Context) -> str:
    free = c.total_bytes - c.other_bytes - c.footprint_bytes
    if c.pinned_kv_bytes is not None:
        return (
            f"--kv-cache-memory-bytes {_g(c.pinned_kv_bytes)} GiB pins the KV pool (vLLM skips its profile-based sizing); "
            f"--gpu-memory-utilization {c.utilization:g} still caps start-up: free memory must be ≥ {_g(c.requested_bytes)} GiB. "
            f"Peak ≈ {_g(c.footprint_bytes)} of {_g(c.total_bytes)} GiB per GPU, {_g(free)} GiB left free"
        )
    return (
        f"--gpu-memory-utilization {c.utilization:g}: vLLM's budget is {_g(c.requested_bytes)} of {_g(c.total_bytes)} GiB per GPU; "
        f"at the prefill peak ≈ {_g(c.footprint_bytes)} GiB is in use (CUDA context included), {_g(free)} GiB stays free "
        "for other processes and unprofiled spikes"
    )


def capacity(c: Context) -> str:
    est_err = c.activation_high_bytes - c.activation_bytes
    parts = [f"KV pool {_g(c.kv_pool_bytes)} GiB per GPU = {c.kv_cache_tokens:,} tokens"]
    if c.concurrency:
        parts.append(f"holds {_n(c.capacity_at_input, 'request')} of {c.input_len:,} tokens (goal {c.concurrency})")
    else:
        parts.append(f"holds one {c.max_model_len:,}-token request ({_g(c.one_request_bytes)} GiB)")
    parts.append(f"with {_g(c.spare_bytes)} GiB to spare")
    text = ", ".join(parts)
    if c.pinned_kv_bytes is None and c.spare_bytes < est_err:
        text += (
            f"; that is within the activation estimate's error (up to {_g(est_err)} GiB): confirm vLLM's "
            f"'GPU KV cache size' line shows ≥ {c.max_model_len:,} tokens, or take a smaller token budget"
        )
    return text


def batch(c: Context) -> str | None:
    if c.num_seqs < c.capacity_at_input:
        return f"--max-num-seqs {c.num_seqs} caps the running batch below what the pool holds ({_n(c.capacity_at_input, 'request')} of {c.input_len:,} tokens)"
    if c.capacity_at_input < c.num_seqs:
        return (
            f"the pool holds {_n(c.capacity_at_input, 'request')} of {c.input_len:,} tokens, so --max-num-seqs {c.num_seqs} is never reached: "
            "ask 'average input × concurrency ≤ KV capacity', not 'how many sequences'"
        )
    return None


def speed(c: Context) -> str:
    rl = c.roofline
    b = max(1, c.decode_concurrency)
    tps = rl.decode_tokens_per_s(b, c.input_len)
    itl = rl.mixed_step_s(c.token_budget, b, c.input_len)
    return (
        f"decode ≈ {tps:,.0f} tokens/s at {_n(b, 'concurrent request')} of {c.input_len:,} tokens ({tps / b:,.1f} per request); "
        f"a step that also carries a {c.token_budget:,}-token prefill chunk takes ≈ {_secs(itl)} ({LABEL})"
    )


def parallel(c: Context) -> str | None:
    tp, pp = c.tensor_parallel_size, c.pipeline_parallel_size
    if tp == 1 and pp == 1:
        return None
    text = f"weights {_g(c.weights_bytes)} GiB per GPU"
    if tp > 1:
        text += (
            f"; TP {tp} all-reduces every layer across {tp} GPUs: check `nvidia-smi topo -m` (SYS between them means "
            "the all-reduce crosses the CPU interconnect)"
        )
    if pp > 1:
        text += f"; PP {pp} avoids per-layer all-reduce but one request passes the {pp} stages in turn (higher latency, pipeline bubbles)"
    return text


def for_candidate(c: Context) -> list[str]:
    out = [capacity(c), token_budget(c)]
    for f in (kv_dtype, batch, graphs, memory_budget, parallel, speed):
        s = f(c)
        if s:
            out.append(s)
    return out
