"""The fast path: which raw lines deserve a closer look.

A multi-gigabyte log is mostly request and throughput lines. Running dozens of
regular expressions on each of them would be far too slow, so every block of
the file is searched once for a set of literal keywords (one combined
pattern; RE2's automaton when ``google-re2`` is installed, else a trie-shaped
``re`` pattern). Only lines containing a keyword reach the parsers.

The very frequent serving lines (throughput, HTTP access, request
bookkeeping) are *not* keywords: they would turn every line into a hit. The
scanner instead looks for them with ``bytes.rfind`` in the gaps between hits
and keeps only the last one of each gap, which is enough to know the server
was serving and how many requests were in flight.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from oomguard.diagnose.parsers.cues import KEYWORDS as CUE_KEYWORDS
from oomguard.diagnose.parsers.frames import KEYWORDS as FRAME_KEYWORDS

# Every line the parsers understand contains at least one of these. Keep them
# specific: a keyword that appears on ordinary serving lines costs throughput.
KEYWORDS: tuple[bytes, ...] = (
    # errors, exceptions, tracebacks
    b"Error", b"ERROR", b"error:", b"error ", b"CRITICAL", b"Exception", b"Traceback", b'File "',
    b"usage: vllm", b"usage: api_server", b"usage: python", b"unrecognized argument", b"invalid choice", b"ambiguous option",
    b"out of memory", b"Out of memory", b"Tried to allocate", b"OutOfMemory", b"OOM", b"oom", b"CUBLAS_STATUS", b"CUDACachingAllocator",
    b"INTERNAL ASSERT", b"illegal memory", b"illegal instruction", b"device-side assert", b"misaligned address",
    b"unspecified launch failure", b"CUDA error", b"HIP error", b"NCCL",
    b"not enough", b"Not enough", b"insufficient", b"Insufficient", b"can't allocate", b"Cannot allocate",
    b"cannot allocate", b"bad_alloc", b"low on memory", b"No available memory", b"Killed", b"killed", b"KILL",
    b"exit code", b"exitcode", b"exit status", b"exited", b"died", b"Failed with result", b"status=9",
    b"not supported", b"Not supported", b"unsupported", b"Unsupported", b"does not support", b"divisible",
    b"Value error", b"validation error", b"Input should", b"Field required", b"must be", b"is greater than", b"is larger than", b"exceeds",
    b"NotImplemented", b"not implemented", b"Failed to", b"failed to", b"fatal", b"Fatal",
    # memory lines
    b"GiB", b" GB", b"GB;", b"blocks:", b"blocks", b"oncurrency", b"KV cache size", b"KV cache memory",
    b"KV cache is", b"in KV cache", b"KV Cache", b"kv_cache", b"cache blocks", b"total_gpu_memory",
    b"weights take", b"non_torch", b"activation peak", b"Memory profiling", b"memory profiling",
    b"Free memory", b"free memory", b"max seq len", b"max_model_len", b"max model len", b"model length",
    b"max_position_embeddings", b"max_num_seqs", b"max_num_batched_tokens", b"Mamba", b"mamba",
    b"swap space", b"swap_space",
    # phase markers
    b"oading", b"Starting to load", b"Capturing", b"capturing", b"CUDA graph", b"cudagraph", b"CUDAGraph",
    b"Graph capturing", b"compile", b"Compil", b"profil", b"Profil", b"warm", b"Warm",
    b"init engine", b"Initializing", b"initializ", b"API server", b"Uvicorn running", b"startup complete",
    b"Started server", b"Available routes", b"Chunked prefill", b"detected platform",
    # identity: version, args, model
    b"version", b"Version", b"non-default args", b"args: Namespace", b"with config:", b"Namespace(",
    b"VLLM_", b"model_tag", b"\xe2\x96\x88",  # the banner's block character
    # kernel / container / init system
    b"oom-kill", b"oom_reaper", b"invoked oom", b"Memory cgroup", b"memory cgroup", b"anon-rss",
    b"OOMKilled", b"memory.max", b"memory: usage",
    # words of the paraphrase tier (parsers/paraphrase.py), English and Chinese
    b"VRAM", b"ran out", b"run out", b"fit on", b"fit in", "显存".encode(), "内存".encode(), "缓存".encode(),
    "杀".encode(), b"ther process", b"ther program", b"ther job", b"ther model", b"ther container", b"ther instance",
    b"second process", "进程".encode(), "程序".encode(),
    # environment failures (parsers/environment.py)
    b"No module named", b"Please install", b"please install", b"Nccl", b"limit", b"Assertion `", b"process group", b"store based barrier", b"shared object", b"cannot import", b"emplate", b"placement group",
    b"GPU available", b"fulfill resource", b" GPU\n", b"out of resource",
) + FRAME_KEYWORDS + CUE_KEYWORDS  # report cues: one table, parsers/cues.py

# Frequent serving lines, handled with rfind between hits (see module docstring).
FREQUENT: tuple[bytes, ...] = (
    b"Avg prompt throughput",
    b'"POST /',
    b"Received request",
    b"Added request",
    b"Finished request",
)


def _trie_pattern(words: tuple[bytes, ...]) -> bytes:
    """A regex with shared prefixes factored out: far faster than a flat alternation in ``re``."""
    root: dict[Any, Any] = {}
    for word in words:
        node = root
        for byte in word:
            node = node.setdefault(byte, {})
        node[None] = True

    def emit(node: dict[Any, Any]) -> bytes:
        alternatives = [re.escape(bytes([b])) + emit(child) for b, child in sorted((k, v) for k, v in node.items() if k is not None)]
        if not alternatives:
            return b""
        body = alternatives[0] if len(alternatives) == 1 else b"(?:" + b"|".join(alternatives) + b")"
        if None in node:
            # The word can end here; anything longer is optional and need not match.
            return b"(?:" + body + b")?"
        return body

    return emit(root)


@lru_cache(maxsize=1)
def compiled() -> tuple[Any, str]:
    """The keyword matcher and the engine name ("re2" or "re")."""
    # Shortest keyword first would make RE2 stop early inside a longer one; order is irrelevant for
    # a prefilter because we only need *a* match per line.
    flat = b"|".join(re.escape(k) for k in KEYWORDS)
    try:
        import re2  # type: ignore[import-not-found]

        options = re2.Options()
        options.max_mem = 64 << 20
        return re2.compile(flat, options), "re2"
    except Exception:  # noqa: BLE001 - any import or build problem: fall back to the stdlib
        return re.compile(_trie_pattern(KEYWORDS)), "re"
