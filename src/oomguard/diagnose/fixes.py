"""For each verdict: a one-sentence summary, what the numbers say, and the flag edits that fix it.

Fixes are written as vLLM spells its flags. Where the log carries the numbers
(the estimated maximum model length, the GiB needed vs available, the free
memory at start, the Mamba block count) they become the fix values; where it
does not, the value is a conservative step from the current setting.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from oomguard.diagnose.classes import FailureClass as FC
from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Fix, Signal, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.flags import hint_for, split_unrecognized
from oomguard.diagnose.parsers.numbers import fmt

MAX_UTIL = 0.95


def attach_fixes(verdicts: list[Verdict], col: Collector, ctx: Context) -> None:
    for v in verdicts:
        members = getattr(v, "_members", [])
        _BUILDERS[v.cls](v, members, col, ctx)
        if hasattr(v, "_members"):
            del v._members  # type: ignore[attr-defined]


# --- helpers -------------------------------------------------------------
def _num(members: list[Any], key: str) -> Any:
    for m in sorted(members, key=lambda c: -c.event.seq):
        if key in m.event.numbers:
            return m.event.numbers[key]
    return None


def _fact(col: Collector, name: str, run: int | None = None) -> float | None:
    facts = col.memory.get(name) or []
    for fact in reversed(facts):
        if run is None or fact.run == run:
            return fact.value
    return None


def _run(members: list[Any]) -> int | None:
    return max((m.event.run for m in members), default=None)


def _util(ctx: Context, col: Collector, run: int | None) -> float | None:
    return _fact(col, "gpu_memory_utilization", run) or ctx.gpu_memory_utilization


def _default_util(ctx: Context) -> float:
    v = ctx.version_tuple()
    return 0.92 if v and v >= (0, 20) else 0.9


def _round_util(value: float) -> float:
    return math.floor(min(value, MAX_UTIL) * 100) / 100


def _int_arg(ctx: Context, name: str) -> int | None:
    value = ctx.arg(name)
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _lower_tokens(ctx: Context) -> int:
    current = _int_arg(ctx, "max_num_batched_tokens")
    if current:
        return max(2048, current // 2) if current > 2048 else max(512, current // 2)
    return 4096


def _lower_seqs(ctx: Context, hint: int | None = None) -> int:
    current = hint or _int_arg(ctx, "max_num_seqs") or (1024 if ctx.engine == "V1" else 256)
    return max(8, current // 4 if current >= 512 else current // 2)


def _primary_reason(members: list[Any]) -> str:
    best = max(members, key=lambda m: m.confidence) if members else None
    return best.reason if best else ""


def _cause(members: list[Any]) -> str | None:
    for m in sorted(members, key=lambda c: -c.confidence):
        if m.cause:
            return m.cause
    return None


def _human_bytes(n: float) -> str:
    """Bytes as vLLM's human-readable ints read them (upper-case suffix = binary)."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{math.ceil(n / scale)}{suffix}"
    return str(math.ceil(n))


def _more_tp(ctx: Context, why: str) -> Fix:
    tp = ctx.tensor_parallel_size
    return Fix("--tensor-parallel-size", tp * 2, why)


