"""The CUDA-graph memory estimate."""

from __future__ import annotations

from oomguard.model.description import ModelDescription
from oomguard.model.engine import EngineSettings
from oomguard.model.estimate import Term
from oomguard.units import MiB


def cudagraph_estimate(m: ModelDescription, e: EngineSettings) -> Term:
    if e.cudagraph_mode == "NONE" or e.num_capture_sizes == 0:
        return Term("CUDA graphs", 0, "--enforce-eager / cudagraph_mode NONE: no graphs", "config/vllm.py")
    per = 11 * MiB * (m.num_layers / 32) ** 0.5
    if m.moe is not None or m.is_hybrid:
        per *= 1.6
    if e.cudagraph_mode == "FULL_AND_PIECEWISE":
        per *= 1.2
    val = 100 * MiB + e.num_capture_sizes * per
    return Term(
        "CUDA graphs",
        int(val),
        f"100 MiB + {e.num_capture_sizes} capture sizes × {per / MiB:.1f} MiB (max size {e.max_cudagraph_capture_size}, {e.cudagraph_mode})",
        "vllm-memory.md §1.4; calibrated on logged 'Graph capturing finished ... took X GiB'",
        exact=False,
        low=int(val * 0.4),
        high=int(val * 2.5),
    )
