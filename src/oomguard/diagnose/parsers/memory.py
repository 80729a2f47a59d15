"""vLLM's memory lines (every version from 0.2 to 0.33) and the phase each one implies.

Formats are those listed in the reference (§4.1): weights, V0 profile summary
(one-line, multi-line and table forms), V1 DEBUG profile summary, available
KV, override, CUDA-graph estimate and capture, block counts, KV size and
concurrency, the start-up suggestion line. Negative or zero KV values are
failure signals in their own right.
"""

from __future__ import annotations

import re

from oomguard.diagnose.classes import Phase
from oomguard.diagnose.events import LogLine, Signal
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.numbers import integer, num, to_gib
import oomguard.lazy_re as lazy_re

_WEIGHTS = lazy_re.compile(r"(?:Model loading took|Loading model weights took|model weights took)\s+(-?[\d.]+)\s*(GiB|GB|MiB)")
_V0_PROFILE_ONE_LINE = lazy_re.compile(r"Memory profiling results:(.*)")
_KV_PAIR = lazy_re.compile(r"(\w{1,40})=(-?[\d.]{1,20})(GiB|GB|MiB)?")
_CAN_USE = lazy_re.compile(
    r"total_gpu_memory\s*\(?\s*([\d.]+)\s*GiB\)?\s*x\s*gpu_memory_utilization\s*\(?\s*([\d.]+)\)?\s*=\s*([\d.]+)\s*GiB"
)
_V0_PIECES = {
    "weights": lazy_re.compile(r"model weights take\s+(-?[\d.]+)\s*GiB"),
    "non_torch": lazy_re.compile(r"non_torch_memory(?: takes)?\s+(-?[\d.]+)\s*GiB"),
    "activation_peak": lazy_re.compile(r"activation peak memory(?: takes)?\s+(-?[\d.]+)\s*GiB"),
    "kv_reserved": lazy_re.compile(r"reserved for KV Cache is\s+(-?[\d.]+)\s*GiB"),
    "total_gpu": lazy_re.compile(r"^total_gpu_memory\s+([\d.]+)\s*GiB"),
    "requested": lazy_re.compile(r"vLLM instance can use\s+([\d.]+)\s*GiB"),
}
_V0_UTIL = lazy_re.compile(r"^gpu_memory_utilization\s+([\d.]+)\s*$")
_V1_PROFILE = {
    "non_kv": lazy_re.compile(r"Total non KV cache memory:\s*(-?[\d.]+)\s*GiB"),
    "activation_peak": lazy_re.compile(r"torch peak memory increase:\s*(-?[\d.]+)\s*GiB"),
    "non_torch": lazy_re.compile(r"non-torch forward increase memory:\s*(-?[\d.]+)\s*GiB"),
    "consumed": lazy_re.compile(r"total consumed \(from mem_get_info\):\s*(-?[\d.]+)\s*GiB"),
    "weights": lazy_re.compile(r"weights memory:\s*(-?[\d.]+)\s*GiB"),
}
_NPU_AVAILABLE = lazy_re.compile(r"^Available memory: (-?\d{1,16}), total memory: (\d{1,16})$")
_AVAILABLE_KV = lazy_re.compile(r"Available KV cache memory:\s*(-?[\d.]+)\s*(GiB|GB|MiB)")
_KV_OVERRIDE = lazy_re.compile(
    r"Initial free memory\s+([\d.]+)\s*GiB, reserved\s+([\d.]+)\s*GiB memory for KV Cache as specified by kv_cache_memory_bytes"
)
_CG_ESTIMATE = lazy_re.compile(r"Estimated CUDA graph memory:\s*([\d.]+)\s*GiB")
_CG_CAPTURED = lazy_re.compile(r"Graph capturing finished in\s+([\d.]+)\s*s(?:ecs?)?,?\s*(?:took\s+|\()(-?[\d.]+)\s*GiB")
_CG_POOL = lazy_re.compile(r"CUDA graph pool memory:\s*([\d.]+)\s*GiB \(actual\)")
_CG_UTIL = lazy_re.compile(r"current --gpu-memory-utilization=([\d.]+) is equivalent to --gpu-memory-utilization=([\d.]+)")
_BLOCKS = lazy_re.compile(r"#\s*(GPU|CUDA|cuda|rocm|ROCm|xpu|XPU|npu|hpu|tpu|cpu|CPU|neuron)\s+blocks:\s*(\d+)(?:,\s*#\s*CPU blocks:\s*(\d+))?")
_BARE_BLOCKS = lazy_re.compile(r"^GPU blocks:\s*(\d+)")
_KV_SIZE = lazy_re.compile(r"(\w{1,12}) KV cache size:\s*([\d,]+)\s*tokens")
_CONCURRENCY = lazy_re.compile(r"Maximum concurrency for\s+([\d,]+)\s+tokens per request:\s*([\d.]+)x")
_SUGGESTION = lazy_re.compile(
    r"Free memory on device(?: [\w:]+)? \(([\d.]+)/([\d.]+) GiB\) on startup\. Desired GPU memory utilization is \(([\d.]+), ([\d.]+) GiB\)"
)
# The same line, from 0.11: "Actual usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch
# memory, and G GiB for CUDAGraph memory" (gpu_worker.py::compile_or_warm_up_model): the whole ledger in one line.
_ACTUAL_USAGE = lazy_re.compile(
    r"Actual usage is\s+(-?[\d.]+)\s*GiB for weight,\s*(-?[\d.]+)\s*GiB for peak activation,\s*(-?[\d.]+)\s*GiB for "
    r"non-torch memory,\s*and\s*(-?[\d.]+)\s*GiB for CUDAGraph memory"
)
_CACHE_INFO_BLOCKS = lazy_re.compile(r"num_gpu_blocks is:\s*(\d+)")
_CAPTURING = ("Capturing cudagraphs", "Capturing CUDA graph", "Capturing the model for CUDA graphs",
              "Capturing CUDA graphs", "capturing CUDA graph", "Profiling CUDA graph memory",
              "CUDA graphs can take additional")