# --- builders ------------------------------------------------------------
def _weights(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    run = _run(members)
    weights = ctx.weights_per_gpu_gib(col)
    total = ctx.gpu_total_gib
    if weights and total:
        w, how = weights
        v.numbers.append(f"weights {fmt(w)} GiB per GPU ({how}) vs {fmt(total)} GiB GPU")
    alloc = _num(members, "alloc_gib")
    if alloc is not None:
        v.numbers.append(f"failed allocation {fmt(alloc)} GiB" + (f", {fmt(_num(members, 'free_gib'))} GiB free"
                                                                 if _num(members, "free_gib") is not None else ""))
    v.summary = "CUDA out of memory while loading the weights: the model's weights do not fit on each GPU" + (
        f" ({_primary_reason(members)})." if _primary_reason(members) not in ("", "message") else ".")
    v.fix.append(_more_tp(ctx, "splits the weights across more GPUs (each holds 1/TP of them)"))
    quant = str(ctx.arg("quantization") or "") + (ctx.model or "")
    if not re.search(r"awq|gptq|fp8|int4|int8|bnb|fp4|gguf", quant, re.IGNORECASE):
        v.fix.append(Fix("--quantization", "fp8", "FP8 weights take about half the memory of BF16 "
                         "(Ada/Hopper or newer; elsewhere use a pre-quantized AWQ/GPTQ checkpoint)"))
    if weights and total:
        w, _ = weights
        spill = max(1, math.ceil(w - 0.8 * total))
        v.fix.append(Fix("--cpu-offload-gb", spill, f"keeps ~{spill} GiB of weights in host RAM (slower decode)"))
    _ = run


def _startup_free(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    free, total = _num(members, "free_gib"), _num(members, "total_gib")
    util, requested = _num(members, "gpu_memory_utilization"), _num(members, "requested_gib")
    cause = _cause(members)
    host = bool(_num(members, "host"))
    kv_requested = _num(members, "kv_requested_gib")
    if kv_requested is not None and free is not None:
        v.numbers.append(f"KV cache asked {fmt(kv_requested)} GiB; {fmt(free)} GiB of host RAM free of {fmt(total)} GiB")
        v.summary = (f"--kv-cache-memory-bytes asks for {fmt(kv_requested)} GiB of KV cache but only {fmt(free)} GiB "
                     "of host memory is available on the NUMA node (CPU backend).")
        v.fix.append(Fix("--kv-cache-memory-bytes", _human_bytes(max(free * 0.8, 0.01) * (1 << 30)),
                         "fits in the memory actually available (or free memory used by other processes)"))
        return
    if host and free is not None and total:
        new = math.floor((free / total - 0.01) * 100) / 100
        v.numbers.append(f"host RAM free at start {fmt(free)} GiB of {fmt(total)} GiB < {util} x {fmt(total)} = "
                         f"{fmt(requested)} GiB")
        v.summary = (f"Only {fmt(free)} of {fmt(total)} GiB of host RAM were available when the CPU backend started, "
                     f"less than the {fmt(requested)} GiB that --gpu-memory-utilization {util} reserves on CPU.")
        v.fix.append(Fix("--gpu-memory-utilization", max(new, 0.05), "on the CPU backend this is the fraction of host "
                         "RAM reserved; keep it within what is free"))
        v.fix.append(Fix("--kv-cache-memory-bytes", _human_bytes(max(free * 0.5, 0.01) * (1 << 30)),
                         "or pin the KV cache size instead of a fraction of RAM"))
        return
    if free is not None and total:
        v.numbers.append(f"free at start {fmt(free)} GiB of {fmt(total)} GiB < {util} x {fmt(total)} = {fmt(requested)} GiB")
        new = math.floor((free / total - 0.01) * 100) / 100
        v.summary = (f"Only {fmt(free)} of {fmt(total)} GiB were free when vLLM started, less than the "
                     f"{fmt(requested)} GiB that --gpu-memory-utilization {util} asks for: another process holds the GPU.")
        v.fix.append(Fix("--gpu-memory-utilization", new, f"fits in the {fmt(free)} GiB actually free "
                         "(or stop the other processes shown by nvidia-smi)"))
        return
    initial, current = _num(members, "initial_free_gib"), _num(members, "current_free_gib")
    if initial is not None:
        v.numbers.append(f"free memory changed during profiling: {fmt(initial)} -> {fmt(current)} GiB")
        v.summary = ("Free GPU memory changed while vLLM was profiling: another process on the same GPU "
                     "allocated or released memory.")
    elif cause == "kv-allocation":
        v.summary = ("CUDA out of memory while allocating the KV cache: the budget computed at start-up was "
                     "larger than the memory actually free (another process took some).")
    else:
        v.summary = "Another process holds GPU memory that --gpu-memory-utilization counts on."
    util_now = _util(ctx, col, _run(members)) or _default_util(ctx)
    v.fix.append(Fix("--gpu-memory-utilization", _round_util(util_now - 0.05),
                     "leaves room for the memory other processes hold (or give vLLM the GPU to itself)"))
    if cause == "kv-allocation":
        v.fix.append(Fix("--kv-cache-memory-bytes", "<GiB that fit>G",
                         "pins the KV cache size instead of deriving it from free memory"))


def _profile(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    cause = _cause(members)
    tokens = _int_arg(ctx, "max_num_batched_tokens")
    max_len = _int_arg(ctx, "max_model_len")
    if cause == "sampler":
        n = _num(members, "num_dummy")
        seqs = _lower_seqs(ctx, n)
        v.summary = (f"CUDA out of memory warming up the sampler with {n or 'max_num_seqs'} dummy requests "
                     "(start-up, after the KV cache was allocated): --max-num-seqs is too large for what is left.")
        v.fix.append(Fix("--max-num-seqs", seqs, "the sampler warm-up allocates logits for max_num_seqs requests"))
        v.fix.append(Fix("--gpu-memory-utilization", _round_util((_util(ctx, col, _run(members)) or _default_util(ctx)) - 0.03),
                         "a smaller KV pool leaves more room for the warm-up (costs KV capacity)"))
        return
    if cause == "multimodal" or ctx.multimodal:
        v.summary = ("CUDA out of memory in the start-up profile run of a multimodal model: the dummy images/videos "
                     "of the encoder budget did not fit next to the weights.")
        v.fix.append(Fix("--limit-mm-per-prompt", '{"image": 1}', "profiles fewer items per prompt "
                         "(0.6-0.9 spell it image=1)"))
        v.fix.append(Fix("--max-num-seqs", _lower_seqs(ctx), "fewer dummy sequences (with images) in the profile run"))
        if max_len and max_len > 16384:
            v.fix.append(Fix("--max-model-len", 8192, "a shorter context shrinks the profiled batch"))
        return
    reason = _primary_reason(members)
    detail = f" ({reason})" if reason and reason != "message" else ""
    if tokens:
        v.numbers.append(f"max_num_batched_tokens = {tokens}")
    chunked = ctx.arg("enable_chunked_prefill")
    if ctx.engine == "V0" and max_len and max_len > 8192 and not chunked and not tokens:
        v.summary = (f"CUDA out of memory in the start-up profile run{detail}: without chunked prefill V0 profiles "
                     f"a full {max_len}-token prefill.")
        v.fix.append(Fix("--enable-chunked-prefill", True, "the profile run then uses max_num_batched_tokens tokens"))
        v.fix.append(Fix("--max-num-batched-tokens", 8192, "bounds the activation peak of one step"))
        return
    v.summary = (f"CUDA out of memory in the start-up profile run{detail}: the activation peak of one "
                 f"{tokens or 'max_num_batched_tokens'}-token step did not fit next to the weights.")
    v.fix.append(Fix("--max-num-batched-tokens", _lower_tokens(ctx), "the profile-run activation peak scales with "
                     "the tokens in one step (lowering --gpu-memory-utilization does not help here)"))
    v.fix.append(Fix("--max-num-seqs", _lower_seqs(ctx), "fewer sequences in the dummy batch and the sampler warm-up"))


def _cudagraph(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    run = _run(members)
    est, got = _fact(col, "cuda_graph_estimate", run), _fact(col, "kv_available", run)
    if est is not None:
        v.numbers.append(f"CUDA graph estimate {fmt(est)} GiB")
    if got is not None:
        v.numbers.append(f"KV cache took {fmt(got)} GiB")
    reason = _primary_reason(members)
    v.summary = ("CUDA out of memory while capturing CUDA graphs: after the KV cache took its share, the graphs' "
                 f"memory did not fit{f' ({reason})' if reason and reason != 'message' else ''}.")
    v.fix.append(Fix("--enforce-eager", True, "skips graph capture entirely (slower decode, no graph memory)"))
    version = ctx.version_tuple()
    if version is None or version >= (0, 12):
        v.fix.append(Fix("--max-cudagraph-capture-size", 64, "captures fewer, smaller batch sizes"))
    else:
        v.fix.append(Fix("--max-num-seqs", _lower_seqs(ctx), "V0 captures one graph per batch size up to max_num_seqs"))
    util = _util(ctx, col, run) or _default_util(ctx)
    v.fix.append(Fix("--gpu-memory-utilization", _round_util(util - 0.05),
                     "a smaller KV pool leaves room for the graphs (raising it makes this worse)"))


def _no_kv(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    run = _run(members)
    weights = _fact(col, "weights", run)
    act = _fact(col, "activation_peak", run)
    non_torch = _fact(col, "non_torch", run)
    available = _num(members, "kv_available_gib")
    if available is None:
        available = _fact(col, "kv_available", run)
        if available is None:
            available = _fact(col, "kv_reserved", run)
    util = _util(ctx, col, run)
    total = _fact(col, "total_gpu", run) or ctx.gpu_total_gib
    parts = [f"weights {fmt(weights)} GiB" if weights is not None else None,
             f"activation {fmt(act)} GiB" if act is not None else ("activation" if weights is not None else None),
             f"non-torch {fmt(non_torch)} GiB" if non_torch is not None else None]
    used = " + ".join(p for p in parts if p)
    budget = f"{util if util is not None else '?'} x {fmt(total)} GiB" if total else None
    if used and budget:
        v.numbers.append(f"{used} > {budget}")
    if available is not None:
        v.numbers.append(f"available KV cache {fmt(available)} GiB")
    v.summary = ("No memory is left for the KV cache: " +
                 (f"{used} exceed the budget {budget}." if used and budget else
                  "the weights and the profile-run peak use the whole --gpu-memory-utilization budget."))
    cur = util or _default_util(ctx)
    pinned = _int_arg(ctx, "kv_cache_memory_bytes")
    if pinned is not None:
        v.summary = (f"--kv-cache-memory-bytes {_human_bytes(pinned)} is too small for even one KV cache block "
                     "(the pinned size ignores --gpu-memory-utilization).")
        v.fix.append(Fix("--kv-cache-memory-bytes", _human_bytes(max(pinned * 64, 64 << 20)),
                         "room for at least one max_model_len request of KV blocks"))
        return
    if available is not None and available < 0 and total:
        new = cur + (-available + 1.0) / total
        if new <= MAX_UTIL:
            v.fix.append(Fix("--gpu-memory-utilization", _round_util(new + 0.005),
                             f"covers the {fmt(-available)} GiB shortfall plus 1 GiB of KV"))
        else:
            v.fix.append(Fix("--gpu-memory-utilization", MAX_UTIL, f"the shortfall ({fmt(-available)} GiB) is more than "
                             "raising the budget can give; also apply the fixes below"))
    elif ctx.platform == "cpu":
        v.fix.append(Fix("--gpu-memory-utilization", _round_util(cur + 0.1), "on the CPU backend it also sets the "
                         "host memory reserved for the KV cache"))
    else:
        v.fix.append(Fix("--gpu-memory-utilization", _round_util(max(cur + 0.05, 0.9)),
                         "a larger budget leaves room for KV blocks after the weights and the profile peak"))
    v.fix.append(Fix("--max-num-batched-tokens", _lower_tokens(ctx), "a smaller profile-run activation peak "
                     "leaves more of the budget for KV"))
    v.fix.append(_more_tp(ctx, "weights and activations split across GPUs"))


def _kv_small(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    needed, avail = _num(members, "needed_gib"), _num(members, "available_gib")
    max_len = _num(members, "max_model_len") or _int_arg(ctx, "max_model_len")
    est = _num(members, "estimated_max_len")
    tokens = _num(members, "kv_tokens")
    fit = est or tokens
    if needed is not None and avail is not None:
        v.numbers.append(f"one {max_len or 'max_model_len'}-token request needs {fmt(needed)} GiB of KV cache; "
                         f"{fmt(avail)} GiB available")
    if tokens is not None and max_len:
        v.numbers.append(f"KV cache holds {int(tokens)} tokens < max_model_len {max_len}")
    if est:
        v.numbers.append(f"largest max_model_len that fits: {est}")
    v.summary = (f"The KV cache cannot hold one request of max_model_len {max_len or '(the default)'} tokens"
                 + (f": it fits {fit} tokens." if fit else "."))
    if fit:
        v.fix.append(Fix("--max-model-len", int(fit), "the largest length the KV cache can hold, as vLLM computed it"))
    else:
        lower = (int(max_len) // 2) if max_len else None
        v.fix.append(Fix("--max-model-len", lower or "<lower>", "a shorter maximum length needs less KV cache"))
    run = _run(members)
    util = _util(ctx, col, run) or _default_util(ctx)
    total = ctx.gpu_total_gib or _fact(col, "total_gpu", run)
    pinned = _int_arg(ctx, "kv_cache_memory_bytes")
    if pinned:
        # A pinned KV size ignores --gpu-memory-utilization: scale the pin itself.
        if needed and avail:
            new_bytes = pinned * needed / avail
        elif est and max_len:
            new_bytes = pinned * int(max_len) / est
        else:
            new_bytes = pinned * 2
        v.fix.append(Fix("--kv-cache-memory-bytes", _human_bytes(new_bytes * 1.1),
                         f"the pinned KV cache ({_human_bytes(pinned)}) must hold one {max_len or 'max_model_len'}-token "
                         "request; --gpu-memory-utilization does not change a pinned size"))
    elif needed is not None and avail is not None and total:
        new = util + (needed - avail) * 1.05 / total
        if new <= MAX_UTIL:
            v.fix.append(Fix("--gpu-memory-utilization", _round_util(new + 0.01),
                             f"adds the missing {fmt(needed - avail)} GiB to the KV budget"))
        else:
            v.fix.append(Fix("--gpu-memory-utilization", MAX_UTIL, "raising the budget alone cannot add the missing "
                             f"{fmt(needed - avail)} GiB; combine with the other fixes"))
    else:
        v.fix.append(Fix("--gpu-memory-utilization", _round_util(max(util + 0.05, 0.9)), "a larger KV budget"))
    if str(ctx.arg("kv_cache_dtype") or "auto").startswith("auto") and ctx.platform != "cpu":
        v.fix.append(Fix("--kv-cache-dtype", "fp8", "FP8 KV cache halves the bytes per token"))
    if ctx.arg("num_gpu_blocks_override") and max_len:
        v.fix.append(Fix("--num-gpu-blocks-override", math.ceil(int(max_len) / 16) + 64, "the block pool must hold "
                         "one max_model_len request (plus a few spare blocks)"))


def _runtime(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    req = col.requests
    if req:
        v.numbers.append(f"{req.get('running')} requests running, {req.get('waiting')} waiting"
                         + (f", KV usage {req['kv_cache_usage_pct']}%" if "kv_cache_usage_pct" in req else ""))
    alloc = _num(members, "alloc_gib")
    if alloc is not None:
        v.numbers.append(f"failed allocation {fmt(alloc)} GiB")
    reason = _primary_reason(members)
    v.summary = ("CUDA out of memory while serving: a step's activations (long prefill, large batch or prompt "
                 f"logprobs) outgrew the memory left outside the KV pool{f' ({reason})' if reason and reason != 'message' else ''}.")
    v.fix.append(Fix("--max-num-batched-tokens", _lower_tokens(ctx), "bounds the tokens (and activations) of one step"))
    v.fix.append(Fix("--gpu-memory-utilization", _round_util((_util(ctx, col, _run(members)) or _default_util(ctx)) - 0.05),
                     "leaves more headroom outside the KV pool for activation peaks"))
    v.fix.append(Fix("--max-num-seqs", _lower_seqs(ctx), "fewer concurrent sequences per step"))
    reserved = _num(members, "reserved_unallocated_gib")
    if reserved is not None and reserved > 0.5:
        v.fix.append(Fix("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True",
                         f"environment variable: {fmt(reserved)} GiB were reserved but unallocated (fragmentation)"))


def _host(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    kills = col.kernel_kills
    if kills:
        k = kills[-1]
        rss = f", anon-rss {fmt(k.anon_rss_bytes / (1 << 30))} GiB" if k.anon_rss_bytes else ""
        where = f" in cgroup {k.cgroup}" if k.cgroup else (" (cgroup limit)" if k.constraint == "CONSTRAINT_MEMCG" else "")
        v.numbers.append(f"kernel killed pid {k.pid} ({k.name}){rss}{where}")
        v.summary = (f"Host RAM ran out: the kernel OOM killer killed {k.name} (pid {k.pid}){where}; "
                     "no CUDA error is involved.")
    else:
        code = _num(members, "exit_code")
        v.summary = (f"A vLLM process was killed by SIGKILL (exit {code if code is not None else 137}) without a CUDA "
                     "error: the signature of the host (or container) OOM killer.")
    for event in col.kernel_memory:
        if event.get("event") == "cgroup usage":
            v.numbers.append(f"cgroup usage {fmt(event['usage_bytes'] / (1 << 30))} GiB of limit "
                             f"{fmt(event['limit_bytes'] / (1 << 30))} GiB")
            break
    version = ctx.version_tuple()
    swap = ctx.arg("swap_space")
    if swap not in (None, 0, 0.0) or (swap is None and version is not None and version < (0, 18) and ctx.engine != "V1"):
        v.fix.append(Fix("--swap-space", 0, "V0 pins swap_space GiB of host RAM per GPU for preempted sequences"))
    if ctx.arg("cpu_offload_gb"):
        v.fix.append(Fix("--cpu-offload-gb", None, "remove: offloaded weights live in host RAM"))
    if ctx.arg("kv_offloading_size"):
        v.fix.append(Fix("--kv-offloading-size", None, "remove or lower: the offloaded KV cache lives in host RAM"))
    if ctx.platform == "cpu":
        v.fix.append(Fix("VLLM_CPU_KVCACHE_SPACE", 4, "environment variable: GiB of host RAM for the CPU backend's KV cache"))
    if not v.fix:
        v.summary += " Give the container or host more memory, or run fewer processes on it."


def _ima(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    v.summary = ("CUDA illegal memory access / device-side assert: a kernel read or wrote out of bounds (a bug or a "
                 "backend/quantization path issue), not an out-of-memory condition.")
    v.fix.append(Fix("CUDA_LAUNCH_BLOCKING", 1, "environment variable: reports the failing kernel at its real call site"))
    v.fix.append(Fix("--enforce-eager", True, "rules CUDA graphs in or out as the trigger"))
    v.fix.append(Fix("VLLM_ATTENTION_BACKEND", "<another backend>", "environment variable: try another attention "
                     "backend (FLASH_ATTN, FLASHINFER, TRITON_ATTN...) or upgrade vLLM"))


def _bad_arg(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    whys = []
    for m in members:
        ev = m.event
        if ev.signal == Signal.UNRECOGNIZED_ARGS:
            pairs = split_unrecognized(str(ev.numbers.get("args", ""))) or [(str(ev.numbers.get("args", "")), None)]
            if ev.numbers.get("keyword"):
                pairs = [("--" + str(ev.numbers["args"]).replace("_", "-"), None)]
            for flag, given in pairs:
                hint = hint_for(flag, prog=ev.numbers.get("prog"), version=ctx.version)
                if any(f.flag == (hint.suggestion or hint.flag) for f in v.fix):
                    continue
                value = given if given is not None else ctx.arg(flag.lstrip("-").replace("-", "_"))
                if hint.suggestion:
                    v.fix.append(Fix(hint.suggestion, value if value is not None else True, hint.why))
                else:
                    v.fix.append(Fix(hint.flag, None, "remove: " + hint.why))
                whys.append(f"{flag} was rejected")
        elif ev.signal == Signal.MODEL_NOT_FOUND:
            v.fix.append(Fix("--model", "<local directory with config.json, or an existing Hugging Face repo id>",
                             "the model path does not exist or is not a model directory"))
            whys.append("the model path or repository id was not found")
        elif ev.signal == Signal.INVALID_ARG_VALUE:
            problem = str(ev.numbers.get("problem", ev.text))
            arg = ev.numbers.get("arg") or _arg_in(problem)
            whys.append(f"invalid value: {problem[:160]}")
            if arg:
                flag = arg.split("/")[0].strip() if arg.startswith("-") else "--" + arg.replace("_", "-")
                bound = re.search(r"(?:less|greater) than or equal to ([\d.]+)", problem)
                if "max_model_len" in problem and re.search(r"got \w+: 0\b|positive", problem):
                    v.fix.append(Fix(flag, None, "remove it (or pass a positive length): 0 no longer means auto"))
                elif flag == "--gpu-memory-utilization":
                    v.fix.append(Fix(flag, 0.9, "a fraction of the device memory between 0 and 1; 0.9 is the usual default"))
                elif bound:
                    v.fix.append(Fix(flag, float(bound.group(1)) if "." in bound.group(1) else int(bound.group(1)),
                                     problem[:200]))
                else:
                    v.fix.append(Fix(flag, "<valid value>", problem[:200]))
    v.summary = "vLLM rejected its command line: " + ("; ".join(dict.fromkeys(whys)) or "invalid argument") + "."


def _arg_in(text: str) -> str | None:
    m = re.search(r"\b(max_model_len|max_num_seqs|max_num_batched_tokens|gpu_memory_utilization|tensor_parallel_size|"
                  r"block_size|kv_cache_dtype|dtype|quantization|swap_space|max_logprobs)\b", text)
    return m.group(1) if m else None


def _max_len(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    asked, derived = _num(members, "max_model_len"), _num(members, "derived_max_len")
    source = _num(members, "derived_from") or "the model config"
    v.summary = (f"--max-model-len {asked} is above the model's maximum {derived if derived else ''} "
                 f"(from {source}).").replace("  ", " ")
    if asked and derived:
        v.numbers.append(f"max_model_len {asked} > derived {derived} ({source})")
    v.fix.append(Fix("--max-model-len", derived if derived else "<model maximum>", "the longest context the model "
                     "supports (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 overrides, with RoPE scaling only)"))


_FEATURE_FLAGS = (
    (r"partial prefill", "--max-num-partial-prefills", None),
    (r"prefix caching", "--no-enable-prefix-caching", True),
    (r"chunked prefill", "--no-enable-chunked-prefill", True),
    (r"speculative|spec decode|draft", "--speculative-config", None),
    (r"lora", "--enable-lora", None),
    (r"cascade", "--disable-cascade-attn", True),
    (r"expert parallel", "--enable-expert-parallel", None),
    (r"fp8 kv|kv cache dtype|kv_cache_dtype", "--kv-cache-dtype", "auto"),
)


def _config(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    world, gpus = _num(members, "world_size"), _num(members, "available_gpus")
    heads, tp = _num(members, "heads"), _num(members, "tensor_parallel_size")
    detail = str(_num(members, "detail") or (members[0].event.text if members else ""))
    if world and gpus:
        v.summary = f"The launch asks for {world} GPUs but only {gpus} are visible."
        v.fix.append(Fix("--tensor-parallel-size", gpus, "at most the number of visible GPUs (check CUDA_VISIBLE_DEVICES)"))
        return
    if heads and tp:
        # GPU counts come in powers of two; the largest one that divides the heads.
        best = max(d for d in (1, 2, 4, 8, 16, 32, 64) if d <= tp and heads % d == 0)
        v.summary = f"The model's {heads} attention heads cannot be split across tensor-parallel size {tp}."
        v.fix.append(Fix("--tensor-parallel-size", best, f"a divisor of {heads}"))
        return
    v.summary = f"vLLM rejected the configuration: {detail.strip()[:200]}"
    low = detail.lower()
    if "block size" in low:
        v.fix.append(Fix("--block-size", None, "remove it and let vLLM pick a size every KV group supports "
                         "(or use the size the model's recipe names)"))
    elif "bfloat16" in low or "compute capability" in low:
        v.fix.append(Fix("--dtype", "half", "this GPU lacks bfloat16 support"))
    else:
        for pattern, flag, value in _FEATURE_FLAGS:
            if re.search(pattern, low):
                v.fix.append(Fix(flag, value, "remove the unsupported feature" if value is None else "disable the unsupported feature"))
                break
        else:
            for flag in ctx.launch_flags:
                words = set(flag.lstrip("-").split("-")) - {"max", "num", "enable", "no", "size"}
                if words and all(w in low for w in words):
                    v.fix.append(Fix(flag, None, "remove: the message names this feature"))
                    break


def _mamba(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    seqs, blocks = _num(members, "max_num_seqs"), _num(members, "mamba_blocks")
    v.summary = (f"max_num_seqs {seqs} exceeds the {blocks} Mamba state blocks the KV budget leaves: each running "
                 "sequence needs one.")
    v.numbers.append(f"max_num_seqs {seqs} > Mamba blocks {blocks}")
    value = blocks if blocks and blocks < 16 else (blocks - blocks % 8 if blocks else None)
    v.fix.append(Fix("--max-num-seqs", value or "<below the Mamba block count>", "one Mamba state block per running sequence"))
    v.fix.append(Fix("--max-model-len", "<shorter>", "a shorter context leaves more of the pool for state blocks"))


def _unknown(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    text = members[-1].event.text if members else ""
    v.summary = f"The engine failed without a recognised cause; last error: {text.strip()[:200]}"


_BUILDERS: dict[FC, Callable[[Verdict, list[Any], Collector, Context], None]] = {
    FC.WEIGHTS_OOM: _weights, FC.STARTUP_FREE_MEMORY: _startup_free, FC.PROFILE_OOM: _profile,
    FC.CUDAGRAPH_OOM: _cudagraph, FC.NO_KV_MEMORY: _no_kv, FC.KV_TOO_SMALL: _kv_small, FC.RUNTIME_OOM: _runtime,
    FC.HOST_OOM: _host, FC.ILLEGAL_MEMORY_ACCESS: _ima, FC.BAD_ARGUMENT: _bad_arg, FC.MAX_LEN_EXCEEDS_MODEL: _max_len,
    FC.CONFIG_ERROR: _config, FC.MAMBA_STATE_LIMIT: _mamba, FC.UNKNOWN: _unknown,
}
