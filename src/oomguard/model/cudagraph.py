"""CUDA-graph memory: what capture takes, and what the 0.20+ profiler charges to the budget.

docs/memory-model.md#cuda-graphs. The shape of the term is vLLM's own estimate
(v1/worker/gpu_model_runner.py::profile_cudagraph_memory, 0.32; on by default from 0.20, from
0.18 with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1): for every runtime mode it captures the
two largest sizes and measures the device memory each took,

    estimate = max over modes (first capture) + Σ_modes (n_mode − 1) × max(second capture, 1 MiB)

(FULL and PIECEWISE graphs share one pool at runtime, so only the largest first capture counts).
Before 0.20 the graphs are captured after the KV pool, largest first, into the same shared pool,
so the logged "Graph capturing finished … took X GiB" has the same structure.

The two measured quantities are modelled, not measured:

- first capture: the pool the largest graph of the mode allocates: one forward pass at that
  many tokens (the activation phases of model/phases.py, attention outside the piecewise graphs)
  plus a FITTED base for the graph objects, cuBLAS workspaces and the capture's allocator rounding;
- each further size: the memory of its graphs (kernel nodes and their parameter buffers), which
  grows with the kernels per graph: FITTED per piece (PIECEWISE: one graph per segment between
  attention / mixer ops, i.e. mixer layers + 1) or per layer (FULL and V0: one graph over all
  layers), ×MoE/hybrid for their extra kernels, ×TP for the custom all-reduce's registered
  graph buffers.

Modes and their sizes come from the capture list (engine.py::capture_sizes): PIECEWISE graphs
for every size; FULL (FULL_AND_PIECEWISE's decode graphs, from 0.11) for the sizes up to
max_num_seqs × (1 + speculative tokens); V0 one full graph per size.
"""

from __future__ import annotations

from oomguard.model.description import LayerKind, ModelDescription
from oomguard.model.engine import EngineSettings, capture_sizes
from oomguard.model.estimate import Term
from oomguard.units import MiB

# FITTED on the logged "Graph capturing finished in N secs, took X GiB" of the calibration records
# whose capture was measured cleanly (tests/data/calibration/startup.jsonl): V1 PIECEWISE at
# 0.10: S100/S101 (Qwen2-7B, 0.50 GiB), S102/S103 (TP 2, 0.65), S105 (gpt-oss-120b MoE TP 4, 1.88),
# S015 (Qwen3-235B MoE TP 8, 3.45); 0.25: S018 (gemma-4-E4B, 0.65, the 0.20+ estimate line);
# V0: S030 (phi-4, 0.27), S058 (Phi-4-mini, 0.41). Left out: the 0.11 records, whose free-memory
# delta is distorted by memory freed during capture (several are negative: S024, S112, S114,
# S117, S119), and records without a config or GPU.
GRAPH_POOL_BASE = 100 * MiB  # the first capture beyond its forward activations
PER_PIECE = 0.40 * MiB  # one piecewise graph (one segment between mixer ops), per captured size
PER_LAYER_FULL = 0.05 * MiB  # a full graph per layer it spans (V1 FULL decode graphs)
PER_LAYER_V0 = 0.15 * MiB  # a V0 full graph per layer it spans
MOE_HYBRID = 2.0  # MoE / Mamba / GDN layers: routing, expert and scan kernels per graph (S105, S015)
TP_ALL_REDUCE = 0.3  # per graph at TP > 1: custom all-reduce registers each captured buffer (S102)
SPREAD_LOW, SPREAD_HIGH = 0.5, 2.0  # the fitted records scatter within this of the model
VLLM_PER_GRAPH_FLOOR = 1 << 20  # profile_cudagraph_memory: per_graph = max(second capture, 1 MiB)

# The fitted constants of this module and the records they came from (benchmarks/calibration.py
# re-fits them leaving one release family out). vLLM measures both quantities on the device
# (cudaMemGetInfo around a capture); nothing in its code states them, so they stay fitted.
_GRAPH_RECORDS = "S100 S101 S102 S103 S105 S015 S018 (V1); S030 S058 (V0)"
FITTED_CONSTANTS = {
    "GRAPH_POOL_BASE": _GRAPH_RECORDS,
    "PER_PIECE": "S100 S101 S102 S103 S105 S015 S018",
    "PER_LAYER_FULL": "S018",
    "PER_LAYER_V0": "S030 S058",
    "MOE_HYBRID": "S105 S015",
    "TP_ALL_REDUCE": "S102 S103",
}


