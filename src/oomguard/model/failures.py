"""Failure classes shared by plan, check, diagnose and probe.

The names are a contract (tests/data/calibration/README.md): keep them exact.
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
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value
