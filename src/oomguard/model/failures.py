"""Failure classes shared by plan, check, diagnose and probe.

The names are a contract (tests/data/calibration/README.md): keep them exact. The last four
(after ``MAMBA_STATE_LIMIT``) came later, for failures the calibration set files under
``config-error`` or ``unknown``; ``CALIBRATION_CLASS`` maps them back for tools that only know
the original fourteen.
"""

from __future__ import annotations

import enum


class FailureClass(str, enum.Enum):
    WEIGHTS_OOM = "weights-oom"
    STARTUP_FREE_MEMORY = "startup-free-memory"
    PROFILE_OOM = "profile-oom"
    CUDAGRAPH_OOM = "cudagraph-oom"
    NO_KV_MEMORY = "no-kv-memory"
    KV_TOO_SMALL = "kv-too-small"
    RUNTIME_OOM = "runtime-oom"
    HOST_OOM = "host-oom"
    ILLEGAL_MEMORY_ACCESS = "illegal-memory-access"
    BAD_ARGUMENT = "bad-argument"
    MAX_LEN_EXCEEDS_MODEL = "max-len-exceeds-model"
    CONFIG_ERROR = "config-error"
    MAMBA_STATE_LIMIT = "mamba-state-limit"
    MISSING_DEPENDENCY = "missing-dependency"  # an optional module / extra not installed, a broken import
    CHAT_TEMPLATE_ERROR = "chat-template-error"  # requests rejected by the chat template; the server is up
    NCCL_ERROR = "nccl-error"  # collective communication failed (/dev/shm too small, P2P, network)
    RAY_PLACEMENT_TIMEOUT = "ray-placement-timeout"  # Ray could not place the GPUs the launch asked for
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


# The original calibration class of each later class (tests/data/calibration/README.md).
CALIBRATION_CLASS: dict[FailureClass, FailureClass] = {
    FailureClass.MISSING_DEPENDENCY: FailureClass.CONFIG_ERROR,
    FailureClass.CHAT_TEMPLATE_ERROR: FailureClass.CONFIG_ERROR,
    FailureClass.NCCL_ERROR: FailureClass.UNKNOWN,
    FailureClass.RAY_PLACEMENT_TIMEOUT: FailureClass.CONFIG_ERROR,
}
