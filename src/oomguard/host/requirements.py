"""Host RAM a vLLM launch needs: the names older callers import, now served by ``ram_model``.

The model itself (per release: the pinned CPU KV tier, the /dev/shm region
from 0.27, --cpu-offload-gb, swap space, workers, API server) lives in
``oomguard.host.ram_model``, the one place check, fit and host read it from.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping

from oomguard.host.ram_model import (
    CPU_OFFLOAD_OVERHEAD,
    HostRamNeed,
    KvTierLayout,
    MemoryKind,
    RamComponent,
    host_ram_model,
    kv_offload_bytes,
    largest_cpu_offload_gb_that_fits,
    largest_kv_offload_that_fits,
    next_power_of_two,
    world_size_of,
)

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


def host_ram_needed(
    flags: Mapping[str, Any],
    *,
    weights_bytes: int | None,
    world_size: int | None = None,
    env: Mapping[str, str] | None = None,
    vllm_version: str | None = None,
    shard_bytes: int | None = None,
    checkpoint_format: str | None = None,
    kv_layout: KvTierLayout | None = None,
    engine: str | None = None,
) -> HostRamNeed:
    """``ram_model.host_ram_model`` under its older keyword (``vllm_version``)."""
    return host_ram_model(
        flags,
        weights_bytes=weights_bytes,
        version=vllm_version,
        world_size=world_size,
        env=env,
        shard_bytes=shard_bytes,
        checkpoint_format=checkpoint_format,
        kv_layout=kv_layout,
        engine=engine,
    )
