"""Quantized checkpoints of the same model as fit candidates (FP8, AWQ, GPTQ, NVFP4 where the GPU runs them).

A published quantized re-upload of the model (``Qwen/Qwen3-32B-FP8`` next to
``Qwen/Qwen3-32B``) is often the best edit of all: weights shrink by 2-4x, the KV
pool grows by what they free. Only checkpoints in the bundled catalog (or the
HF cache) are considered: fit never downloads. The GPU must run the format:
NVFP4 needs Blackwell (sm 10.0+); FP8 runs natively from sm 8.9 and weight-only
(the Marlin kernel) on sm 8.0-8.6; AWQ/GPTQ need sm 7.5+.
"""

from __future__ import annotations

import re

# suffix (lower case) -> (format, the smallest compute capability vLLM runs it on, trade-off)
_FORMATS = {
    "fp8": ("FP8", (8, 0), "FP8 weights: half the bytes of 16-bit; small accuracy cost (check your evals)"),
    "awq": ("AWQ", (7, 5), "AWQ 4-bit weights: a quarter of the bytes; measurable accuracy cost on hard tasks"),
    "gptq-int4": ("GPTQ", (7, 5), "GPTQ 4-bit weights: a quarter of the bytes; measurable accuracy cost on hard tasks"),
    "gptq-int8": ("GPTQ", (7, 5), "GPTQ 8-bit weights: half the bytes; small accuracy cost"),
    "nvfp4": ("NVFP4", (10, 0), "NVFP4 weights: about a quarter of the bytes; Blackwell FP4 tensor cores"),
}


def _tail(model_id: str) -> str:
    return model_id.rsplit("/", 1)[-1].lower()


def siblings(model_id: str, gpu_cc: tuple[int, int] | None, ids: list[str]) -> list[tuple[str, str, str]]:
    """(catalog id, format, trade-off) of quantized checkpoints of ``model_id`` the GPU can run."""
    base = _tail(model_id)
    if any(base.endswith("-" + s) for s in _FORMATS):
        return []  # already a quantized checkpoint
    out = []
    for cid in ids:
        t = _tail(cid)
        m = re.fullmatch(re.escape(base) + r"-(.+)", t)
        if not m or m.group(1) not in _FORMATS:
            continue
        fmt, need, trade = _FORMATS[m.group(1)]
        if gpu_cc is not None and tuple(gpu_cc) < need:
            continue
        if fmt == "FP8" and gpu_cc is not None and tuple(gpu_cc) < (8, 9):
            trade += "; this GPU has no FP8 tensor cores, so vLLM runs them weight-only (Marlin)"
        out.append((cid, fmt, trade))
    return out