_CAPTURING_RX = lazy_re.compile("|".join(map(re.escape, _CAPTURING)))


# Every memory line contains one of these; anything else skips the ~20 patterns below.
_MEMORY_HINT = lazy_re.compile(r"GiB|GB|blocks|oncurrency|KV cache|raph|apturing|Memory profiling|gpu_memory_utilization|total memory|"
                          r"total_gpu_memory|non_torch|activation peak|weights take")


def parse_memory(line: LogLine, col: Collector) -> None:
    msg = line.message
    if not _MEMORY_HINT.search(msg):
        return
    if "took" in msg:
        m = _WEIGHTS.search(msg)
        if m:
            col.add_memory("weights", to_gib(m.group(1), m.group(2)), "GiB", line)
            col.advance_phase(Phase.PROFILING, line)
            return
        m = _CG_CAPTURED.search(msg)
        if m:
            col.add_memory("cuda_graph", num(m.group(2)), "GiB", line)
            col.advance_phase(Phase.WARMUP, line)
            return
    if "Memory profiling results:" in msg:
        m = _V0_PROFILE_ONE_LINE.search(msg)
        if m:
            for key, value, unit in _KV_PAIR.findall(m.group(1)):
                name = {"total_gpu_memory": "total_gpu", "peak_torch_memory": "peak_torch",
                        "non_torch_memory": "non_torch", "kv_cache_size": "kv_reserved",
                        "initial_memory_usage": "initial_usage", "memory_usage_post_profile": "post_profile_usage",
                        "gpu_memory_utilization": "gpu_memory_utilization"}.get(key)
                if name:
                    col.add_memory(name, num(value), "ratio" if not unit else "GiB", line)
            col.advance_phase(Phase.KV_CACHE, line)
            _check_negative_kv(line, col)
            return
    m = _CAN_USE.search(msg)
    if m:
        col.add_memory("total_gpu", num(m.group(1)), "GiB", line)
        col.add_memory("gpu_memory_utilization", num(m.group(2)), "ratio", line)
        col.add_memory("requested", num(m.group(3)), "GiB", line)
        col.advance_phase(Phase.PROFILING, line)
    found = False
    for name, rx in _V0_PIECES.items():
        m = rx.search(msg)
        if m:
            col.add_memory(name, num(m.group(1)), "GiB", line)
            found = True
    m = _V0_UTIL.match(msg)
    if m:
        col.add_memory("gpu_memory_utilization", num(m.group(1)), "ratio", line)
        found = True
    if found:
        if "reserved for KV Cache" in msg:
            col.advance_phase(Phase.KV_CACHE, line)
            _check_negative_kv(line, col)
        return
    if "Total non KV cache memory" in msg:
        for name, rx in _V1_PROFILE.items():
            m = rx.search(msg)
            if m:
                col.add_memory(name, num(m.group(1)), "GiB", line)
        return
    m = _NPU_AVAILABLE.search(msg)
    if m:
        # vllm-ascend's worker logs the KV budget it computed, in bytes: 0 means nothing is left for the KV cache
        value = int(num(m.group(1), lo=-1e16, hi=1e16)) / (1 << 30)
        col.add_memory("kv_available", value, "GiB", line)
        col.add_memory("total_gpu", int(num(m.group(2), lo=0, hi=1e16)) / (1 << 30), "GiB", line)
        col.advance_phase(Phase.KV_CACHE, line)
        if value <= 0:
            col.signal(Signal.NEGATIVE_KV, line, numbers={"kv_available_gib": value})
        return
    m = _AVAILABLE_KV.search(msg)
    if m:
        value = to_gib(m.group(1), m.group(2))
        col.add_memory("kv_available", value, "GiB", line)
        col.advance_phase(Phase.KV_CACHE, line)
        if value < 0:
            col.signal(Signal.NEGATIVE_KV, line, numbers={"kv_available_gib": value})
        return
    m = _KV_OVERRIDE.search(msg)
    if m:
        col.add_memory("free_at_start", num(m.group(1)), "GiB", line)
        col.add_memory("kv_available", num(m.group(2)), "GiB", line)
        col.advance_phase(Phase.KV_CACHE, line)
        return
    m = _CG_ESTIMATE.search(msg)
    if m:
        col.add_memory("cuda_graph_estimate", num(m.group(1)), "GiB", line)
        col.advance_phase(Phase.GRAPH_CAPTURE, line)
        return
    m = _CG_POOL.search(msg)
    if m:
        col.add_memory("cuda_graph", num(m.group(1)), "GiB", line)
        return
    m = _CG_UTIL.search(msg)
    if m:
        col.add_memory("gpu_memory_utilization", num(m.group(1)), "ratio", line)
        return
    m = _BLOCKS.search(msg)
    bare = None if m else _BARE_BLOCKS.search(msg)
    if m or bare:
        blocks = integer(m.group(2) if m else bare.group(1))
        col.add_memory("num_gpu_blocks", blocks, "blocks", line)
        if m and m.group(3):
            col.add_memory("num_cpu_blocks", integer(m.group(3)), "blocks", line)
        col.advance_phase(Phase.KV_CACHE, line)
        if blocks == 0:
            col.signal(Signal.ZERO_BLOCKS, line, numbers={"num_gpu_blocks": 0})
    m = _KV_SIZE.search(msg) if "KV cache size" in msg else None
    if m:
        col.add_memory("kv_tokens", num(m.group(2)), "tokens", line)
        col.advance_phase(Phase.KV_CACHE, line)
    m = _CONCURRENCY.search(msg)
    if m:
        col.add_memory("max_concurrency", num(m.group(2)), "x", line)
        col.add_memory("concurrency_len", num(m.group(1)), "tokens", line)
        col.advance_phase(Phase.KV_CACHE, line)
        return
    m = _SUGGESTION.search(msg)
    if m:
        col.add_memory("free_at_start", num(m.group(1)), "GiB", line)
        col.add_memory("total_gpu", num(m.group(2)), "GiB", line)
        col.add_memory("gpu_memory_utilization", num(m.group(3)), "ratio", line)
        col.add_memory("requested", num(m.group(4)), "GiB", line)
        u = _ACTUAL_USAGE.search(msg)
        if u:
            # names of their own: diagnose's rules read "weights" / "cuda_graph" from the lines that print them
            for name, value in zip(("usage_weights", "usage_activation_peak", "usage_non_torch", "usage_cuda_graph"), u.groups()):
                col.add_memory(name, num(value), "GiB", line)
        return
    m = _CACHE_INFO_BLOCKS.search(msg)
    if m:
        col.add_memory("num_gpu_blocks", integer(m.group(1)), "blocks", line)
        return
    if "Graph capturing finished" in msg:
        # V0 and early V1 print no GiB figure ("Graph capturing finished in 7 secs."): capture is over all the same.
        col.advance_phase(Phase.WARMUP, line)
        return
    if _CAPTURING_RX.search(msg):
        col.advance_phase(Phase.GRAPH_CAPTURE, line)


def _check_negative_kv(line: LogLine, col: Collector) -> None:
    fact = col.latest("kv_reserved")
    if fact is not None and fact.line == line.line and fact.value < 0:
        col.signal(Signal.NEGATIVE_KV, line, numbers={"kv_available_gib": fact.value})


# For diagnose's byte scan (parsers/scanset.py: every module-level pattern here is scanned, but NOT_SCANNED; SCAN
# adds the literals where a substring test alone decides).
SCAN = ("Graph capturing finished",)
# A key=value pair of a line already chosen; the quick test of whether a line may be a memory line at all.
NOT_SCANNED = (_KV_PAIR, _MEMORY_HINT)
