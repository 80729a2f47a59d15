"""Quantized checkpoints of the same model as fit candidates (FP8, AWQ, GPTQ, NVFP4 where the GPU runs them).

A published quantized re-upload of the model (``Qwen/Qwen3-32B-FP8`` next to
``Qwen/Qwen3-32B``) is often the best edit of all: weights shrink by 2-4x, the KV
pool grows by what they free. Only checkpoints in the bundled catalog (or the
HF cache) are considered: fit never downloads. The GPU must run the format, as the
GPU catalog says of its target: NVFP4 needs native FP4 (Blackwell); FP8 runs natively
where the target has FP8 tensor cores and weight-only (Marlin) where it has weight-only
kernels; AWQ/GPTQ need sm 7.5+ on CUDA (their kernels' minimum capability) and run on ROCm.
"""

from __future__ import annotations

import re

# suffix (lower case) -> (format, the smallest CUDA compute capability of its kernels, trade-off);
# FP8 and NVFP4 go by the GPU catalog's fp8 / fp4 of the target instead.
_FORMATS = {
    "fp8": ("FP8", (8, 0), "FP8 weights: half the bytes of 16-bit; small accuracy cost (check your evals)"),
    "awq": ("AWQ", (7, 5), "AWQ 4-bit weights: a quarter of the bytes; measurable accuracy cost on hard tasks"),
    "gptq-int4": ("GPTQ", (7, 5), "GPTQ 4-bit weights: a quarter of the bytes; measurable accuracy cost on hard tasks"),
    "gptq-int8": ("GPTQ", (7, 5), "GPTQ 8-bit weights: half the bytes; small accuracy cost"),
    "nvfp4": ("NVFP4", (10, 0), "NVFP4 weights: about a quarter of the bytes; Blackwell FP4 tensor cores"),
}


def _tail(model_id: str) -> str:
    return model_id.rsplit("/", 1)[-1].lower()


def _runs(fmt: str, need: tuple[int, int], gpu) -> bool:
    if gpu is None:
        return True
    if fmt == "NVFP4":
        return gpu.native_fp4
    if fmt == "FP8":
        return gpu.fp8 != "none"
    if gpu.platform == "cuda":
        return gpu.cc_major_minor >= need
    return gpu.platform == "rocm"


def siblings(model_id: str, gpu, ids: list[str]) -> list[tuple[str, str, str]]:
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
        if not _runs(fmt, need, gpu):
            continue
        if fmt == "FP8" and gpu is not None and gpu.fp8 == "weight-only":
            trade += "; this GPU has no FP8 tensor cores, so vLLM runs them weight-only (Marlin)"
        out.append((cid, fmt, trade))
    return out
