"""Host RAM a vLLM launch needs: pure arithmetic on flags and plain numbers, no I/O.

Every component is a range (low, expected, high) with its formula and source,
because several of them are measured behaviour rather than code facts:

- **weights while loading**: safetensors are mmapped, so the checkpoint goes
  through the page cache (file-backed, reclaimable, shared by the TP workers)
  rather than anonymous memory. ``--load-format pt`` (and ``.bin``
  checkpoints) ``torch.load`` each shard into anonymous memory in every worker.
- **CPU weight offload** (``--cpu-offload-gb``, GiB per GPU): pinned. Measured
  at ~1.9x the requested size in host RSS (vllm-project/vllm#56410: PyTorch's
  pinned host allocator rounds each allocation up to a power of two).
- **KV offloading** (``--kv-offloading-size`` GiB, or the OffloadingConnector's
  ``cpu_bytes_to_use``): the TOTAL over the TP×PP workers of one engine
  (vllm-memory.md §3.1). Each worker pins its share in one allocation that the
  same allocator rounds up to the next power of two: TP2 with 80 GiB measured
  ~64 GiB per worker instead of 40 (vllm-project/vllm#48436); allocations made
  with cudaHostRegister track the request (#50094). Low = requested,
  expected = high = rounded.
- **LMCache** local CPU cache: ``LMCACHE_MAX_LOCAL_CPU_SIZE`` GB per worker
  (default 5).
- **swap space** (``--swap-space`` GiB per GPU): pinned CPU blocks of the V0
  engine; removed in 0.18. V1 engines do not allocate it, so low = 0 unless the
  version is known to be V0-era.
- **token-id buffers**: ``[max_num_seqs, max_model_len]`` int32 per worker
  (vllm-memory.md §5: ``RequestState.all_token_ids`` is host memory).
- **worker processes**: ~3 GiB RSS each besides their buffers (torch/CUDA
  runtime, pinned staging buffers): #48436 measured per-worker RSS as buffer + ~3 GB.
- **API server + tokenizer**: 2-4 GiB, an estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any
from collections.abc import Mapping

from oomguard.units import GiB

__all__ = [
    "MemoryKind",
    "RamComponent",
    "HostRamNeed",
    "host_ram_needed",
    "world_size_of",
    "kv_offload_bytes",
    "next_power_of_two",
    "largest_kv_offload_that_fits",
    "largest_cpu_offload_gb_that_fits",
    "CPU_OFFLOAD_OVERHEAD",
]

# Measured host RSS per requested byte of --cpu-offload-gb (vllm#56410).
CPU_OFFLOAD_OVERHEAD = 1.9
API_SERVER_BYTES = (2 * GiB, 3 * GiB, 4 * GiB)
WORKER_BASELINE_BYTES = (2 * GiB, 3 * GiB, 4 * GiB)
# save_pretrained's default max_shard_size is 5 GB; older checkpoints used 10 GB.
DEFAULT_SHARD_BYTES = (2 * GiB, 5 * GiB, 10 * GiB)
LMCACHE_DEFAULT_GB = 5.0
V0_DEFAULT_SWAP_GIB = 4


class MemoryKind(str, Enum):
    PINNED = "pinned"  # page-locked: never swapped or reclaimed
    ANONYMOUS = "anonymous"  # process memory: swappable, not reclaimable
    PAGE_CACHE = "page_cache"  # file-backed: reclaimable, charged to the cgroup


@dataclass(frozen=True)
class RamComponent:
    name: str
    kind: MemoryKind
    low_bytes: int
    expected_bytes: int
    high_bytes: int
    formula: str
    source: str

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "low_bytes": self.low_bytes,
            "expected_bytes": self.expected_bytes,
            "high_bytes": self.high_bytes,
            "formula": self.formula,
            "source": self.source,
        }


@dataclass(frozen=True)
class HostRamNeed:
    components: tuple[RamComponent, ...]
    world_size: int
    notes: tuple[str, ...] = ()

    def _sum(self, attr: str, resident: bool = True) -> int:
        return sum(
            getattr(c, attr)
            for c in self.components
            if (c.kind is not MemoryKind.PAGE_CACHE) == resident
        )

    @property
    def low_bytes(self) -> int:
        """Resident (non-reclaimable) memory, low end."""
        return self._sum("low_bytes")

    @property
    def expected_bytes(self) -> int:
        return self._sum("expected_bytes")

    @property
    def high_bytes(self) -> int:
        return self._sum("high_bytes")

    @property
    def page_cache_bytes(self) -> int:
        return self._sum("expected_bytes", resident=False)

    def component(self, name: str) -> RamComponent | None:
        return next((c for c in self.components if c.name == name), None)

    def to_dict(self) -> dict:
        return {
            "world_size": self.world_size,
            "resident_low_bytes": self.low_bytes,
            "resident_expected_bytes": self.expected_bytes,
            "resident_high_bytes": self.high_bytes,
            "page_cache_bytes": self.page_cache_bytes,
            "components": [c.to_dict() for c in self.components],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------
# helpers


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any, default: int) -> int:
    number = _num(value)
    return default if number is None else int(number)


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = []
    for piece in str(text).lstrip("v").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
        if not piece.isdigit():
            break
    return tuple(parts) or None


def next_power_of_two(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def world_size_of(flags: Mapping[str, Any]) -> tuple[int, int, int]:
    """(tp, pp, dp) of a launch's flags, 1 where absent."""
    return (
        max(1, _int(flags.get("tensor_parallel_size"), 1)),
        max(1, _int(flags.get("pipeline_parallel_size"), 1)),
        max(1, _int(flags.get("data_parallel_size"), 1)),
    )


