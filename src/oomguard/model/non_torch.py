"""Non-torch memory and the CUDA context, per release's profiling path and per topology.

What the KV budget pays for outside PyTorch's allocator depends on three things
(docs/memory-model.md#non-torch):

1. **Where the release takes its baseline** (``accounting``). Memory already in use at the
   baseline (the CUDA context, other processes, and from 0.12 the communicators built in
   ``init_device``) is never charged; it only lowers free memory at start-up.
2. **Which communicators exist**: NCCL for every group of more than one rank (TP, PP), custom
   all-reduce by vLLM's own rules (``custom_all_reduce_enabled``).
3. **Their buffer sizes**, from the communicator code where it fixes them, fitted where it
   does not (NCCL's channel count is chosen by NCCL at run time).
"""

from __future__ import annotations


from oomguard.model.description import ModelDescription
from oomguard.model.engine import EngineSettings
from oomguard.model.estimate import Term
from oomguard.records import NamedTuple
from oomguard.units import GiB, MiB

# Baseline before vLLM's snapshot: the CUDA context of one process (driver, runtime, kernels
# loaded at init). An estimate: 0.3-0.8 GiB by driver, CUDA version and card.
CUDA_CONTEXT_BYTES = 500 * MiB
CUDA_CONTEXT_RANGE = (300 * MiB, 800 * MiB)

# FITTED, not derived: growth after the baseline that no flag controls (lazily loaded kernel
# modules, cuBLAS/cuDNN handles, attention-backend setup): the median over the sources in
# tests/data/calibration that isolate it at TP 1 (a logged non-torch figure, or a pool whose other
# terms are all logged or derived): S100/S101 ≈ 0 (0.10.1, pool − weights − FlashInfer sampler),
# S058 0.01 (0.7.3), S136 0.03 (0.7.3), S031 0.09 (0.8.2), S134 0.10 (0.6.6), S110-S119 0.13-0.14
# (one source, 0.11.x), S030 0.26 (0.6.5), S045 0.28 (0.6.6); S015 0.21 (0.10.2, TP 8 PCIe) carries
# NCCL as well. Was 200 MiB (fitted on four of these): each V1 pool came out 0.1 GiB low.
LAZY_NON_TORCH = 100 * MiB
LAZY_NON_TORCH_RANGE = (0, 400 * MiB)

# NCCL buffers per connection, from NCCL's defaults (src/include/device.h, NCCL_BUFFSIZE):
# Simple 4 MiB, LL 8 lines x 512 threads x 8 steps x 16 B = 512 KiB, LL128 120 x 640 x 8 x 8 B
# (NVLink only). One ring connection per channel.
NCCL_SIMPLE = 4 * MiB
NCCL_LL = 512 * 1024
NCCL_LL128 = 120 * 640 * 8 * 8
NCCL_RING_CHANNELS_PCIE = 2
NCCL_RING_CHANNELS_NVLINK = 16
# FITTED: what NVSwitch systems add on top of the ring buffers (NVLS multicast buffers, extra
# channels), connected lazily on the first large all-reduce, i.e. inside the profile run.
# Record: S059 (0.11.0, H200 TP 2): logged pool 44.59 GiB leaves ≈ 1.4 GiB non-torch.
NCCL_NVSWITCH_LAZY = 1000 * MiB

# The fitted constants of this module and their records (benchmarks/calibration.py re-fits them).
FITTED_CONSTANTS = {
    "LAZY_NON_TORCH": "S100 S101 S058 S136 S031 S134 S110-S119 S030 S045",
    "NCCL_NVSWITCH_LAZY": "S059",
}

# distributed/device_communicators/custom_all_reduce.py::CustomAllreduce.__init__
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_AR_MAX_SIZE = 8192 * 1024  # max_size default
CUSTOM_AR_RANK_DATA = 8 * 1024 * 1024  # rank_data: IPC pointer tuples
CUSTOM_AR_RS_MAX_SIZE = 16 * 1024 * 1024  # _DEFAULT_REDUCE_SCATTER_MAX_SIZE @0.32
CUSTOM_AR_MNNVL_AG = {2: 8 * MiB, 4: 4 * MiB, 6: 2 * MiB, 8: 2 * MiB, 16: 2 * MiB}  # @0.32
# The layout read in the 0.32 wheel (legacy buffer = max(max_size, all-gather, reduce-scatter),
# MNNVL Lamport buffer); before it, meta + max_size and one max_size buffer.
CUSTOM_AR_LAYOUT_032 = (0, 32, 0)

