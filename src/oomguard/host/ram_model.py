"""The host-RAM model of a vLLM launch: pure arithmetic on flags and plain numbers, no I/O.

One model, called by ``oomguard check`` (OG401), ``oomguard fit`` (the CPU KV
tier) and ``oomguard host`` (HOST010-013), so the three print the same
number for the same launch. Every part is a range (low, expected, high) with
its formula and its source; the code facts below were read in vLLM's sdists
(``vllm/v1/kv_offload/cpu/spec.py``, ``.../cpu/gpu_worker.py``,
``.../cpu/shared_offload_region.py``, ``model_executor/offloader/uva.py``)
of 0.10.2, 0.11.0, 0.12.0, 0.14.0, 0.17.0-0.20.0, 0.22.0, 0.24.0-0.28.0, 0.30.0, 0.32.0 and 0.33.0.

**CPU KV tier** (``--kv-offloading-size`` GiB or the OffloadingConnector's
``cpu_bytes_to_use``): the TOTAL over one engine's TP x PP workers; vLLM sizes
``num_blocks = cpu_bytes_to_use // (kv_bytes_per_block x world_size x
blocks_per_chunk, page-aligned)``.

- 0.11 - 0.26: each worker allocates its share as one ``torch.zeros(...,
  pin_memory=True)`` per KV-cache tensor (``worker/cpu_gpu.py`` <= 0.18: one per
  layer; 0.19 - 0.26: one per canonical tensor, FlashAttention's K and V apart). PyTorch's ``CachingHostAllocator`` rounds every pinned
  allocation up to a power of two (``c10::llvm::PowerOf2Ceil``; no threshold
  by default), so each worker pins ``n x 2^ceil(log2(share / n))``. With the
  tensor count known this is computed; without it the range is [1x, 2x)
  and the expected value is the top (measured 1.92x in vllm#53042 on a
  200 GiB TP4 pool: 24 tensors of 2.08 GiB rounded to 4 GiB).
- from 0.27.0 (vllm#50094, on CUDA): ONE file ``/dev/shm/vllm_offload_<engine>.mmap``
  of ``num_blocks x row`` bytes (at most ``cpu_bytes_to_use``, exact to one
  chunk), mapped by every worker and pinned in place with ``cudaHostRegister``:
  no rounding, counted once per engine, in ``Shmem``, charged to the cgroup,
  and it must fit the free space of ``/dev/shm`` (a container's ``--shm-size``,
  a Kubernetes ``emptyDir`` ``medium: Memory`` ``sizeLimit``). From 0.28 vLLM
  checks it first (``check_shm_free_space``: "Insufficient space in
  /dev/shm"); 0.27 does not, and the workers die on the first page past it.

**CPU weight offload** (``--cpu-offload-gb``, GiB per GPU): every offloaded
parameter is copied to the CPU and ``.pin_memory()``'d on its own, so each is
rounded to a power of two by the same allocator. The ratio depends on the
shapes: measured 1.87x (1.86x from the shapes alone) in vllm#56410; range
1.0-2.0.

**Swap space** (``--swap-space``, GiB per GPU, default 4, removed in 0.18):
pinned CPU blocks of the V0 engine only (< 0.8, or ``VLLM_USE_V1=0`` before
0.11). The V1 engine accepts the flag and allocates nothing.

**Processes**: ~3 GiB per worker (per-worker RSS less its buffer, measured in
vllm#48436: 35 GB for a 32 GB buffer) and ~3 GiB per API server (an
estimate), each with a 2-4 GiB range. Token-id buffers: ``[max_num_seqs,
max_model_len]`` int32 per worker (vllm-memory.md §5). The checkpoint passes
through the page cache (reclaimable, not in ``needed``); ``pt`` checkpoints are
read whole into each worker.
"""

from __future__ import annotations

import math
from enum import Enum
from collections.abc import Mapping