def kv_offload_bytes(flags: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """The CPU KV offload size of one engine in bytes (total over its workers), and where it came from.

    (None, reason) when the launch offloads KV but the size is not in bytes we can read.
    """
    size = _num(flags.get("kv_offloading_size"))
    backend = str(flags.get("kv_offloading_backend") or "native").lower()
    if size is not None and backend != "lmcache":
        return int(size * GiB), f"--kv-offloading-size {size:g} (GiB, total over the workers)"
    ktc = flags.get("kv_transfer_config")
    if isinstance(ktc, Mapping):
        connector = str(ktc.get("kv_connector") or "")
        extra = ktc.get("kv_connector_extra_config") or {}
        if "Offloading" in connector or "CPUOffload" in connector:
            cpu_bytes = _num(extra.get("cpu_bytes_to_use")) if isinstance(extra, Mapping) else None
            if cpu_bytes is not None:
                return int(cpu_bytes), f"{connector} cpu_bytes_to_use={int(cpu_bytes)} (total over the workers)"
            return None, f"{connector} without cpu_bytes_to_use (num_cpu_blocks needs the KV block size)"
    return None, None


# ---------------------------------------------------------------------------


def host_ram_needed(
    flags: Mapping[str, Any],
    *,
    weights_bytes: int | None,
    world_size: int | None = None,
    env: Mapping[str, str] | None = None,
    vllm_version: str | None = None,
    shard_bytes: int | None = None,
    checkpoint_format: str | None = None,
) -> HostRamNeed:
    """Host RAM of one launch.

    ``weights_bytes``: the checkpoint's bytes (whole model, not per GPU), None
    when unknown. ``world_size``: GPUs used (default TP×PP×DP from the flags).
    ``shard_bytes``: the largest checkpoint file, for ``pt`` loading.
    ``checkpoint_format``: "safetensors" or "pt" when known from the files.
    """
    env = env or {}
    tp, pp, dp = world_size_of(flags)
    engine_workers = tp * pp
    world = world_size or engine_workers * dp
    version = _version(vllm_version or flags.get("vllm_version"))
    comps: list[RamComponent] = []
    notes: list[str] = []

    def add(name: str, kind: MemoryKind, low: float, exp: float, high: float, formula: str, source: str) -> None:
        comps.append(RamComponent(name, kind, int(low), int(exp), int(high), formula, source))

    # Weights while loading.
    load_format = str(flags.get("load_format") or "auto").lower()
    if load_format == "dummy":
        notes.append("--load-format dummy: no weights are read")
    elif weights_bytes is None:
        notes.append("checkpoint size unknown: weights page cache not counted")
    else:
        add(
            "weights (page cache)",
            MemoryKind.PAGE_CACHE,
            weights_bytes,
            weights_bytes,
            weights_bytes,
            f"checkpoint bytes = {_gib(weights_bytes)}, mmapped once and shared by the {world} workers",
            "safetensors are mmapped; pages are file-backed and reclaimable but charged to the cgroup",
        )
    if load_format in ("pt", "npcache") or (load_format == "auto" and checkpoint_format == "pt"):
        low, exp, high = (shard_bytes,) * 3 if shard_bytes else DEFAULT_SHARD_BYTES
        add(
            "weights (torch.load shard)",
            MemoryKind.ANONYMOUS,
            low * world,
            exp * world,
            high * world,
            f"largest shard {_gib(exp)} x {world} workers",
            "pt checkpoints are read whole into each worker's memory, one shard at a time",
        )

    # CPU weight offload: GiB per GPU.
    offload_gb = _num(flags.get("cpu_offload_gb")) or 0.0
    if offload_gb > 0:
        base = offload_gb * GiB * world
        add(
            "cpu offload (--cpu-offload-gb)",
            MemoryKind.PINNED,
            base,
            base * CPU_OFFLOAD_OVERHEAD,
            base * 2,
            f"{offload_gb:g} GiB x {world} GPUs x {CPU_OFFLOAD_OVERHEAD} measured overhead",
            "pinned host memory (UVA); ~1.9x measured in vllm#56410 (pinned allocations round up to powers of two)",
        )

    # KV offloading: a total over one engine's workers; each worker's share is rounded.
    kv_total, kv_source = kv_offload_bytes(flags)
    if kv_total is not None and kv_total > 0:
        per_worker = kv_total // engine_workers
        rounded = next_power_of_two(per_worker)
        add(
            "kv offload (CPU tier)",
            MemoryKind.PINNED,
            kv_total * dp,
            rounded * engine_workers * dp,
            rounded * engine_workers * dp,
            f"{_gib(kv_total)} / {engine_workers} workers = {_gib(per_worker)} each, "
            f"pinned as {_gib(rounded)} (next power of two) x {engine_workers}"
            + (f" x {dp} DP engines" if dp > 1 else ""),
            f"{kv_source}; power-of-two rounding measured in vllm#48436",
        )
    elif kv_source:
        notes.append(f"KV offloading size unknown: {kv_source}")

    ktc = flags.get("kv_transfer_config")
    connector = str(ktc.get("kv_connector") or "") if isinstance(ktc, Mapping) else ""
    if "LMCache" in connector or str(flags.get("kv_offloading_backend") or "").lower() == "lmcache":
        use_cpu = str(env.get("LMCACHE_LOCAL_CPU", "true")).lower() not in ("false", "0", "no")
        gb = _num(env.get("LMCACHE_MAX_LOCAL_CPU_SIZE")) or LMCACHE_DEFAULT_GB
        if use_cpu:
            size = gb * GiB * world
            add(
                "LMCache local CPU cache",
                MemoryKind.PINNED,
                size,
                size,
                size,
                f"LMCACHE_MAX_LOCAL_CPU_SIZE {gb:g} GB x {world} workers",
                "LMCache's local CPU backend, one per worker (default 5 GB)",
            )

    # Swap space (V0 CPU blocks), GiB per GPU, removed in 0.18.
    swap = _num(flags.get("swap_space"))
    if version is not None and version >= (0, 18):
        if swap:
            notes.append("--swap-space was removed in vLLM 0.18: not counted")
    else:
        v0_era = version is not None and version < (0, 8)
        gib_per_gpu = swap if swap is not None else (V0_DEFAULT_SWAP_GIB if v0_era else 0)
        if gib_per_gpu:
            size = gib_per_gpu * GiB * world
            add(
                "swap space (--swap-space)",
                MemoryKind.PINNED,
                size if v0_era else 0,
                size,
                size,
                f"{gib_per_gpu:g} GiB x {world} GPUs",
                "pinned CPU KV blocks of the V0 engine (vLLM <= 0.17); V1 engines leave them unallocated",
            )

    # Token-id buffers: [S, L] int32 per worker.
    max_len = _num(flags.get("max_model_len"))
    if max_len and max_len > 0:
        seqs = _num(flags.get("max_num_seqs"))
        s_low, s_exp, s_high = (seqs, seqs, seqs) if seqs else (128, 256, 1024)
        per = 4 * max_len * world
        add(
            "token-id buffers",
            MemoryKind.ANONYMOUS,
            per * s_low,
            per * s_exp,
            per * s_high,
            f"4 B x max_num_seqs {int(s_exp)} x max_model_len {int(max_len)} x {world} workers",
            "[max_num_seqs, max_model_len] int32 host tensors per worker (vllm-memory.md §5)",
        )

    lo, ex, hi = WORKER_BASELINE_BYTES
    add(
        "worker processes",
        MemoryKind.ANONYMOUS,
        lo * world,
        ex * world,
        hi * world,
        f"~3 GiB x {world} workers (range 2-4)",
        "torch/CUDA runtime and pinned staging buffers; per-worker RSS less its buffers in vllm#48436 (estimate)",
    )
    lo, ex, hi = API_SERVER_BYTES
    servers = max(1, _int(flags.get("api_server_count"), 1))
    add(
        "API server + tokenizer",
        MemoryKind.ANONYMOUS,
        lo * servers,
        ex * servers,
        hi * servers,
        f"~3 GiB x {servers} API server(s) (range 2-4)",
        "estimate; grows with the tokenizer and with very long prompts",
    )
    return HostRamNeed(tuple(comps), world, tuple(notes))


def largest_kv_offload_that_fits(
    need: HostRamNeed, budget_bytes: int, engine_workers: int, dp: int = 1
) -> int | None:
    """The largest KV offload total (bytes, one engine) whose pinned size fits next to the rest.

    Returns a power of two per worker times the workers, so no rounding is
    wasted, or None when nothing fits.
    """
    kv = need.component("kv offload (CPU tier)")
    others = need.expected_bytes - (kv.expected_bytes if kv else 0)
    room = budget_bytes - others
    if room <= 0:
        return None
    per_worker = room // (engine_workers * dp)
    if per_worker < GiB:
        return None
    return (1 << int(math.log2(per_worker))) * engine_workers


def largest_cpu_offload_gb_that_fits(need: HostRamNeed, budget_bytes: int) -> int | None:
    """The largest whole --cpu-offload-gb (per GPU) whose measured host cost fits next to the rest."""
    comp = need.component("cpu offload (--cpu-offload-gb)")
    others = need.expected_bytes - (comp.expected_bytes if comp else 0)
    room = budget_bytes - others
    gb = int(room / (need.world_size * CPU_OFFLOAD_OVERHEAD * GiB)) if room > 0 else 0
    return gb if gb >= 1 else None
