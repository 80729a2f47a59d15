"""Fix builders for the memory classes: weights, start-up free memory, profile run, CUDA graphs, KV, serving, host.

Each builder fills a verdict's one-sentence summary, what the numbers say, and
the flag edits, using the numbers the log carries (free vs requested GiB, the
shortfall, the estimated maximum model length) as fix values when it has them.
"""

from __future__ import annotations

import math
import re
from typing import Any

from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Fix, Signal, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.cues import cue_name
from oomguard.diagnose.parsers.numbers import fmt
from oomguard.diagnose.remedy import (
    MAX_UTIL,
    cause_of,
    default_util,
    fact_of,
    human_bytes,
    int_arg,
    lower_seqs,
    lower_tokens,
    more_tp,
    num_of,
    primary_reason,
    round_util,
    run_of,
    util_of,
)

# The cue of an OOM kill named by a container runtime (docker's OOMKilled, Kubernetes' "Reason: OOMKilled"), when no
# exit status or kernel line is parsed as such. (The kernel's and systemd's OOM-kill lines are signals, not cues:
# Signal.KERNEL_OOM_KILL; the cue names "sig:kernel-oom-kill" / "kill:systemd" this once listed are scorer features
# and were never in col.cues.)
_OOMKILLED = cue_name("host:oomkilled")
_OFFLOAD = cue_name("host:offload")