from oomguard.records import NamedTuple
from oomguard.units import GiB

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MemoryKind",
    "RamComponent",
    "HostRamNeed",
    "host_ram_model",
    "host_ram_summary",
    "kv_tier_layout",
    "kv_tier_layout_for",
    "world_size_of",
    "kv_offload_bytes",
    "next_power_of_two",
    "largest_kv_offload_that_fits",
    "largest_cpu_offload_gb_that_fits",
    "ram_status",
    "ram_within_policy",
    "with_kv_tier",
    "largest_tier_within_policy",
    "largest_cpu_offload_gb_within_policy",
    "TIGHT_SHARE",
    "FIX_SHARE",
    "CPU_OFFLOAD_OVERHEAD",
    "SHARED_REGION_FROM",
    "SHM_CHECK_FROM",
]

# Measured host RSS per requested byte of --cpu-offload-gb (vllm#56410: 1.87 measured).
CPU_OFFLOAD_OVERHEAD = 1.9
CPU_OFFLOAD_RANGE = (1.0, 2.0)
# Measured: per-worker RSS less its pinned buffer (vllm#48436: ~35 GB for 32 GB, ~43 GB for 40 GB).
WORKER_BASELINE_BYTES = (2 * GiB, 3 * GiB, 4 * GiB)
API_SERVER_BYTES = (2 * GiB, 3 * GiB, 4 * GiB)  # an estimate
# save_pretrained's default max_shard_size is 5 GB; older checkpoints used 10 GB.
DEFAULT_SHARD_BYTES = (2 * GiB, 5 * GiB, 10 * GiB)
LMCACHE_DEFAULT_GB = 5.0
# The vLLM server's oom_score_adj, one figure for host's advice (HOST040) and export's units
# (OOMScoreAdjust=): the kernel's OOM killer picks almost anything else first, yet the server stays
# killable when it exceeds its own cgroup limit (at -1000 a cgroup OOM finds nothing to kill).
OOM_SCORE_ADJ = -900
V0_DEFAULT_SWAP_GIB = 4
# The first releases with the /dev/shm shared region (vllm#50094) and with its free-space check.
SHARED_REGION_FROM = (0, 27, 0)
SHM_CHECK_FROM = (0, 28, 0)
OFFLOADING_CONNECTOR_FROM = (0, 11, 0)
CANONICAL_SPLIT_FROM = (0, 19, 0)
CPU_BYTES_FROM = (0, 14, 0)  # cpu_bytes_to_use (and a working --kv-offloading-size); 0.11-0.13: num_cpu_blocks
LMCACHE_MP_FROM = (0, 24, 0)  # --kv-offloading-backend lmcache -> LMCacheMPConnector (0.22.0 still V1)
SWAP_REMOVED_IN = (0, 18, 0)
V0_REMOVED_IN = (0, 11, 0)  # vllm/worker/cache_engine.py is in 0.10.2, gone in 0.11.0
V1_DEFAULT_FROM = (0, 8, 0)

# One host-RAM answer (check OG401, fit's CPU tier, host HOST010/HOST011 read these, nothing else):
# a launch whose expected need is above TIGHT_SHARE of the host RAM, or whose high estimate is above
# all of it, is tight; above all of it at the expected value it does not fit. Every size a command
# proposes keeps the expected need within FIX_SHARE and the high estimate within the RAM, so the fix
# for one finding never raises the next (a proposed size is "fits", not "tight").
TIGHT_SHARE = 0.9
FIX_SHARE = 0.85

KV_TIER = "kv offload (CPU tier)"
CPU_OFFLOAD = "cpu offload (--cpu-offload-gb)"
SWAP = "swap space (--swap-space)"
LMCACHE = "LMCache local CPU cache"


class MemoryKind(str, Enum):
    PINNED = "pinned"  # page-locked: never swapped or reclaimed
    SHMEM = "shmem"  # a tmpfs file (/dev/shm), pinned in place: RAM, counted in Shmem and the cgroup
    ANONYMOUS = "anonymous"  # process memory: swappable, not reclaimable
    PAGE_CACHE = "page_cache"  # file-backed: reclaimable, charged to the cgroup


# Short keys of the parts in the ``host_ram`` JSON object, one per component name.
PART_KEYS = {
    "weights (page cache)": "weights_page_cache",
    "weights (torch.load shard)": "weights_torch_load",
    CPU_OFFLOAD: "cpu_offload",
    KV_TIER: "kv_cpu_tier",
    LMCACHE: "lmcache_cpu",
    SWAP: "swap_space",
    "token-id buffers": "token_id_buffers",
    "worker processes": "workers",
    "API server + tokenizer": "api_server",
}