# Release boundaries of the profiling path (see ``accounting``).
V0_USED_TOTAL = (0, 6, 4)  # 0.6.4: non_torch = (total − free) − torch_allocated
V0_MEMORY_PROFILING = (0, 6, 5)  # PR #10511: memory_profiling with a baseline
# 0.9.1: V1's init_device takes a MemorySnapshot (before the distributed init), checks the free memory
# against total × util, and determine_available_memory runs memory_profiling from that baseline;
# 0.9.0 still charges torch peak + (used_total − torch_allocated) to the budget (v1/worker/gpu_worker.py
# read in the 0.9.0, 0.9.1 and 0.10.0 wheels).
V1_MEMORY_PROFILING = (0, 9, 1)
STARTUP_FREE_CHECK = (0, 9, 1)  # "Free memory on device ... on startup is less than desired GPU memory utilization"
V1_SNAPSHOT_AFTER_DIST = (0, 12, 0)  # init_device builds NCCL before the snapshot (checked in 0.12+)
V1_CONSUMED = (0, 27, 0)  # C + X formulation (PR #49208)


def startup_free_check(e: EngineSettings) -> bool:
    """Whether vLLM refuses to start when the free memory at start is below total × util (V1 from 0.9.1;
    V0 kept at 0.10.2, where oomguard has applied it so far: V0's worker was not re-read)."""
    return e.version >= (STARTUP_FREE_CHECK if e.engine != "V0" else (0, 10, 2))


class Accounting(NamedTuple):
    """How one release's profiling path splits the device between baseline and budget."""

    path: str
    context_in_budget: bool  # CUDA context and other processes are charged to the budget
    comm_init_in_budget: bool  # communicator buffers built in init_device are charged
    source: str


def accounting(e: EngineSettings) -> Accounting:
    v = e.version
    if e.engine == "V0":
        if v < V0_USED_TOTAL:
            return Accounting("V0: peak = init_free − free after profile", False, True,
                              "worker/worker.py::Worker.determine_num_available_blocks @0.6.3 (init_gpu_memory read before init_worker_distributed_environment)")
        if v < V0_MEMORY_PROFILING:
            return Accounting("V0: non_torch = used_total − torch_allocated", True, True,
                              "worker/worker.py::Worker.determine_num_available_blocks @0.6.4 (total − free counts the context and other processes)")
        return Accounting("V0 memory_profiling (baseline at worker init)", False, True,
                          "utils.py::memory_profiling @0.6.6 (PR #10511), worker/worker.py::determine_num_available_blocks")
    if v < V1_MEMORY_PROFILING:
        return Accounting("V1: torch peak + (used_total − torch_allocated)", True, True,
                          "v1/worker/gpu_worker.py::Worker.determine_available_memory @0.8.5, 0.9.0")
    if v < V1_SNAPSHOT_AFTER_DIST:
        return Accounting("V1 memory_profiling, snapshot before NCCL init", False, True,
                          "v1/worker/gpu_worker.py::init_device @0.9.1-0.11 (init_snapshot before init_worker_distributed_environment)")
    path = "V1 C + X" if v >= V1_CONSUMED else "V1 memory_profiling"
    return Accounting(f"{path}, snapshot after NCCL init", False, False,
                      "v1/worker/gpu_worker.py::init_device (init_worker_distributed_environment, then MemorySnapshot)")


