"""The accelerators vLLM runs on, in the words reports use for them: one table (issue 16).

For each backend: the words naming it (its chip, its software stack, vLLM's plugin for it), its device-memory
words, its graph-capture words and its collective-communication library. The cue table (``parsers/cues.py``)
builds from it the backend cues (``comp:<backend>``), the device-memory words (``words:gpu-mem``), the capture
words (``words:capture``), the collective words (``words:collective``) and the failed-collective cue
(``coll:failure``), so a backend added here is read everywhere at once. The error parsers keep their own exact
messages (``errors._GPU_OOM_MARKERS``: torch's and torch_npu's OOM wordings), which are vLLM's and torch's text,
not people's words.
"""

from __future__ import annotations

from oomguard.records import record


@record(frozen=True)
class Backend:
    name: str
    names: tuple[str, ...]  # regular expressions naming the backend (case as written)
    keywords: tuple[str, ...]  # literals: every match of ``names`` holds one (the prefilter's keywords)
    memory: tuple[str, ...] = ()  # its device memory, in words
    graphs: tuple[str, ...] = ()  # its graph capture (or the compile that plays that part), in words
    collective: tuple[str, ...] = ()  # its collective-communication library


BACKENDS: tuple[Backend, ...] = (
    Backend("cuda", (), (), memory=("VRAM", "GPU memory", "video memory", "GPU RAM", "显存"),
            graphs=("captur", "CUDA graph", "cuda graph", "cudagraph", "CUDAGraph", "cuda_graph", "图捕获"),
            # pynccl: vLLM's own NCCL wrapper (a hang "at a step in pynccl.py" is NCCL's)
            collective=("NCCL", "pynccl", "PyNccl")),
    Backend("rocm", (r"\bROCm\b", r"\bHIP\b", r"hipError", r"\bMI\d{3}X?\b", r"\bgfx9\d\w*", r"amdgpu", r"\brocm\b"),
            ("ROCm", "rocm", "HIP", "hipError", "MI2", "MI3", "gfx9", "amdgpu"),
            graphs=("HIP graph", "hipGraph"), collective=("RCCL",)),
    Backend("ascend", (r"vllm[_-]ascend", r"\b(?:NPU|npu)s?\b", r"\bAscend\b", r"\bascend\b", r"torch_npu", r"\bCANN\b",
                       r"\bHCCL\b", r"\b(?:910B|310P)\b"),
            ("ascend", "Ascend", "NPU", "npu", "CANN", "HCCL", "910B", "310P"),
            memory=("NPU memory", "npu memory"), graphs=("ACL graph", "aclgraph", "ACLGraph", "NPUGraph", "NPU graph",
                                                         "npu graph"),
            collective=("HCCL",)),
    # Intel Gaudi: its own vLLM plugin (vllm-gaudi, HabanaAI's fork); warm-up compiles HPU graphs per bucket
    # (lower-case "hpu" only after a space or "=": "throughput" holds it, and the keyword would select every
    # throughput line)
    Backend("gaudi", (r"\bGaudi\d?\b", r"\bgaudi\d?\b", r"\bHPUs?\b", r"(?<=[ =])hpu\b", r"[Hh]abana", r"vllm[_-]gaudi"),
            ("Gaudi", "gaudi", "HPU", " hpu", "=hpu", "habana", "Habana"),
            memory=("HPU memory", "hpu memory"), graphs=("HPU graph", "HPUGraph", "hpu_graph", "hpu graph"),
            collective=("HCCL",)),
    # Google TPU (torch_xla, tpu-inference / JAX): the compiled graphs' on-chip memories are vmem and smem
    Backend("tpu", (r"\bTPUs?\b", r"torch_xla", r"tpu[_-]inference", r"\bXLA\b", r"\bv[456][ep]?-\d+\b", r"\bpallas\b",
                    r"\bPallas\b"),
            ("TPU", "torch_xla", "tpu_inference", "tpu-inference", "XLA", "v4-", "v5e-", "v5p-", "v6e-", "v5-", "v6-",
             "pallas", "Pallas"),
            # (no graph words: compiling the start-up graphs is a TPU's profile run, errors._XLA_OOM)
            memory=("vmem", "VMEM", "smem", "SMEM")),
    Backend("xpu", (r"\bXPUs?\b", r"\bxpu\b", r"\bA770\b", r"\bipex\b", r"\bIPEX\b", r"oneAPI", r"\bArc A\d{3}\b"),
            ("XPU", "xpu", "A770", "ipex", "IPEX", "oneAPI", "Arc A"),
            memory=("XPU memory", "xpu memory"), graphs=("XPU graph",), collective=("oneCCL", "oneccl")),
)
# Device memory in words any backend uses.
DEVICE_MEMORY: tuple[str, ...] = ("HBM", "device memory", "Device memory", "accelerator memory")
# The host's memories a vLLM process uses: its RAM, the pinned buffers of offloading, and /dev/shm (the tmpfs the
# workers' shared-memory queues and a CPU KV offload live in: host RAM under a container's size limit).
HOST_MEMORY: tuple[str, ...] = ("/dev/shm", "host memory", "system memory", "CPU memory", "pinned memory", "host RAM")
# A memory said to run short (mem:<host|device>-short, parsers/cues.py): these words before or after its name.
SHORT_BEFORE = ("insufficient space in", "insufficient", "not enough", "ran out of", "running out of", "run out of",
                "exhausted", "no space left on", "too little")
