"""Non-torch memory: NCCL, custom all-reduce buffers, cuBLAS workspaces, the CUDA context."""

from __future__ import annotations

from oomguard.model.description import ModelDescription
from oomguard.model.engine import EngineSettings
from oomguard.model.estimate import Term
from oomguard.units import GiB, MiB


def non_torch(m: ModelDescription, e: EngineSettings, *, nvlink: bool = True, custom_all_reduce: bool = True) -> Term:
    tp = e.tensor_parallel_size
    # vLLM enables custom all-reduce only when every GPU pair is NVLink-connected, or for
    # two PCIe GPUs (distributed/device_communicators/custom_all_reduce.py).
    custom_ar = custom_all_reduce and tp > 1 and (nvlink or tp <= 2)
    if tp == 1 and e.pipeline_parallel_size == 1:
        val, lo, hi = 0.2 * GiB, 0.0, 0.6 * GiB
        formula = "cuBLAS/attention workspaces after the start-up snapshot ≈ 0.2 GiB"
    else:
        val = 0.2 * GiB + (1.0 * GiB if custom_ar else 0.0)
        lo, hi = 0.1 * GiB, 2.0 * GiB
        formula = "NCCL buffers ≈ 0.2 GiB" + (" + custom all-reduce buffers ≈ 1 GiB (NVLink or TP≤2)" if custom_ar else " (custom all-reduce off: PCIe beyond 2 GPUs or disabled)")
    if e.engine == "V1" and e.version < (0, 10, 0):
        # 0.8.x counted everything on the device, CUDA context included.
        val += 0.5 * GiB
        hi += 0.5 * GiB
        formula += " + CUDA context 0.5 GiB (0.8.x counts it)"
    return Term("non-torch memory", int(val), formula, "vllm-memory.md §1.2/§1.7 (NCCL, cuBLAS, custom all-reduce)", exact=False, low=int(lo), high=int(hi))
