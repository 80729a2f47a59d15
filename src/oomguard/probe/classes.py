"""The closed sets the probe reports in: failure classes, sample sources, severities.

Memory classes use exactly the names of ``oomguard diagnose`` (see
``shared/calibration/README.md``) so that a probe failure and a post-mortem of
the same crash agree. Client-chain classes describe failures that are not
memory at all (a wrong URL, a 401, a broken stream); S2's operators lost hours
confusing the two.
"""

from __future__ import annotations


from oomguard.textenum import TextEnum
from oomguard.model.failures import FailureClass


class ProbeClass(TextEnum):
    # memory classes: the values come from the one shared definition
    RUNTIME_OOM = FailureClass.RUNTIME_OOM.value
    HOST_OOM = FailureClass.HOST_OOM.value
    KV_TOO_SMALL = FailureClass.KV_TOO_SMALL.value
    MAX_LEN_EXCEEDS_MODEL = FailureClass.MAX_LEN_EXCEEDS_MODEL.value
    UNKNOWN = FailureClass.UNKNOWN.value
    # the rest of diagnose's classes: a server log read with --server-log can name any of them
    WEIGHTS_OOM = FailureClass.WEIGHTS_OOM.value
    STARTUP_FREE_MEMORY = FailureClass.STARTUP_FREE_MEMORY.value
    PROFILE_OOM = FailureClass.PROFILE_OOM.value
    CUDAGRAPH_OOM = FailureClass.CUDAGRAPH_OOM.value
    NO_KV_MEMORY = FailureClass.NO_KV_MEMORY.value
    ILLEGAL_MEMORY_ACCESS = FailureClass.ILLEGAL_MEMORY_ACCESS.value
    BAD_ARGUMENT = FailureClass.BAD_ARGUMENT.value
    CONFIG_ERROR = FailureClass.CONFIG_ERROR.value
    MAMBA_STATE_LIMIT = FailureClass.MAMBA_STATE_LIMIT.value
    MISSING_DEPENDENCY = FailureClass.MISSING_DEPENDENCY.value
    CHAT_TEMPLATE_ERROR = FailureClass.CHAT_TEMPLATE_ERROR.value
    NCCL_ERROR = FailureClass.NCCL_ERROR.value
    RAY_PLACEMENT_TIMEOUT = FailureClass.RAY_PLACEMENT_TIMEOUT.value
    # client-chain classes (issue 5's JSON contract)
    UNREACHABLE = "unreachable"
    AUTH = "auth"
    MODEL_NOT_FOUND = "model-not-found"
    BAD_URL = "bad-url"
    BAD_REQUEST = "bad-request"
    CONTEXT_TOO_LONG = "context-too-long"
    STREAM_BROKEN = "stream-broken"
    TIMEOUT = "timeout"
    SERVER_ERROR = "server-error"

    @property
    def is_memory(self) -> bool:
        return self in _MEMORY


_MEMORY = frozenset(
    {
        ProbeClass.RUNTIME_OOM,
        ProbeClass.HOST_OOM,
        ProbeClass.KV_TOO_SMALL,
        ProbeClass.MAX_LEN_EXCEEDS_MODEL,
        ProbeClass.UNKNOWN,
        ProbeClass.WEIGHTS_OOM,
        ProbeClass.STARTUP_FREE_MEMORY,
        ProbeClass.PROFILE_OOM,
        ProbeClass.CUDAGRAPH_OOM,
        ProbeClass.NO_KV_MEMORY,
        ProbeClass.ILLEGAL_MEMORY_ACCESS,
        ProbeClass.MAMBA_STATE_LIMIT,
    }
)


class Source(TextEnum):
    """Where a memory sample came from."""

    NVML = "nvml"
    NVIDIA_SMI = "nvidia-smi"
    METRICS = "metrics"
    RSS = "rss"
    KERNEL = "kernel"
    CLIENT = "client"  # the load generator's own view: requests in flight


class Severity(TextEnum):
    """How much a failed chain check matters.

    ``ERROR`` fails the verdict and stops stage 2 (nothing useful can be
    measured past it); ``FAIL_CONTINUE`` fails the verdict but lets stage 2 run
    so it can show the failure on a real request; ``WARN`` is advice only.
    """

    ERROR = "error"
    FAIL_CONTINUE = "fail-continue"
    WARN = "warn"


class OutputFormat(TextEnum):
    TEXT = "text"
    JSON = "json"