SHORT_AFTER = ("exhausted", "insufficient", "is full", "was full", "exceeded", "too small", "ran out", "not enough")

# The collective operations a tensor- or pipeline-parallel group runs, as torch.distributed and the libraries name
# them; a group failing in one (a timeout, a hang, a rank gone) is a collective failure whether or not an NCCL line
# says so (HCCL, gloo, a Ray worker that died mid-all_reduce).
COLLECTIVE_OPS: tuple[str, ...] = ("all_reduce", "allreduce", "AllReduce", "all-reduce", "all_gather", "allgather",
                                   "AllGather", "all-gather", "reduce_scatter", "ReduceScatter", "all_to_all",
                                   "alltoall", "AllToAll", "barrier", "broadcast", "ProcessGroup", "process group",
                                   "collective", "TP group", "tensor parallel group", "tensor-parallel group",
                                   # the point-to-point operations of a pipeline-parallel group, as gloo and torch
                                   # name them ("Timed out waiting 1800000ms for recv operation to complete")
                                   "recv operation", "send operation")
# torch.distributed's own layers beside the device libraries: its CPU backend (gloo: the groups vLLM sets up for
# metadata and shared-memory broadcasts), its process groups, and the transports KV blocks move over between engines.
# A timeout or hang there is the parallel group's communication failing, whatever the device.
DISTRIBUTED_LAYERS: tuple[str, ...] = ("gloo", "Gloo", "ProcessGroupNCCL", "ProcessGroupGloo", "UCX", "NIXL")
# Environment variables of the communication libraries (NCCL_P2P_DISABLE=1, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME,
# HCCL_CONNECT_TIMEOUT, UCX_TLS): a report that sets one is working around (or debugging) the group's transport.
COMM_ENV_PREFIXES: tuple[str, ...] = ("NCCL_", "GLOO_", "HCCL_", "RCCL_", "UCX_", "NVSHMEM_", "TORCH_NCCL_")


def backend(name: str) -> Backend:
    """The backend named ``name`` (KeyError when the table has none)."""
    for b in BACKENDS:
        if b.name == name:
            return b
    raise KeyError(name)


def memory_words() -> tuple[str, ...]:
    return tuple(dict.fromkeys(w for b in BACKENDS for w in b.memory)) + DEVICE_MEMORY


def graph_words() -> tuple[str, ...]:
    return tuple(dict.fromkeys(w for b in BACKENDS for w in b.graphs))


def collective_libraries() -> tuple[str, ...]:
    return tuple(dict.fromkeys(w for b in BACKENDS for w in b.collective)) + DISTRIBUTED_LAYERS
