"""The launches ``oomguard fit`` considers: the goal and the candidate axes.

A search has two kinds of axes:

- **structural** ones (tensor/pipeline split, KV cache dtype, eager vs CUDA
  graphs): each combination is a ``Base`` whose expensive parts (weights per
  rank, KV layout, bytes per block) come from one ``plan_launch`` call;
- **cheap** ones (``max_num_batched_tokens`` T, ``max_num_seqs`` S,
  ``gpu_memory_utilization``, ``kv_cache_memory_bytes``, ``max_model_len`` L):
  varied with arithmetic by ``oomguard.fit.search``.

Values a ``--from`` launch already uses are always on the axes, so "change
nothing" is a candidate and the smallest edit can be measured against it.
"""

from __future__ import annotations

import enum
import math

from oomguard.records import NamedTuple
from oomguard.units import GiB, MiB

# vLLM's chunked-prefill token budgets worth trying (S2's table spans 256-4096; 16384 is the H100/B200 default).
TOKEN_BUDGETS = (256, 512, 1024, 2048, 4096, 8192, 16384)
NUM_SEQS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# A safe band: below 0.80 wastes the card, above 0.95 leaves too little for the CUDA context and spikes.
UTILIZATIONS = (0.80, 0.82, 0.85, 0.88, 0.90, 0.92, 0.94, 0.95)
KV_MEMORY_STEP_BYTES = 256 * MiB  # --kv-cache-memory-bytes candidates are rounded up to this
DEFAULT_MARGIN_BYTES = 1 * GiB  # card memory left free at the prefill peak for unprofiled transients
# The floor under any margin: CUDA context growth, NCCL and allocator fragmentation need about 2 %
# of the card and never less than 0.5 GiB (check's OG306 uses the same floor).
HEADROOM_FLOOR_BYTES = 512 * MiB
HEADROOM_FLOOR_SHARE = 0.02
FP8_KV = "fp8"
# Tensor/pipeline splits searched at most (each costs a plan per structure); a 65,536-GPU MLA
# search has ~20 valid splits, real searches 1-6.
MAX_SPLITS = 12


class Objective(str, enum.Enum):
    MAX_CONTEXT = "max-context"
    MAX_CONCURRENCY = "max-concurrency"
    THROUGHPUT = "throughput"
    LATENCY = "latency"


class KVMemoryMode(str, enum.Enum):
    """How the KV pool is sized: profiled from --gpu-memory-utilization, or pinned with --kv-cache-memory-bytes."""

    PROFILED = "profiled"
    PINNED_TO_NEED = "pinned-to-need"  # --kv-cache-memory-bytes = what the goal needs, rounded up
    PINNED_AS_LAUNCHED = "pinned-as-launched"  # the --from launch's own value


class Goal(NamedTuple):
    """What the launch must do (constraints) and what to maximise (objective)."""

    context: int | None = None  # max-model-len the launch must serve; None = keep the launch's / the model's
    max_context: bool = False  # search for the largest max-model-len instead of a fixed one
    concurrency: int | None = None  # requests that must fit together
    avg_input_len: int | None = None  # their average length (default: the full context)
    objective: Objective = Objective.THROUGHPUT
    explicit_objective: bool = False  # with --from: rank by the objective before the size of the edit
    margin_bytes: int = DEFAULT_MARGIN_BYTES
    peak_limit_bytes: int | None = None  # optional cap on the per-GPU footprint (nvidia-smi)
    host_ram_bytes: int | None = None  # host RAM available to the server (sizes the CPU KV tier)

    def input_len(self, max_model_len: int) -> int:
        return min(self.avg_input_len or max_model_len, max_model_len)


class Structure(NamedTuple):
    """One structural combination; becomes a search ``Base``."""

    tensor_parallel_size: int
    pipeline_parallel_size: int
    kv_cache_dtype: str
    enforce_eager: bool
    enable_chunked_prefill: bool | None = None  # None: as the launch has it; True: turn it on

    def flags(self) -> dict:
        f = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "kv_cache_dtype": self.kv_cache_dtype,
            "enforce_eager": self.enforce_eager,
        }
        if self.enable_chunked_prefill is not None:
            f["enable_chunked_prefill"] = self.enable_chunked_prefill
        return f


class Space(NamedTuple):
    structures: tuple[Structure, ...]
    token_budgets: tuple[int, ...]
    num_seqs: tuple[int, ...]
    utilizations: tuple[float, ...]
    kv_memory_modes: tuple[KVMemoryMode, ...]
    launched_kv_memory_bytes: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def size_hint(self) -> int:
        return len(self.structures) * len(self.token_budgets) * len(self.num_seqs) * len(self.utilizations) * len(self.kv_memory_modes)


def _valid_tp(model, tp: int) -> bool:
    if model.family == "mla":
        return True
    if model.num_attention_heads % tp:
        return False
    return not (tp > model.num_kv_heads and tp % model.num_kv_heads)