def _weights(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    run = run_of(members)
    weights = ctx.weights_per_gpu_gib(col)
    total = ctx.gpu_total_gib
    if weights and total:
        w, how = weights
        v.numbers.append(f"weights {fmt(w)} GiB per GPU ({how}) vs {fmt(total)} GiB GPU")
    alloc = num_of(members, "alloc_gib")
    if alloc is not None:
        v.numbers.append(f"failed allocation {fmt(alloc)} GiB" + (f", {fmt(num_of(members, 'free_gib'))} GiB free"
                                                                 if num_of(members, "free_gib") is not None else ""))
    v.summary = "CUDA out of memory while loading the weights: the model's weights do not fit on each GPU" + (
        f" ({primary_reason(members)})." if primary_reason(members) not in ("", "message") else ".")
    dtype = str(ctx.arg("dtype") or "").lower().removeprefix("torch.")
    if dtype in ("float", "float32"):
        # --dtype float loads an unquantized checkpoint in fp32: twice the bytes of its bf16 / fp16 weights
        v.fix.append(Fix("--dtype", "auto", "the weights in the checkpoint's own 16-bit dtype (fp32 doubles them)"))
    v.fix.append(more_tp(ctx, "splits the weights across more GPUs (each holds 1/TP of them)"))
    quant = str(ctx.arg("quantization") or "") + (ctx.model or "")
    if not re.search(r"awq|gptq|fp8|int4|int8|bnb|fp4|gguf", quant, re.IGNORECASE):
        v.fix.append(Fix("--quantization", "fp8", "FP8 weights take about half the memory of BF16 "
                         "(Ada/Hopper or newer; elsewhere use a pre-quantized AWQ/GPTQ checkpoint)"))
    if weights and total:
        w, _ = weights
        spill = max(1, math.ceil(w - 0.8 * total))
        v.fix.append(Fix("--cpu-offload-gb", spill, f"keeps ~{spill} GiB of weights in host RAM (slower decode)"))
    _ = run


def _co_resident(col: Collector, held_gib: float) -> str:
    """Who holds the memory vLLM found missing: nvidia-smi's process list when given, else 'another process'."""
    procs = [p for smi in col.nvidia_smi for p in smi.get("processes", []) if p.get("used_bytes")]
    if procs:
        named = ", ".join(f"pid {p['pid']} {p.get('name') or ''} ({p['used_bytes'] / (1 << 30):.1f} GiB)".replace("  ", " ")
                          for p in sorted(procs, key=lambda p: -p["used_bytes"])[:3])
        return f"other processes hold {fmt(held_gib)} GiB (nvidia-smi: {named})"
    return f"another process holds {fmt(held_gib)} GiB of the GPU"


def _startup_free(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    free, total = num_of(members, "free_gib"), num_of(members, "total_gib")
    util, requested = num_of(members, "gpu_memory_utilization"), num_of(members, "requested_gib")
    cause = cause_of(members)
    host = bool(num_of(members, "host"))
    kv_requested = num_of(members, "kv_requested_gib")
    if kv_requested is not None and free is not None:
        v.numbers.append(f"KV cache asked {fmt(kv_requested)} GiB; {fmt(free)} GiB of host RAM free of {fmt(total)} GiB")
        v.summary = (f"--kv-cache-memory-bytes asks for {fmt(kv_requested)} GiB of KV cache but only {fmt(free)} GiB "
                     "of host memory is available on the NUMA node (CPU backend).")
        v.fix.append(Fix("--kv-cache-memory-bytes", human_bytes(max(free * 0.8, 0.01) * (1 << 30)),
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
        v.fix.append(Fix("--kv-cache-memory-bytes", human_bytes(max(free * 0.5, 0.01) * (1 << 30)),
                         "or pin the KV cache size instead of a fraction of RAM"))
        return
    if free is not None and total and requested is not None and util is not None:
        v.numbers.append(f"free at start {fmt(free)} GiB of {fmt(total)} GiB < {util} x {fmt(total)} = {fmt(requested)} GiB")
        new = math.floor((free / total - 0.01) * 100) / 100
        whose = _co_resident(col, total - free)
        v.summary = (f"Only {fmt(free)} of {fmt(total)} GiB were free when vLLM started, less than the "
                     f"{fmt(requested)} GiB that --gpu-memory-utilization {util} asks for: {whose}.")
        why = f"fits in the {fmt(free)} GiB actually free (or stop the other processes shown by nvidia-smi)"
        weights = ctx.weights_per_gpu_gib(col)
        if weights is not None and new * total < weights[0] * 1.05:
            # A utilization below the weights cannot start at all: say so instead of offering it as a fix.
            v.numbers.append(f"at {new} x {fmt(total)} = {fmt(new * total)} GiB the budget is below the weights "
                             f"({fmt(weights[0])} GiB, {weights[1]})")
            why = (f"passes the start-up check, but {fmt(new * total)} GiB cannot hold the {fmt(weights[0])} GiB of "
                   "weights: free the GPU (stop the other process) or add GPUs instead")
        v.fix.append(Fix("--gpu-memory-utilization", new, why))
        v.fix.append(Fix("--kv-cache-memory-bytes", "<KV GiB that fit in the free memory>G",
                         f"pins the KV cache size in bytes (>= 0.11) next to the {fmt(total - free)} GiB held by "
                         f"{whose.split(' hold')[0]}, instead of deriving it from --gpu-memory-utilization"))
        return
    initial, current = num_of(members, "initial_free_gib"), num_of(members, "current_free_gib")
    if initial is not None:
        v.numbers.append(f"free memory changed during profiling: {fmt(initial)} -> {fmt(current)} GiB")
        v.summary = ("Free GPU memory changed while vLLM was profiling: another process on the same GPU "
                     "allocated or released memory.")
    elif cause == "kv-allocation":
        v.summary = ("CUDA out of memory while allocating the KV cache: the budget computed at start-up was "
                     "larger than the memory actually free (another process took some).")
    else:
        v.summary = "Another process holds GPU memory that --gpu-memory-utilization counts on."
    util_now = util_of(ctx, col, run_of(members)) or default_util(ctx)
    v.fix.append(Fix("--gpu-memory-utilization", round_util(util_now - 0.05),
                     "leaves room for the memory other processes hold (or give vLLM the GPU to itself)"))
    if cause == "kv-allocation":
        v.fix.append(Fix("--kv-cache-memory-bytes", "<GiB that fit>G",
                         "pins the KV cache size instead of deriving it from free memory"))


def _profile(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    cause = cause_of(members)
    tokens = int_arg(ctx, "max_num_batched_tokens")
    max_len = int_arg(ctx, "max_model_len")
    if cause == "sampler":
        n = num_of(members, "num_dummy")
        seqs = lower_seqs(ctx, n)
        v.summary = (f"CUDA out of memory warming up the sampler with {n or 'max_num_seqs'} dummy requests "
                     "(start-up, after the KV cache was allocated): --max-num-seqs is too large for what is left.")
        v.fix.append(Fix("--max-num-seqs", seqs, "the sampler warm-up allocates logits for max_num_seqs requests"))
        v.fix.append(Fix("--gpu-memory-utilization", round_util((util_of(ctx, col, run_of(members)) or default_util(ctx)) - 0.03),
                         "a smaller KV pool leaves more room for the warm-up (costs KV capacity)"))
        return
    if (cause == "multimodal" or ctx.multimodal) and not ctx.text_only:
        v.summary = ("CUDA out of memory in the start-up profile run of a multimodal model: the dummy images/videos "
                     "of the encoder budget did not fit next to the weights.")
        v.fix.append(Fix("--limit-mm-per-prompt", '{"image": 1}', "profiles fewer items per prompt "
                         "(0.6-0.9 spell it image=1)"))
        v.fix.append(Fix("--max-num-seqs", lower_seqs(ctx), "fewer dummy sequences (with images) in the profile run"))
        if re.search(r"qwen[\d.]*-?(?:vl|omni)|qwen3-vl", ctx.model or "", re.IGNORECASE):
            # Qwen-VL's processor sizes the profile's dummy image at its max_pixels (about 12.8 M pixels)
            v.fix.append(Fix("--mm-processor-kwargs", '{"max_pixels": 1003520}', "a smaller largest image: the "
                             "profile's dummy images (and their vision tokens) shrink with it"))
        if max_len and max_len > 16384:
            v.fix.append(Fix("--max-model-len", 8192, "a shorter context shrinks the profiled batch"))
        return
    reason = primary_reason(members)
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
    if ctx.engine == "V0" and not max_len and chunked is None and not tokens:
        # V0 without chunked prefill sizes its step at max(max_model_len, 2048) tokens and rejects a smaller
        # --max-num-batched-tokens (SchedulerConfig._verify_args): the context length is what was profiled.
        v.summary = (f"CUDA out of memory in the start-up profile run{detail}: V0 without chunked prefill profiles "
                     "one prefill of the whole max_model_len (the model's context unless set).")
        v.fix.append(Fix("--enable-chunked-prefill", True, "keeps the context; the profile run then uses "
                         "max_num_batched_tokens tokens"))
        v.fix.append(Fix("--max-model-len", 8192, "V0 profiles a max_model_len-token prefill; a shorter context "
                         "shrinks it, at the cost of the context (V0 rejects --max-num-batched-tokens below max_model_len without chunked prefill)"))
        return
    v.summary = (f"CUDA out of memory in the start-up profile run{detail}: the activation peak of one "
                 f"{tokens or 'max_num_batched_tokens'}-token step did not fit next to the weights.")
    v.fix.append(Fix("--max-num-batched-tokens", lower_tokens(ctx), "the profile-run activation peak scales with "
                     "the tokens in one step (lowering --gpu-memory-utilization does not help here)"))
    v.fix.append(Fix("--max-num-seqs", lower_seqs(ctx), "fewer sequences in the dummy batch and the sampler warm-up"))


def _cudagraph(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    run = run_of(members)
    est, got = fact_of(col, "cuda_graph_estimate", run), fact_of(col, "kv_available", run)
    if est is not None:
        v.numbers.append(f"CUDA graph estimate {fmt(est)} GiB")
    if got is not None:
        v.numbers.append(f"KV cache took {fmt(got)} GiB")
    reason = primary_reason(members)
    v.summary = ("CUDA out of memory while capturing CUDA graphs: after the KV cache took its share, the graphs' "
                 f"memory did not fit{f' ({reason})' if reason and reason != 'message' else ''}.")
    v.fix.append(Fix("--enforce-eager", True, "skips graph capture entirely (slower decode, no graph memory)"))
    version = ctx.version_tuple()
    if version is None or version >= (0, 12):
        v.fix.append(Fix("--max-cudagraph-capture-size", 64, "captures fewer, smaller batch sizes"))
    else:
        v.fix.append(Fix("--max-num-seqs", lower_seqs(ctx), "V0 captures one graph per batch size up to max_num_seqs"))
    util = util_of(ctx, col, run) or default_util(ctx)
    v.fix.append(Fix("--gpu-memory-utilization", round_util(util - 0.05),
                     "a smaller KV pool leaves room for the graphs (raising it makes this worse)"))


def _mm_cache_off(ctx: Context) -> Fix:
    from oomguard.versions import get_release

    try:
        old = get_release(ctx.version).has_option("--disable-mm-preprocessor-cache") and not get_release(
            ctx.version).has_option("--mm-processor-cache-gb")
    except Exception:  # noqa: BLE001 - an unknown release: the current spelling
        old = False
    why = "the multimodal processor cache keeps processed images in host RAM"
    return Fix("--disable-mm-preprocessor-cache", True, why) if old else Fix("--mm-processor-cache-gb", 0, why)


def _no_kv(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    run = run_of(members)
    weights = fact_of(col, "weights", run)
    act = fact_of(col, "activation_peak", run)
    non_torch = fact_of(col, "non_torch", run)
    available = num_of(members, "kv_available_gib")
    if available is None:
        available = fact_of(col, "kv_available", run)
        if available is None:
            available = fact_of(col, "kv_reserved", run)
    util = util_of(ctx, col, run)
    total = fact_of(col, "total_gpu", run) or ctx.gpu_total_gib
    parts = [f"weights {fmt(weights)} GiB" if weights is not None else None,
             f"activation {fmt(act)} GiB" if act is not None else ("activation" if weights is not None else None),
             f"non-torch {fmt(non_torch)} GiB" if non_torch is not None else None]
    used = " + ".join(p for p in parts if p)
    budget = f"{util if util is not None else '?'} x {fmt(total)} GiB" if total else None
    if used and budget:
        v.numbers.append(f"{used} > {budget}")
    if available is not None:
        v.numbers.append(f"available KV cache {fmt(available)} GiB")
    if used and budget:
        detail = f"{used} exceed the budget {budget}."
    elif weights is not None and available is not None:
        detail = (f"weights {fmt(weights)} GiB plus the profile-run peak leave {fmt(available)} GiB for KV blocks "
                  f"within --gpu-memory-utilization {util if util is not None else '(default)'}.")
    else:
        detail = "the weights and the profile-run peak use the whole --gpu-memory-utilization budget."
    v.summary = "No memory is left for the KV cache: " + detail
    cur = util or default_util(ctx)
    pinned = int_arg(ctx, "kv_cache_memory_bytes")
    if pinned is not None:
        v.summary = (f"--kv-cache-memory-bytes {human_bytes(pinned)} is too small for even one KV cache block "
                     "(the pinned size ignores --gpu-memory-utilization).")
        v.fix.append(Fix("--kv-cache-memory-bytes", human_bytes(max(pinned * 64, 64 << 20)),
                         "room for at least one max_model_len request of KV blocks"))
        return
    if available is not None and available < 0 and total:
        new = cur + (-available + 1.0) / total
        if new <= MAX_UTIL:
            v.fix.append(Fix("--gpu-memory-utilization", round_util(new + 0.005),
                             f"covers the {fmt(-available)} GiB shortfall plus 1 GiB of KV"))
        else:
            v.fix.append(Fix("--gpu-memory-utilization", MAX_UTIL, f"the shortfall ({fmt(-available)} GiB) is more than "
                             "raising the budget can give; also apply the fixes below"))
    elif ctx.platform == "cpu":
        v.fix.append(Fix("--gpu-memory-utilization", round_util(cur + 0.1), "on the CPU backend it also sets the "
                         "host memory reserved for the KV cache"))
    else:
        v.fix.append(Fix("--gpu-memory-utilization", round_util(max(cur + 0.05, 0.9)),
                         "a larger budget leaves room for KV blocks after the weights and the profile peak"))
    tokens_fix = Fix("--max-num-batched-tokens", lower_tokens(ctx), "a smaller profile-run activation peak leaves "
                     "more of the budget for KV")
    seqs = int_arg(ctx, "max_num_seqs")
    if ctx.engine != "V0" and not int_arg(ctx, "max_num_batched_tokens") and (not seqs or seqs > 64):
        # V1 profiles a dummy batch of max_num_batched_tokens tokens (2048-16384 by default: already small) and warms
        # the sampler up for max_num_seqs requests (256-1024 by default): the sequences are the larger lever
        v.fix.append(Fix("--max-num-seqs", lower_seqs(ctx), "a smaller dummy batch and sampler warm-up in the profile "
                         "(V1's default is 256 to 1024 sequences)"))
        v.fix.append(tokens_fix)
    else:
        v.fix.append(tokens_fix)
    v.fix.append(more_tp(ctx, "weights and activations split across GPUs"))
    if ctx.engine != "V0" and not ctx.enforce_eager:
        v.fix.append(Fix("--enforce-eager", True, "no CUDA graphs: V1 counts their memory in the budget before the KV "
                         "cache"))


def _kv_small(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    needed, avail = num_of(members, "needed_gib"), num_of(members, "available_gib")
    max_len = num_of(members, "max_model_len") or int_arg(ctx, "max_model_len")
    est = num_of(members, "estimated_max_len")
    tokens = num_of(members, "kv_tokens")
    fit = est or tokens
    if needed is not None and avail is not None:
        v.numbers.append(f"one {max_len or 'max_model_len'}-token request needs {fmt(needed)} GiB of KV cache; "
                         f"{fmt(avail)} GiB available")
    if tokens is not None and max_len:
        v.numbers.append(f"KV cache holds {int(tokens)} tokens < max_model_len {max_len}")
    if est:
        v.numbers.append(f"largest max_model_len the KV cache holds (vLLM's estimate; the model's own maximum is a separate limit): {est}")
    v.summary = (f"The KV cache cannot hold one request of max_model_len {max_len or '(the default)'} tokens"
                 + (f": it fits {fit} tokens." if fit else "."))
    if fit:
        v.fix.append(Fix("--max-model-len", int(fit), "the largest length the KV cache can hold, as vLLM computed it"))
    else:
        lower = (int(max_len) // 2) if max_len else None
        v.fix.append(Fix("--max-model-len", lower or "<lower>", "a shorter maximum length needs less KV cache"))
    run = run_of(members)
    util = util_of(ctx, col, run) or default_util(ctx)
    total = ctx.gpu_total_gib or fact_of(col, "total_gpu", run)
    pinned = int_arg(ctx, "kv_cache_memory_bytes")
    if pinned:
        # A pinned KV size ignores --gpu-memory-utilization: scale the pin itself.
        if needed and avail:
            new_bytes = pinned * needed / avail
        elif est and max_len:
            new_bytes = pinned * int(max_len) / est
        else:
            new_bytes = pinned * 2
        v.fix.append(Fix("--kv-cache-memory-bytes", human_bytes(new_bytes * 1.1),
                         f"the pinned KV cache ({human_bytes(pinned)}) must hold one {max_len or 'max_model_len'}-token "
                         "request; --gpu-memory-utilization does not change a pinned size"))
    elif needed is not None and avail is not None and total:
        new = util + (needed - avail) * 1.05 / total
        if new <= MAX_UTIL:
            v.fix.append(Fix("--gpu-memory-utilization", round_util(new + 0.01),
                             f"adds the missing {fmt(needed - avail)} GiB to the KV budget"))
        else:
            v.fix.append(Fix("--gpu-memory-utilization", MAX_UTIL, "raising the budget alone cannot add the missing "
                             f"{fmt(needed - avail)} GiB; combine with the other fixes"))
    else:
        v.fix.append(Fix("--gpu-memory-utilization", round_util(max(util + 0.05, 0.9)), "a larger KV budget"))
    if str(ctx.arg("kv_cache_dtype") or "auto").startswith("auto") and ctx.platform != "cpu":
        v.fix.append(Fix("--kv-cache-dtype", "fp8", "FP8 KV cache halves the bytes per token"))
    if ctx.platform != "cpu" and not int_arg(ctx, "cpu_offload_gb"):
        v.fix.append(Fix("--cpu-offload-gb", 4, "keeps some weights in host RAM: their GPU memory goes to the KV cache "
                         "(slower decode)"))
    if ctx.arg("num_gpu_blocks_override") and max_len:
        v.fix.append(Fix("--num-gpu-blocks-override", math.ceil(int(max_len) / 16) + 64, "the block pool must hold "
                         "one max_model_len request (plus a few spare blocks)"))


def _runtime(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    req = col.requests
    if req:
        v.numbers.append(f"{req.get('running')} requests running, {req.get('waiting')} waiting"
                         + (f", KV usage {req['kv_cache_usage_pct']}%" if "kv_cache_usage_pct" in req else ""))
    alloc = num_of(members, "alloc_gib")
    if alloc is not None:
        v.numbers.append(f"failed allocation {fmt(alloc)} GiB")
    reason = primary_reason(members)
    v.summary = ("CUDA out of memory while serving: a step's activations (long prefill, large batch or prompt "
                 f"logprobs) outgrew the memory left outside the KV pool{f' ({reason})' if reason and reason != 'message' else ''}.")
    if cause_of(members) == "swap":
        # V0 preempted sequences by swapping their KV blocks to the CPU and that space filled: fewer sequences
        # in flight preempt less; a larger swap space holds more of them (host RAM, pinned per GPU)
        swap = int_arg(ctx, "swap_space")
        v.fix.append(Fix("--max-num-seqs", lower_seqs(ctx), "fewer running sequences: less preemption by swapping"))
        v.fix.append(Fix("--swap-space", max(8, 2 * swap) if swap else 16, "GiB of CPU swap space per GPU for "
                         "preempted sequences (host RAM)"))
    version = ctx.version_tuple()
    if (ctx.engine == "V0" or (version is not None and version < (0, 8))) and not ctx.arg("enable_chunked_prefill"):
        # V0 without chunked prefill runs a whole prompt in one step (and its prompt logprobs over the vocabulary)
        v.fix.append(Fix("--enable-chunked-prefill", True, "long prompts are prefilled in max_num_batched_tokens "
                         "chunks instead of one step"))
    v.fix.append(Fix("--max-num-batched-tokens", lower_tokens(ctx), "bounds the tokens (and activations) of one step"))
    v.fix.append(Fix("--gpu-memory-utilization", round_util((util_of(ctx, col, run_of(members)) or default_util(ctx)) - 0.05),
                     "leaves more headroom outside the KV pool for activation peaks"))
    v.fix.append(Fix("--max-num-seqs", lower_seqs(ctx), "fewer concurrent sequences per step"))
    reserved = num_of(members, "reserved_unallocated_gib")
    if reserved is not None and reserved > 0.5:
        v.fix.append(Fix("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True",
                         f"environment variable: {fmt(reserved)} GiB were reserved but unallocated (fragmentation)"))
    seen: set[str] = set()
    v.fix = [f for f in v.fix if not (f.flag in seen or seen.add(f.flag))]  # each flag once (the swap case adds one)


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
        code = num_of(members, "exit_code")
        signals = {getattr(m, "signal", None) for m in members}
        if code is not None or Signal.SIGKILL in signals or ctx.exit_code == 137:
            v.summary = (f"A vLLM process was killed by SIGKILL (exit {code if code is not None else 137}) without a "
                         "CUDA error: the signature of the host (or container) OOM killer.")
        elif _OOMKILLED in col.cues or any(s.signal == Signal.KERNEL_OOM_KILL for s in col.signals):
            v.summary = ("The container runtime or the kernel reports an OOM kill (OOMKilled / an OOM-killer "
                         "message) without a CUDA error: host RAM or the container's memory limit ran out.")
        elif Signal.HOST_ALLOC_FAILURE in signals:
            v.summary = ("A host-memory allocation failed (CPU or pinned memory, not the GPU's): host RAM or the "
                         "container's memory limit ran out.")
        else:
            # Only words or a table say so: claim no kill or exit status the text does not show.
            v.summary = ("Host RAM (or the container's memory limit) ran out, as the report describes it; no kernel "
                         "OOM-killer line, SIGKILL or exit status is in the text (dmesg would confirm it).")
    for event in col.kernel_memory:
        if event.get("event") == "cgroup usage":
            v.numbers.append(f"cgroup usage {fmt(event['usage_bytes'] / (1 << 30))} GiB of limit "
                             f"{fmt(event['limit_bytes'] / (1 << 30))} GiB")
            break
    version = ctx.version_tuple()
    swap = ctx.arg("swap_space")
    # Only V0's CacheEngine pins swap_space GiB of host RAM per GPU (4 by default); V1 (the default
    # from 0.8, the only engine from 0.11) preempts by recomputation and allocates no CPU swap blocks.
    v0_possible = ctx.engine == "V0" or (ctx.engine is None and (version is None or version < (0, 11)))
    if (v0_possible and swap not in (0, 0.0)) or _OFFLOAD in col.cues:
        v.fix.append(Fix("--swap-space", 0, "V0 pins swap_space GiB of host RAM per GPU for preempted sequences "
                         "(4 GiB each by default; releases from 0.18 drop the flag)"))
    if ctx.arg("cpu_offload_gb"):
        v.fix.append(Fix("--cpu-offload-gb", None, "offloaded weights live in host RAM"))
    if ctx.arg("kv_offloading_size"):
        v.fix.append(Fix("--kv-offloading-size", None, "the offloaded KV cache lives in host RAM (or lower it)"))
    if ctx.multimodal and not ctx.text_only:
        # the multimodal processor cache (processed images / videos) lives in host RAM, per API-server process
        v.fix.append(_mm_cache_off(ctx))
    if ctx.platform == "cpu":
        v.fix.append(Fix("VLLM_CPU_KVCACHE_SPACE", 4, "environment variable: GiB of host RAM for the CPU backend's KV cache"))
    if not v.fix:
        v.summary += " Give the container or host more memory, or run fewer processes on it."