class Topology(NamedTuple):
    """What the custom all-reduce and NCCL rules read about the GPUs of one TP group."""

    nvlink: bool  # every pair of the group linked (NVSwitch, rack NVLink, AMD XGMI): vLLM's is_fully_connected
    p2p: bool  # cudaDeviceCanAccessPeer succeeds between them
    same_node: bool = True
    nvswitch: bool = False  # NVLS-capable fabric (NVSwitch boards of sm90+)
    custom_ar_platform: bool = True  # the platform allows custom all-reduce (ROCm: MI300 series and newer only)
    rocm: bool = False  # ROCm: no P2P test (XGMI peers always reach each other)

    @classmethod
    def of(cls, gpu, *, nnodes: int = 1, tp: int = 1, gpus_per_node: int | None = None) -> "Topology":
        """From the GPU catalog's row (interconnect, p2p, nvls, custom_all_reduce, platform)."""
        nvlink = bool(getattr(gpu, "nvlink", False))
        same = nnodes <= 1 or (gpus_per_node is not None and tp <= gpus_per_node)
        rocm = getattr(gpu, "platform", "cuda") == "rocm"
        return cls(nvlink=nvlink, p2p=nvlink or rocm or bool(getattr(gpu, "p2p", True)), same_node=same,
                   nvswitch=bool(getattr(gpu, "nvls", False)), custom_ar_platform=bool(getattr(gpu, "custom_all_reduce", True)),
                   rocm=rocm)


def custom_all_reduce_enabled(tp: int, topo: Topology, *, disabled_flag: bool) -> tuple[bool, str]:
    """vLLM's rules (config/parallel.py: the platform's use_custom_allreduce; custom_all_reduce.py::
    CustomAllreduce.__init__), in its order."""
    if disabled_flag:
        return False, "--disable-custom-all-reduce"
    if not topo.custom_ar_platform:
        return False, "not on this target (ROCm enables it on MI300-series and newer: platforms/rocm.py::use_custom_allreduce)"
    if tp == 1:
        return False, "TP 1"
    if tp not in CUSTOM_AR_WORLD_SIZES:
        return False, f"unsupported world size {tp}"
    if not topo.same_node:
        return False, "TP group spans nodes"
    if tp > 2 and not topo.nvlink:
        return False, "more than two PCIe-only GPUs"
    if not topo.p2p and not topo.rocm:
        return False, "no GPU P2P (GeForce cards)"
    return True, "on"


def custom_all_reduce_bytes(tp: int, e: EngineSettings, topo: Topology) -> int:
    """Device buffers one rank allocates for custom all-reduce (peer buffers are IPC-mapped, not copied)."""
    if e.version >= CUSTOM_AR_LAYOUT_032:
        meta = CUSTOM_AR_MAX_SIZE  # + ops.meta_size(), a few KiB
        legacy = max(CUSTOM_AR_MAX_SIZE, 2 * MiB, CUSTOM_AR_RS_MAX_SIZE)
        mnnvl = 6 * max(CUSTOM_AR_MNNVL_AG.get(tp, 2 * MiB) * tp, CUSTOM_AR_RS_MAX_SIZE) if topo.nvswitch else 0
        return meta + legacy + CUSTOM_AR_RANK_DATA + mnnvl
    return 2 * CUSTOM_AR_MAX_SIZE + CUSTOM_AR_RANK_DATA


def nccl_ring_bytes(topo: Topology) -> int:
    """Ring buffers of one communicator on one rank (connected at init by PyNccl's warm-up all-reduce)."""
    if topo.nvlink:
        return NCCL_RING_CHANNELS_NVLINK * (NCCL_SIMPLE + NCCL_LL + NCCL_LL128)
    return NCCL_RING_CHANNELS_PCIE * (NCCL_SIMPLE + NCCL_LL)


class NonTorch(NamedTuple):
    """Memory outside PyTorch's allocator on one GPU: the term charged to the KV budget and what else sits on the device."""
    term: Term  # charged to the KV budget
    baseline_bytes: int  # on the device at the snapshot: context, other processes, communicators built before it
    outside_bytes: int  # on the device but not in ``term`` (what the start-up and OOM checks add)
    accounting: Accounting