def _tp_candidates(model, most: int) -> list[int]:
    """The tensor-parallel sizes vLLM accepts for this model, up to ``most``: divisors of the
    attention heads (MLA: any size). A short list: the search never counts up to ``most``."""
    if model.family == "mla":
        return list(range(1, most + 1))
    heads = model.num_attention_heads
    divisors = {d for i in range(1, math.isqrt(heads) + 1) if heads % i == 0 for d in (i, heads // i)}
    return sorted(tp for tp in divisors if tp <= most and _valid_tp(model, tp))


def parallel_splits(model, num_gpus: int, launched: tuple[int, int] | None = None, max_tp: int | None = None) -> list[tuple[int, int]]:
    """(TP, PP) pairs that divide the model and use all ``num_gpus``; smaller worlds only if none does.

    vLLM needs the attention heads divisible by TP (and TP a multiple of the KV
    heads when it exceeds them) and at least one layer per pipeline stage. The
    largest usable world is found from the valid TP sizes directly (each reaches
    TP x min(layers, num_gpus // TP)), so the work is bounded by the number of
    TP sizes, not by ``num_gpus``.
    """
    # several nodes (fit/hardware.py): tensor parallelism stays inside one, pipeline stages cross them
    tps = _tp_candidates(model, num_gpus if max_tp is None else min(num_gpus, max_tp))
    best = max((tp * min(model.num_layers, num_gpus // tp) for tp in tps), default=0)
    out = [(tp, best // tp) for tp in tps if best % tp == 0 and 1 <= best // tp <= model.num_layers]
    if launched and launched not in out and launched[0] * launched[1] <= num_gpus:
        out.append(launched)
    # Prefer TP within a node before PP: fewer bubbles, lower latency.
    out.sort(key=lambda x: (x[1], -x[0]))
    return out


def kv_dtypes(model, gpu, launched: str | None = None) -> list[str]:
    """``auto`` plus fp8 where vLLM can store the cache in fp8 on this GPU.

    Where the GPU catalog says the target stores an fp8 KV cache (``fp8_kv``: CUDA sm80+, where
    Ampere converts to 16-bit for the attention math and sm89+ has FP8 tensor cores; every ROCm
    target). MLA's fp8 cache needs FP8 hardware. Other cards are left at ``auto``.
    """
    out = ["auto"]
    fp8_ok = gpu.fp8_kv
    if model.family == "mla":
        fp8_ok = gpu.supports_fp8
    if fp8_ok:
        out.append(FP8_KV)
    if launched and launched not in out:
        if launched.startswith("fp8") and FP8_KV in out:
            out[out.index(FP8_KV)] = launched  # keep the launch's spelling (fp8_e4m3, fp8_e5m2)
        else:
            out.append(launched)
    return out


def _merge(ladder: tuple, extra) -> tuple:
    vals = set(ladder)
    for x in extra:
        if x is not None:
            vals.add(x)
    return tuple(sorted(vals))


def build_space(
    model,
    gpu,
    num_gpus: int,
    *,
    launched_flags: dict | None = None,
    launched_settings=None,
    goal: Goal,
    version: tuple[int, int, int],
    max_tp: int | None = None,
) -> Space:
    """The axes for ``model`` on ``num_gpus`` × ``gpu``, including a launch's own values."""
    lf = launched_flags or {}
    ls = launched_settings
    notes: list[str] = []
    launched_split = (ls.tensor_parallel_size, ls.pipeline_parallel_size) if ls is not None else None
    splits = parallel_splits(model, num_gpus, launched_split, max_tp)
    if len(splits) > MAX_SPLITS:
        # Sized before it is walked: each split is a plan per KV dtype x eager x chunking. The
        # preferred ones (least pipeline, then most TP) and the launch's own are kept.
        kept = splits[:MAX_SPLITS]
        if launched_split in splits and launched_split not in kept:
            kept[-1] = launched_split
        notes.append(f"{len(splits)} tensor/pipeline splits use {num_gpus} GPUs; searched the {len(kept)} with the "
                     f"fewest pipeline stages ({', '.join(f'TP {t} PP {p}' for t, p in kept)})")
        splits = kept
    kv = kv_dtypes(model, gpu, lf.get("kv_cache_dtype"))
    eager_opts = (False, True)
    # A launch without chunked prefill must fit its whole max-model-len in one step; turning it on is an edit.
    chunk_opts: tuple = (None,)
    if ls is not None and not ls.enable_chunked_prefill:
        chunk_opts = (None, True)
    structures = tuple(Structure(tp, pp, d, e, c) for tp, pp in splits for d in kv for e in eager_opts for c in chunk_opts)
    budgets = _merge(TOKEN_BUDGETS, [ls.max_num_batched_tokens if ls is not None else None])
    seqs = _merge(NUM_SEQS, [goal.concurrency, ls.max_num_seqs if ls is not None else None])
    utils = _merge(UTILIZATIONS, [ls.gpu_memory_utilization if ls is not None else None])
    modes = [KVMemoryMode.PROFILED]
    if version >= (0, 10, 2):
        modes.append(KVMemoryMode.PINNED_TO_NEED)
    else:
        notes.append("--kv-cache-memory-bytes does not exist before vLLM 0.10.2: not searched")
    launched_kv = lf.get("kv_cache_memory_bytes")
    if launched_kv is not None:
        modes.append(KVMemoryMode.PINNED_AS_LAUNCHED)
    if ls is not None and not ls.enable_chunked_prefill:
        notes.append("chunked prefill is off in this launch: the token budget must cover max-model-len unless the edit turns it on")
    return Space(structures, budgets, seqs, utils, tuple(modes), int(launched_kv) if launched_kv is not None else None, tuple(notes))