class RamComponent(NamedTuple):
    name: str
    kind: MemoryKind
    low_bytes: int
    expected_bytes: int
    high_bytes: int
    formula: str
    source: str

    @property
    def key(self) -> str:
        return PART_KEYS.get(self.name, self.name)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "key": self.key,
            "kind": self.kind.value,
            "low_bytes": self.low_bytes,
            "expected_bytes": self.expected_bytes,
            "high_bytes": self.high_bytes,
            "formula": self.formula,
            "source": self.source,
        }


class HostRamNeed(NamedTuple):
    components: tuple[RamComponent, ...]
    world_size: int
    notes: tuple[str, ...] = ()
    shm_bytes: int = 0  # the /dev/shm file the CPU KV tier needs (0: none)
    shm_checked_by_vllm: bool = False  # vLLM refuses to start when /dev/shm is short (>= 0.28)
    kv_pinned_tensors: int | None = None  # pinned CPU-tier tensors per worker (< 0.27) when the layout is known

    def _sum(self, attr: str, resident: bool = True) -> int:
        return sum(getattr(c, attr) for c in self.components if (c.kind is not MemoryKind.PAGE_CACHE) == resident)

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
        return next((c for c in self.components if name in (c.name, c.key)), None)

    def summary(self) -> dict:
        return host_ram_summary(self)

    def to_dict(self) -> dict:
        return {
            "world_size": self.world_size,
            "resident_low_bytes": self.low_bytes,
            "resident_expected_bytes": self.expected_bytes,
            "resident_high_bytes": self.high_bytes,
            "page_cache_bytes": self.page_cache_bytes,
            "shm_bytes": self.shm_bytes,
            "components": [c.to_dict() for c in self.components],
            "notes": list(self.notes),
        }


def _r(n: float) -> float:
    return round(n / GiB, 2)


