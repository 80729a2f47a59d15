"""The limits an exported launch gets, from the same plan ``oomguard check`` uses.

Host RAM comes from ``oomguard.host.ram_model`` (the one model of check's OG401,
fit and host), called as check calls it (``check.rules.host.host_need``: the
flags, the release, the environment; the checkpoint's page cache is reclaimable
and not counted). From it:

- **memory request** (Kubernetes): the expected need, rounded up to a GiB (it covers the
  CPU KV tier and offload; the scheduler reserves it);
- **memory limit** (systemd ``MemoryMax=``, Kubernetes memory limit,
  compose ``deploy.resources.limits.memory``, ``docker run --memory``):
  ``ram_model.ram_within_policy`` — the larger of the high estimate and the
  expected need over ``FIX_SHARE`` (0.85) — rounded up to a GiB: the RAM on
  which check (OG401), fit and host all say "fits" (the one host-RAM answer;
  check reads a manifest's or unit's memory limit as its host RAM);
- **/dev/shm** (the Kubernetes ``emptyDir`` ``sizeLimit``): the CPU KV tier's one
  file (vLLM >= 0.27) plus 1 GiB for NCCL, as check's OG405 asks, and never
  below the 16 GiB the export always gave tensor-parallel NCCL traffic;
- **start timeout** (``TimeoutStartSec=``, the startup probe's budget): loading
  the checkpoint at ``LOAD_BYTES_PER_S`` plus ``PROFILE_AND_GRAPHS_S`` for the
  profile run, torch.compile and CUDA-graph capture; ``UNKNOWN_START_S`` when
  the checkpoint's size is unknown. Both are assumptions (stated in the unit),
  not measurements: a slow network disk, and vLLM's documented first-start
  compile cost;
- **restart policy**: ``Restart=on-failure`` every ``RESTART_SEC``, at most
  ``START_LIMIT_BURST`` starts per window of that many start timeouts (a crash
  loop stops instead of reloading the weights forever);
- **OOMScoreAdjust=-900**: the kernel's OOM killer picks almost anything else
  first (S1's host-OOM remedy), yet the server stays killable when it exceeds
  its own ``MemoryMax=`` (at -1000 a cgroup OOM would find nothing to kill).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from oomguard.host.ram_model import OOM_SCORE_ADJ  # noqa: F401  (one figure with host's HOST040)
from oomguard.units import GiB

DEFAULT_SHM_GIB = 16  # what the export gave /dev/shm before the plan sized it (NCCL under TP)
LOAD_BYTES_PER_S = 50 * 1024**2  # assumption: a slow network disk; local NVMe is 20x faster
PROFILE_AND_GRAPHS_S = 600  # assumption: profile run + torch.compile + CUDA graph capture on a first start
UNKNOWN_START_S = 1800  # checkpoint size unknown (no --model config)
MIN_START_S = 1200  # the export's start timeout before the plan sized it: never shorter
RESTART_SEC = 10
START_LIMIT_BURST = 3


@dataclass(frozen=True)
class Resources:
    memory_max_bytes: int | None
    memory_why: str
    memory_request_bytes: int | None  # what the launch is expected to hold (the Kubernetes request)
    shm_size: str  # a Kubernetes quantity
    shm_why: str
    timeout_start_s: int
    timeout_why: str
    restart_sec: int = RESTART_SEC
    start_limit_burst: int = START_LIMIT_BURST
    oom_score_adj: int = OOM_SCORE_ADJ

    @property
    def start_limit_interval_s(self) -> int:
        return self.start_limit_burst * (self.timeout_start_s + self.restart_sec)


def _ceil_gib(n: float) -> int:
    return max(1, math.ceil(n / GiB))


def resources_for(launch: Any, version: str | None, *, weights_bytes: int | None = None) -> Resources:
    """The limits for ``launch`` on vLLM ``version`` (None: the newest release oomguard knows)."""
    from oomguard.host.ram_model import FIX_SHARE, host_ram_model, ram_within_policy, version_tuple

    try:
        from oomguard.versions import get_release

        release = get_release(version).version
    except Exception:  # noqa: BLE001 - an unknown version was refused earlier; fall back to the newest behaviour
        release = None
    need = host_ram_model(dict(launch.flags), weights_bytes=None, version=version_tuple(release),
                          env=dict(getattr(launch, "env", None) or {}))
    limit_gib = _ceil_gib(ram_within_policy(need))
    memory_why = (f"the plan's host RAM {need.expected_bytes / GiB:.1f} GiB expected, {need.high_bytes / GiB:.1f} GiB high "
                  f"(oomguard.host.ram_model); limit = max(high, expected / {FIX_SHARE}) = {limit_gib} GiB")
    shm_gib = DEFAULT_SHM_GIB
    shm_why = ""
    if need.shm_bytes:
        shm_gib = max(DEFAULT_SHM_GIB, _ceil_gib(need.shm_bytes + GiB))
        shm_why = (f"the CPU KV tier is one {need.shm_bytes / GiB:.1f} GiB file in /dev/shm (vLLM >= 0.27) "
                   f"+ 1 GiB for NCCL = {shm_gib} GiB")
    if weights_bytes:
        timeout = PROFILE_AND_GRAPHS_S + math.ceil(weights_bytes / LOAD_BYTES_PER_S)
        timeout_why = (f"{weights_bytes / GiB:.1f} GiB of weights at {LOAD_BYTES_PER_S // 1024**2} MiB/s "
                       f"+ {PROFILE_AND_GRAPHS_S} s (assumed)")
    else:
        timeout = UNKNOWN_START_S
        timeout_why = f"checkpoint size unknown: {UNKNOWN_START_S} s (pass --model CONFIG to size it)"
    if timeout < MIN_START_S:
        timeout_why += f" = {timeout} s, raised to the floor of {MIN_START_S} s"
        timeout = MIN_START_S
    request = _ceil_gib(need.expected_bytes) * GiB
    return Resources(limit_gib * GiB, memory_why, request, f"{shm_gib}Gi", shm_why, timeout, timeout_why)
