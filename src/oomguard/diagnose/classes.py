"""The closed sets diagnose works with: failure classes, start-up phases, input kinds.

The failure class names are a contract (JSON output, other commands, tests):
they are exactly those of the calibration README and must not change.
"""

from __future__ import annotations

from enum import Enum, IntEnum


# One definition for every command: the memory model's enum (a leaf module, no imports).
from oomguard.model.failures import FailureClass  # noqa: E402

DESCRIPTIONS: dict[FailureClass, str] = {
    FailureClass.WEIGHTS_OOM: "CUDA OOM while loading weights: the weights (per GPU) do not fit",
    FailureClass.STARTUP_FREE_MEMORY: "free memory at start is below what --gpu-memory-utilization asks for "
    "(another process holds the GPU)",
    FailureClass.PROFILE_OOM: "CUDA OOM in the start-up profile run or sampler warm-up",
    FailureClass.CUDAGRAPH_OOM: "CUDA OOM while capturing CUDA graphs or profiling their memory",
    FailureClass.NO_KV_MEMORY: "nothing is left for KV cache blocks",
    FailureClass.KV_TOO_SMALL: "the KV pool cannot hold one request of max_model_len tokens",
    FailureClass.RUNTIME_OOM: "CUDA OOM while serving",
    FailureClass.HOST_OOM: "host RAM exhausted: kernel OOM killer, cgroup limit, SIGKILL / exit 137",
    FailureClass.ILLEGAL_MEMORY_ACCESS: "CUDA illegal memory access or device-side assert",
    FailureClass.BAD_ARGUMENT: "unrecognized, removed or invalid command-line argument or value",
    FailureClass.MAX_LEN_EXCEEDS_MODEL: "max_model_len above the model's derived maximum",
    FailureClass.CONFIG_ERROR: "other configuration rejected",
    FailureClass.MAMBA_STATE_LIMIT: "max_num_seqs above the available Mamba / linear-attention state blocks",
    FailureClass.MISSING_DEPENDENCY: "a Python module or optional extra vLLM needs is not installed (or broken)",
    FailureClass.CHAT_TEMPLATE_ERROR: "requests fail in the chat template; the server itself is up",
    FailureClass.NCCL_ERROR: "NCCL collective communication failed (shared memory, P2P, network)",
    FailureClass.RAY_PLACEMENT_TIMEOUT: "Ray could not place the GPUs the launch asked for",
    FailureClass.UNKNOWN: "a failure none of the known classes explains",
}


class Phase(IntEnum):
    """How far a vLLM start got. Ordered: a later phase has a larger value."""

    UNKNOWN = 0
    STARTING = 1  # arguments parsed, engine being created
    LOADING = 2  # weights being loaded
    PROFILING = 3  # weights loaded; profile run / compile / sampler warm-up
    KV_CACHE = 4  # KV cache sized and allocated
    GRAPH_CAPTURE = 5  # CUDA graphs being profiled or captured
    WARMUP = 6  # graphs captured; final warm-up
    READY = 7  # engine initialised, server starting or idle
    SERVING = 8  # requests seen

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")


class InputKind(str, Enum):
    VLLM_LOG = "vllm-log"
    KERNEL_LOG = "kernel-log"
    NVIDIA_SMI = "nvidia-smi"
    NVIDIA_SMI_CSV = "nvidia-smi-csv"
    NVIDIA_SMI_TOPO = "nvidia-smi-topo"
    LAUNCH = "launch"
    TEXT = "text"
    EMPTY = "empty"
    BINARY = "binary"
    UNREADABLE = "unreadable"

    def __str__(self) -> str:
        return self.value


class OutputFormat(str, Enum):
    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"

    def __str__(self) -> str:
        return self.value