def host_ram_summary(need: HostRamNeed) -> dict:
    """The ``host_ram`` object of ``check --format json`` and ``host --format json``.

    Resident parts only (the page cache is reclaimable and depends on what is
    on this disk), in GiB rounded to 0.01, so the two commands agree.
    """
    parts = {c.key: _r(c.expected_bytes) for c in need.components if c.kind is not MemoryKind.PAGE_CACHE}
    return {
        "needed_gib": _r(need.expected_bytes),
        "range_gib": [_r(need.low_bytes), _r(need.high_bytes)],
        "parts": parts,
        "shm_gib": _r(need.shm_bytes),
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


def version_tuple(text: Any) -> tuple[int, ...] | None:
    """``(0, 27, 1)`` from "0.27.1" / "v0.27.1rc2" / a tuple; None when unknown."""
    if text is None or text == "":
        return None
    if isinstance(text, tuple):
        return tuple(int(x) for x in text) or None
    parts = []
    for piece in str(text).lstrip("v").split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if digits != piece:
            break
    return tuple(parts) or None


def next_power_of_two(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


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


class KvTierLayout(NamedTuple):
    """What the pinned-tensor path (< 0.27) needs to know about one worker's KV caches."""

    tensors_per_worker: int  # len(kv_cache_config.kv_cache_tensors): attention layers, or a hybrid group's size
    splits_k_and_v: bool = True  # FlashAttention's (2, num_blocks, ...) layout: K and V apart from 0.20


def kv_tier_layout(num_kv_tensors: int | None, *, mla: bool = False) -> KvTierLayout | None:
    """The layout from the memory model's KV tensor count (None when unknown). MLA caches have no K/V split."""
    if not num_kv_tensors or num_kv_tensors < 1:
        return None
    return KvTierLayout(int(num_kv_tensors), splits_k_and_v=not mla)


def _pinned_tensors(share: int, n: int) -> int:
    """Bytes one worker pins for ``share`` bytes split over ``n`` equal pinned tensors."""
    n = max(1, n)
    return n * next_power_of_two(max(1, share // n))


# ---------------------------------------------------------------------------


def _kv_tier(
    flags: Mapping[str, Any],
    version: tuple[int, ...] | None,
    engine_workers: int,
    dp: int,
    layout: KvTierLayout | None,
    add,
    notes: list[str],
) -> tuple[int, bool, int | None]:
    """Adds the CPU KV tier; returns (/dev/shm file bytes of all engines, whether vLLM checks it, pinned tensors per worker)."""
    total, source = kv_offload_bytes(flags)
    if total is None or total <= 0:
        if source:
            notes.append(f"KV offloading size unknown: {source}")
        return 0, False, None
    if version is not None and version < OFFLOADING_CONNECTOR_FROM:
        notes.append(f"the OffloadingConnector is not in vLLM {'.'.join(map(str, version))} (from 0.11): CPU tier not counted")
        return 0, False, None
    if version is not None and version < CPU_BYTES_FROM:
        # 0.11-0.13 size the CPU tier by num_cpu_blocks (per worker) only; 0.12-0.13 turn
        # --kv-offloading-size into num_cpu_blocks=0 (config/vllm.py), and kv_offload/cpu.py raises.
        notes.append(
            f"vLLM {'.'.join(map(str, version))} sizes the CPU tier by num_cpu_blocks only: with {source.split(' (')[0]} it stops at "
            "start-up ('num_cpu_blocks must be specified in kv_connector_extra_config'); CPU tier not counted"
        )
        return 0, False, None
    engines = f" x {dp} DP engines" if dp > 1 else ""
    if version is None or version >= SHARED_REGION_FROM:
        size = total * dp
        add(
            KV_TIER,
            MemoryKind.SHMEM,
            size,
            size,
            size,
            f"one /dev/shm/vllm_offload_<engine>.mmap of {_gib(total)} (num_blocks x row, at most cpu_bytes_to_use), "
            f"shared by the {engine_workers} workers and pinned in place{engines}",
            f"{source}; vllm/v1/kv_offload/cpu/shared_offload_region.py (from 0.27.0, vllm#50094): mmap + cudaHostRegister, no rounding",
        )
        return size, version is None or version >= SHM_CHECK_FROM, None
    share = total // engine_workers
    n_expected = None
    if layout is not None:
        counts = [layout.tensors_per_worker]
        if layout.splits_k_and_v:
            counts.append(2 * layout.tensors_per_worker)
        # <= 0.18 allocates one tensor per layer (K and V together, worker/cpu_gpu.py); from 0.19 the
        # canonical tensors split them (offloading/worker.py unbinds FlashAttention's (2, num_blocks, ...)).
        n_expected = counts[-1] if version >= CANONICAL_SPLIT_FROM else counts[0]
        pinned = [_pinned_tensors(share, n) for n in counts]
        exp = _pinned_tensors(share, n_expected)
        low, high = min(pinned), max(pinned)
        formula = (
            f"{_gib(total)} / {engine_workers} workers = {_gib(share)} each, as {n_expected} pinned tensors of "
            f"{_gib(share // n_expected)} rounded to {_gib(next_power_of_two(share // n_expected))}: "
            f"{_gib(exp)} per worker x {engine_workers}{engines}"
        )
        how = "per pinned tensor (its count from the model's KV cache tensors)"
    else:
        low, exp, high = share, 2 * share, 2 * share
        formula = (
            f"{_gib(total)} / {engine_workers} workers = {_gib(share)} each; each pinned tensor is rounded up to a power "
            f"of two (1x-2x; the tensor count needs the model config), counted at 2x x {engine_workers}{engines}"
        )
        how = "1.92x measured in vllm#53042 (200 GiB, TP4)"
        notes.append("CPU KV tier before vLLM 0.27: the pinned size depends on the KV tensor count; pass the model config to compute it")
    workers = engine_workers * dp
    add(
        KV_TIER,
        MemoryKind.PINNED,
        low * workers,
        exp * workers,
        high * workers,
        formula,
        f"{source}; torch.zeros(pin_memory=True) per KV tensor per worker (vLLM 0.11-0.26), PyTorch's CachingHostAllocator "
        f"rounds each to a power of two {how}; vllm#48436",
    )
    return 0, False, n_expected


def host_ram_model(
    flags: Mapping[str, Any],
    *,
    weights_bytes: int | None,
    version: Any = None,
    world_size: int | None = None,
    env: Mapping[str, str] | None = None,
    shard_bytes: int | None = None,
    checkpoint_format: str | None = None,
    kv_layout: KvTierLayout | None = None,
    engine: str | None = None,
) -> HostRamNeed:
    """Host RAM of one launch on vLLM ``version`` (None: the newest release's behaviour).

    ``engine``: "V0" / "V1" as the planner resolved it (check, fit); None derives it the planner's way
    (``model.engine.engine_for``) for a GPU V1 runs on (host, which has no plan).

    ``weights_bytes``: the checkpoint's bytes (whole model), None when unknown.
    ``world_size``: GPUs used (default TP x PP x DP from the flags).
    ``shard_bytes``: the largest checkpoint file, for ``pt`` loading.
    ``checkpoint_format``: "safetensors" or "pt" when known from the files.
    ``kv_layout``: the KV tensors of one worker, for the pinned CPU tier before 0.27.
    """
    env = env or {}
    tp, pp, dp = world_size_of(flags)
    engine_workers = tp * pp
    world = world_size or engine_workers * dp
    ver = version_tuple(version if version is not None else flags.get("vllm_version"))
    comps: list[RamComponent] = []
    notes: list[str] = []

    def add(name: str, kind: MemoryKind, low: float, exp: float, high: float, formula: str, source: str) -> None:
        comps.append(RamComponent(name, kind, int(low), int(exp), int(high), formula, source))

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

    offload_gb = _num(flags.get("cpu_offload_gb")) or 0.0
    if offload_gb > 0:
        base = offload_gb * GiB * world
        lo_f, hi_f = CPU_OFFLOAD_RANGE
        add(
            CPU_OFFLOAD,
            MemoryKind.PINNED,
            base * lo_f,
            base * CPU_OFFLOAD_OVERHEAD,
            base * hi_f,
            f"{offload_gb:g} GiB x {world} GPUs x {CPU_OFFLOAD_OVERHEAD} (measured; range {lo_f:g}-{hi_f:g})",
            "each offloaded parameter is pin_memory()'d alone and rounded to a power of two "
            "(model_executor/offloader/uva.py); 1.87x measured, 1.86x from the shapes, in vllm#56410",
        )

    shm, shm_checked, kv_tensors = _kv_tier(flags, ver, engine_workers, dp, kv_layout, add, notes)

    ktc = flags.get("kv_transfer_config")
    connector = str(ktc.get("kv_connector") or "") if isinstance(ktc, Mapping) else ""
    backend_lmcache = str(flags.get("kv_offloading_backend") or "").lower() == "lmcache"
    size_gib = _num(flags.get("kv_offloading_size"))
    if backend_lmcache and ver is not None and ver >= LMCACHE_MP_FROM and "LMCache" not in connector:
        # 0.24+: --kv-offloading-backend lmcache means LMCacheMPConnector; the store lives in the
        # separate LMCache server process, which --kv-offloading-size does not size (config/vllm.py).
        notes.append("--kv-offloading-backend lmcache (vLLM >= 0.24): the KV store is the LMCache server process's, sized by its own settings: not counted")
    elif backend_lmcache and size_gib and "LMCache" not in connector:
        # 0.12-0.23: lmcache.max_local_cpu_size = --kv-offloading-size / (TP x PP) GB in each worker.
        size = size_gib * GiB * dp
        add(
            LMCACHE,
            MemoryKind.PINNED,
            size,
            size,
            size,
            f"--kv-offloading-size {size_gib:g} GiB / {engine_workers} workers as lmcache.max_local_cpu_size per worker"
            + (f" x {dp} DP engines" if dp > 1 else ""),
            "config/vllm.py::_post_init_kv_transfer_config (0.12-0.23): LMCacheConnectorV1, local CPU backend per worker",
        )
    elif "LMCache" in connector or backend_lmcache:
        use_cpu = str(env.get("LMCACHE_LOCAL_CPU", "true")).lower() not in ("false", "0", "no")
        gb = _num(env.get("LMCACHE_MAX_LOCAL_CPU_SIZE")) or LMCACHE_DEFAULT_GB
        if "MP" in connector:
            notes.append(f"{connector}: the KV store is the LMCache server process's: not counted")
        elif use_cpu:
            size = gb * GiB * world
            add(
                LMCACHE,
                MemoryKind.PINNED,
                size,
                size,
                size,
                f"LMCACHE_MAX_LOCAL_CPU_SIZE {gb:g} GB x {world} workers",
                "LMCache's local CPU backend, one per worker (default 5 GB)",
            )

    swap = _num(flags.get("swap_space"))
    if ver is not None and ver >= SWAP_REMOVED_IN:
        if swap:
            notes.append("--swap-space was removed in vLLM 0.18: not counted")
    elif ver is not None and ver >= V0_REMOVED_IN:
        if swap:
            notes.append(f"--swap-space {swap:g}: vLLM {'.'.join(map(str, ver))} has only the V1 engine, which allocates no CPU swap")
    else:
        from oomguard.model.engine import engine_for

        gib_per_gpu = swap if swap is not None else V0_DEFAULT_SWAP_GIB
        size = gib_per_gpu * GiB * world
        if ver is not None:
            eng = engine or engine_for((tuple(ver) + (0, 0, 0))[:3], env)[0]
            if eng == "V0":
                add(
                    SWAP,
                    MemoryKind.PINNED,
                    size,
                    size,
                    2 * size,
                    f"{gib_per_gpu:g} GiB x {world} GPUs (the V0 engine allocates it; pinned per layer, so up to 2x after power-of-two rounding)",
                    "worker/cache_engine.py::_allocate_kv_cache: torch.zeros(pin_memory=True) per layer for the CPU swap blocks "
                    "(V0 engine, vLLM <= 0.10)",
                )
            elif swap:
                notes.append(f"--swap-space {swap:g}: the V1 engine (vLLM {'.'.join(map(str, ver))}'s, for this launch) allocates no CPU swap; "
                             "only V0 (VLLM_USE_V1=0, or a fallback) would pin it")
        elif swap is not None:
            add(
                SWAP,
                MemoryKind.PINNED,
                0,
                size,
                2 * size,
                f"{gib_per_gpu:g} GiB x {world} GPUs (release unknown: a launch passing --swap-space runs <= 0.17, V0 or V1)",
                "worker/cache_engine.py::_allocate_kv_cache (V0 engine, vLLM <= 0.10)",
            )

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
        "torch/CUDA runtime and staging buffers: per-worker RSS less its buffer, measured in vllm#48436",
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
        "an estimate; grows with the tokenizer and with very long prompts",
    )
    return HostRamNeed(tuple(comps), world, tuple(notes), shm, shm_checked, kv_tensors)


def largest_kv_offload_that_fits(need: HostRamNeed, budget_bytes: int, engine_workers: int, dp: int = 1) -> int | None:
    """The largest KV offload total (bytes, one engine) whose host cost fits next to the rest, or None.

    Shared-region path (one exact-size file): any whole GiB, as asked. Pinned
    path with the tensor count known: a power of two per tensor, so nothing is
    rounded; unknown: half the room per worker (each tensor may double).
    """
    kv = need.component(KV_TIER)
    others = need.expected_bytes - (kv.expected_bytes if kv else 0)
    room = budget_bytes - others
    if room <= 0:
        return None
    if kv is None or kv.kind is MemoryKind.SHMEM:
        total = (room // dp) // GiB * GiB
        return total if total >= GiB else None
    per_worker = room // (engine_workers * dp)
    n = need.kv_pinned_tensors
    if n:
        per_tensor = per_worker // n
        if per_tensor < 1:
            return None
        per_worker = n * (1 << int(math.log2(per_tensor)))
    else:
        per_worker = per_worker // 2 // GiB * GiB
    if per_worker < GiB:
        return None
    return per_worker * engine_workers


def ram_status(need: HostRamNeed, budget_bytes: int) -> str:
    """``fits`` / ``tight`` / ``exceeds``: the one verdict check, fit and host give on host RAM."""
    if need.expected_bytes > budget_bytes:
        return "exceeds"
    if need.expected_bytes > TIGHT_SHARE * budget_bytes or need.high_bytes > budget_bytes:
        return "tight"
    return "fits"


def with_kv_tier(flags: Mapping[str, Any], size_bytes: int) -> dict | None:
    """The launch's flags with its CPU KV tier resized, in the launch's own spelling
    (``--kv-offloading-size`` GiB, or ``cpu_bytes_to_use`` in the OffloadingConnector's config);
    None when the launch has no tier of either kind."""
    out = dict(flags)
    ktc = out.get("kv_transfer_config")
    if isinstance(ktc, Mapping) and isinstance(ktc.get("kv_connector_extra_config"), Mapping) \
            and ktc["kv_connector_extra_config"].get("cpu_bytes_to_use") is not None:
        extra = {**ktc["kv_connector_extra_config"], "cpu_bytes_to_use": int(size_bytes)}
        out["kv_transfer_config"] = {**ktc, "kv_connector_extra_config": extra}
        return out
    if out.get("kv_offloading_size") is not None:
        gib = size_bytes / GiB
        out["kv_offloading_size"] = int(gib) if gib == int(gib) else round(gib, 3)
        return out
    return None


def ram_within_policy(need: HostRamNeed) -> int:
    """The host RAM (or cgroup limit) on which ``need`` is ``fits``: what a raised limit must reach."""
    return int(max(need.expected_bytes / FIX_SHARE, need.high_bytes))


def largest_tier_within_policy(need: HostRamNeed, budget_bytes: int, engine_workers: int, dp: int = 1) -> int | None:
    """The largest CPU KV tier (total bytes, one engine) a command may propose on ``budget_bytes`` of
    host RAM: the expected need within ``FIX_SHARE`` of it and the high estimate within all of it."""
    kv = need.component(KV_TIER)
    size = largest_kv_offload_that_fits(need, int(FIX_SHARE * budget_bytes), engine_workers, dp)
    if size is None or kv is None:
        return size
    # the high estimate with the tier at ``size``: the rest's high plus the tier at its high/expected ratio
    ratio = kv.high_bytes / kv.expected_bytes if kv.expected_bytes else 1.0
    others_high = need.high_bytes - kv.high_bytes
    while size is not None and others_high + size * dp * ratio > budget_bytes:
        smaller = largest_kv_offload_that_fits(need, need.expected_bytes - kv.expected_bytes + size * dp - GiB, engine_workers, dp)
        size = smaller if smaller is not None and smaller < size else None
    return size


def largest_cpu_offload_gb_within_policy(need: HostRamNeed, budget_bytes: int) -> int | None:
    """The largest whole --cpu-offload-gb a command may propose (the same policy as the CPU tier)."""
    gb = largest_cpu_offload_gb_that_fits(need, int(FIX_SHARE * budget_bytes))
    comp = need.component(CPU_OFFLOAD)
    if gb is None or comp is None:
        return gb
    others_high = need.high_bytes - comp.high_bytes
    hi_per_gb = CPU_OFFLOAD_RANGE[1] * need.world_size * GiB
    while gb >= 1 and others_high + gb * hi_per_gb > budget_bytes:
        gb -= 1
    return gb if gb >= 1 else None


def largest_cpu_offload_gb_that_fits(need: HostRamNeed, budget_bytes: int) -> int | None:
    """The largest whole --cpu-offload-gb (per GPU) whose measured host cost fits next to the rest."""
    comp = need.component(CPU_OFFLOAD)
    others = need.expected_bytes - (comp.expected_bytes if comp else 0)
    room = budget_bytes - others
    gb = int(room / (need.world_size * CPU_OFFLOAD_OVERHEAD * GiB)) if room > 0 else 0
    return gb if gb >= 1 else None


def kv_tier_layout_for(model: Any, tensor_parallel_size: int = 1, pipeline_parallel_size: int = 1) -> KvTierLayout | None:
    """The KV tensors one worker allocates, from the memory model's KV specs (vLLM's kv_cache_tensors).

    A uniform model has one tensor per attention layer; a hybrid one shares a
    group's worth of tensors across its groups (vllm-memory.md §2.4). With
    pipeline parallelism each worker holds its stage's share of the layers.
    None when the model is unknown or has no KV layers.
    """
    if model is None:
        return None
    from oomguard.model.kv_spec import kv_layout, layer_kv_specs

    try:
        layout = kv_layout(layer_kv_specs(model, max(1, tensor_parallel_size)))
    except (ValueError, KeyError, AttributeError, ZeroDivisionError):
        return None
    if not layout.groups:
        return None
    n = layout.groups[0].group_size
    n = -(-n // max(1, pipeline_parallel_size))
    return kv_tier_layout(n, mla=getattr(model, "mla", None) is not None)