def non_torch(
    m: ModelDescription,
    e: EngineSettings,
    gpu=None,
    *,
    nvlink: bool | None = None,
    custom_all_reduce: bool = True,
    nnodes: int = 1,
    gpus_per_node: int | None = None,
    other_gpu_use_bytes: int = 0,
) -> NonTorch:
    tp, pp = e.tensor_parallel_size, e.pipeline_parallel_size
    acct = accounting(e)
    if gpu is not None:
        topo = Topology.of(gpu, nnodes=nnodes, tp=tp, gpus_per_node=gpus_per_node)
    else:
        topo = Topology(nvlink=bool(nvlink), p2p=True)
    if nvlink is not None and gpu is not None and nvlink != topo.nvlink:
        topo = Topology(nvlink=nvlink, p2p=topo.p2p or nvlink, same_node=topo.same_node, nvswitch=topo.nvswitch and nvlink,
                        custom_ar_platform=topo.custom_ar_platform, rocm=topo.rocm)

    init = lazy = 0.0  # comm bytes built in init_device / connected during the profile run
    parts: list[str] = [f"lazy modules and handles {LAZY_NON_TORCH // MiB} MiB (fitted)"]
    lo, hi = float(LAZY_NON_TORCH_RANGE[0]), float(LAZY_NON_TORCH_RANGE[1])
    if tp > 1:
        ring = nccl_ring_bytes(topo)
        init += ring
        parts.append(f"NCCL ring TP {ring / MiB:.0f} MiB ({NCCL_RING_CHANNELS_NVLINK if topo.nvlink else NCCL_RING_CHANNELS_PCIE} channels)")
        if topo.nvswitch:
            lazy += NCCL_NVSWITCH_LAZY
            hi += NCCL_NVSWITCH_LAZY
            parts.append(f"NCCL NVSwitch/NVLS {NCCL_NVSWITCH_LAZY // MiB} MiB (fitted, connected in the profile run)")
        on, why = custom_all_reduce_enabled(tp, topo, disabled_flag=not custom_all_reduce)
        if on:
            car = custom_all_reduce_bytes(tp, e, topo)
            init += car
            parts.append(f"custom all-reduce {car / MiB:.0f} MiB")
        else:
            parts.append(f"custom all-reduce off ({why})")
    if pp > 1:
        # send/recv between neighbouring stages: connected on the first transfer (profile run).
        p2p = 2 * 2 * (NCCL_SIMPLE + NCCL_LL)
        lazy += p2p
        parts.append(f"NCCL PP send/recv {p2p / MiB:.0f} MiB")
    charged = LAZY_NON_TORCH + lazy + (init if acct.comm_init_in_budget else 0)
    baseline = CUDA_CONTEXT_BYTES + other_gpu_use_bytes + (0 if acct.comm_init_in_budget else init)
    outside = CUDA_CONTEXT_BYTES + other_gpu_use_bytes + (0 if acct.comm_init_in_budget else init)
    if acct.context_in_budget:
        charged += CUDA_CONTEXT_BYTES + other_gpu_use_bytes
        lo += CUDA_CONTEXT_RANGE[0] + other_gpu_use_bytes
        hi += CUDA_CONTEXT_RANGE[1] + other_gpu_use_bytes
        outside -= CUDA_CONTEXT_BYTES + other_gpu_use_bytes
        parts.append(f"CUDA context {CUDA_CONTEXT_BYTES // MiB} MiB" + (f" + other processes {other_gpu_use_bytes / GiB:.2f} GiB" if other_gpu_use_bytes else "") + " (this release counts the whole device)")
    elif init and not acct.comm_init_in_budget:
        parts.append(f"communicators {init / MiB:.0f} MiB built before the snapshot: baseline, not charged")
    lo += (init if acct.comm_init_in_budget else 0) * 0.5
    hi += (init if acct.comm_init_in_budget else init * 0.5)  # lazy NCCL connections may land inside
    if tp > 1 and e.version >= CUSTOM_AR_LAYOUT_032:
        parts.append("FlashInfer/symmetric-memory all-reduce workspaces not modelled")
    formula = f"[{acct.path}] " + " + ".join(parts)
    term = Term("non-torch memory", int(charged), formula,
                "docs/memory-model.md#non-torch; " + acct.source + "; distributed/device_communicators/custom_all_reduce.py",
                exact=False, low=int(min(lo, charged)), high=int(max(hi, charged)))
    return NonTorch(term, int(baseline), int(outside), acct)
