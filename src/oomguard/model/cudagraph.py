"""CUDA-graph memory: what capture takes, and what the 0.20+ profiler charges to the budget.

docs/memory-model.md#cuda-graphs. The per-graph cost is FITTED (no code fixes it: it is the
graph pool's growth per captured size, measured by vLLM with cudaMemGetInfo). The structure is
vLLM's: graphs are captured for every size of ``capture_sizes`` (engine.py), and from 0.20 (0.18
with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1) the profile subtracts the estimate
``max over modes(first capture) + Σ_modes (n_mode − 1) × max(second capture, 1 MiB)``
(v1/worker/gpu_model_runner.py::profile_cudagraph_memory; MRV2: v1/worker/gpu/cudagraph_utils.py).
"""

from __future__ import annotations

from oomguard.model.description import ModelDescription
from oomguard.model.engine import EngineSettings
from oomguard.model.estimate import Term
from oomguard.units import MiB

# FITTED on the logged "Graph capturing finished in N secs, took X GiB" of the calibration
# records S015 3.45 GiB (0.10.2, MoE, TP 8), S017 0.66, S018 0.65, S019 0.73, S025 0.17, S026 0.30,
# S031 1.12, S036 0.72, S045 1.92, S052 0.59, S056 0.54, S058 0.41, S059 2.37 (tests/data/calibration).
GRAPH_POOL_BASE = 100 * MiB  # the first (largest) capture's pool beyond its per-graph share
PER_GRAPH_32_LAYERS = 11 * MiB  # per captured size for a 32-layer dense model, scaling with sqrt(layers/32)
PER_GRAPH_MOE_HYBRID = 1.6  # MoE / GDN hybrids: more pieces and kernel workspaces per graph
PER_GRAPH_FULL_AND_PIECEWISE = 1.2  # the FULL decode graphs on top of the piecewise ones
VLLM_PER_GRAPH_FLOOR = 1 << 20  # profile_cudagraph_memory: per_graph = max(second capture, 1 MiB)


def cudagraph_estimate(m: ModelDescription, e: EngineSettings) -> Term:
    if e.cudagraph_mode == "NONE" or e.num_capture_sizes == 0:
        return Term("CUDA graphs", 0, "--enforce-eager / cudagraph_mode NONE: no graphs",
                    "docs/memory-model.md#cuda-graphs; config/compilation.py::CUDAGraphMode")
    per = PER_GRAPH_32_LAYERS * (m.num_layers / 32) ** 0.5
    if m.moe is not None or m.is_hybrid:
        per *= PER_GRAPH_MOE_HYBRID
    if e.cudagraph_mode == "FULL_AND_PIECEWISE":
        per *= PER_GRAPH_FULL_AND_PIECEWISE
    per = max(per, VLLM_PER_GRAPH_FLOOR)
    n = e.num_capture_sizes
    val = GRAPH_POOL_BASE + n * per
    charged = "subtracted from the KV budget (profiler estimate)" if e.estimate_cudagraphs else "captured after the KV pool, outside the budget"
    if e.engine == "V0":
        what = "V0 decode-step graphs"
        src = ("docs/memory-model.md#cuda-graphs; worker/model_runner.py::GPUModelRunnerBase.capture_model (V0) "
               "(per-graph size fitted on logged 'Graph capturing finished ... took X GiB')")
    else:
        what = e.cudagraph_mode
        src = ("docs/memory-model.md#cuda-graphs; v1/worker/gpu_model_runner.py::profile_cudagraph_memory, capture_model "
               "(per-graph size fitted on logged 'Graph capturing finished ... took X GiB')")
    return Term(
        "CUDA graphs",
        int(val),
        f"{GRAPH_POOL_BASE // MiB} MiB + {n} capture sizes × {per / MiB:.1f} MiB (fitted; max size {e.max_cudagraph_capture_size}, "
        f"{what}); {charged}",
        src,
        exact=False,
        low=int(val * 0.4),
        high=int(val * 2.5),
    )