def _mixer_layers(m: ModelDescription) -> int:
    """Ops the piecewise backend splits the graph at: attention, MLA, Mamba / GDN mixers."""
    return sum(1 for l in m.layers if l.kind is not LayerKind.NONE or l.kv_shared)


def graph_modes(m: ModelDescription, e: EngineSettings) -> list[tuple[str, list[int]]]:
    """(mode, capture sizes largest first) per runtime mode vLLM captures."""
    sizes = sorted(capture_sizes(e.max_cudagraph_capture_size, e.max_num_seqs, e.max_num_batched_tokens), reverse=True)
    sizes = sizes[: e.num_capture_sizes] if e.num_capture_sizes and len(sizes) > e.num_capture_sizes else sizes
    if len(sizes) < e.num_capture_sizes:  # an explicit list of more sizes than the pattern: keep the count
        sizes = sizes + [1] * (e.num_capture_sizes - len(sizes))
    if e.engine == "V0":
        return [("V0", sizes)]
    modes = []
    if e.cudagraph_mode in ("PIECEWISE", "FULL_AND_PIECEWISE"):
        modes.append(("PIECEWISE", sizes))
    if e.cudagraph_mode in ("FULL", "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"):
        q = 1 + e.num_speculative_tokens
        decode = [s for s in sizes if s <= e.max_num_seqs * q] or sizes[-1:]
        modes.append(("FULL", decode if e.cudagraph_mode != "FULL" else sizes))
    return modes


def _per_graph(m: ModelDescription, e: EngineSettings, mode: str) -> float:
    heavy = MOE_HYBRID if (m.moe is not None or m.is_hybrid) else 1.0
    tp = 1 + TP_ALL_REDUCE if e.tensor_parallel_size > 1 else 1.0
    if mode == "PIECEWISE":
        base = PER_PIECE * (_mixer_layers(m) + 1)
    elif mode == "V0":
        base = PER_LAYER_V0 * m.num_layers
    else:
        base = PER_LAYER_FULL * m.num_layers
    return max(base * heavy * tp, VLLM_PER_GRAPH_FLOOR)


def _first_capture(m: ModelDescription, e: EngineSettings, tokens: int) -> int:
    from oomguard.model import phases

    b = int(getattr(e, "act_dtype_bytes", 2))
    fwd, _, _ = phases.forward_peak_bytes(m, tokens, e.tensor_parallel_size, b, workspace_manager=False, version=e.version)
    return int(GRAPH_POOL_BASE + fwd)


def cudagraph_estimate(m: ModelDescription, e: EngineSettings) -> Term:
    if e.cudagraph_mode == "NONE" or e.num_capture_sizes == 0:
        return Term("CUDA graphs", 0, "--enforce-eager / cudagraph_mode NONE: no graphs",
                    "docs/memory-model.md#cuda-graphs; config/compilation.py::CUDAGraphMode")
    modes = graph_modes(m, e)
    firsts, rest, parts = {}, 0.0, []
    for mode, sizes in modes:
        first = _first_capture(m, e, sizes[0])
        per = _per_graph(m, e, mode)
        firsts[mode] = first
        rest += (len(sizes) - 1) * per
        parts.append(f"{mode} {len(sizes)} sizes (largest {sizes[0]}): first {first / MiB:.0f} MiB + "
                     f"{len(sizes) - 1} × {per / MiB:.1f} MiB")
    val = max(firsts.values()) + rest
    charged = "subtracted from the KV budget (profiler estimate)" if e.estimate_cudagraphs else "captured after the KV pool, outside the budget"
    if e.engine == "V0":
        what = "V0 decode-step graphs"
        src = ("docs/memory-model.md#cuda-graphs; worker/model_runner.py::GPUModelRunnerBase.capture_model (V0) "
               "(per-graph constants fitted on logged 'Graph capturing finished ... took X GiB', model/cudagraph.py)")
    else:
        what = e.cudagraph_mode
        src = ("docs/memory-model.md#cuda-graphs; v1/worker/gpu_model_runner.py::profile_cudagraph_memory, capture_model "
               "(per-graph constants fitted on logged 'Graph capturing finished ... took X GiB', model/cudagraph.py)")
    return Term(
        "CUDA graphs",
        int(val),
        "max over modes (first capture) + Σ (n − 1) × per graph: " + "; ".join(parts)
        + f" (first = forward at the largest size + {GRAPH_POOL_BASE // MiB} MiB; per graph FITTED per piece/layer; {what}); {charged}",
        src,
        exact=False,
        low=int(val * SPREAD_LOW),
        high=int(val * SPREAD_HIGH),
    )
