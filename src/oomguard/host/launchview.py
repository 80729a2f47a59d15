"""What the host checks need to know about a launch, as plain data.

``LaunchView`` is built once from a parsed launch (``oomguard.inputs.launch``)
plus a look at the checkpoint on disk, so the checks stay pure functions of
``HostFacts`` and ``LaunchView``. Tests build it directly from flags.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from oomguard.host.ram_model import HostRamNeed, KvTierLayout, world_size_of
from oomguard.host.requirements import host_ram_needed
from oomguard.host.root import Root
from oomguard.inputs import files as input_files

__all__ = ["LaunchView", "launch_view", "checkpoint_on_disk", "default_utilization"]


@dataclass(frozen=True)
class LaunchView:
    source: str
    model: str | None
    flags: Mapping[str, Any]
    env: Mapping[str, str]
    tp: int
    pp: int
    dp: int
    gpu_memory_utilization: float
    utilization_explicit: bool
    visible_devices: tuple[str, ...] | None  # CUDA_VISIBLE_DEVICES entries, as written
    numa_bound: bool  # the launch already runs under numactl / taskset
    ram: HostRamNeed
    version: str | None = None
    notes: tuple[str, ...] = field(default=())
    deployment: Mapping[str, Any] | None = None  # a manifest's GPUs, memory limit, /dev/shm (inputs.manifests)
    # what the RAM model was given besides the flags (weights, shard, format, KV layout): ``with_flags``
    ram_inputs: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def with_flags(self, flags: Mapping[str, Any]) -> "LaunchView":
        """The same launch with other flags (a fix applied), its host RAM recomputed the same way."""
        from dataclasses import replace

        ri = dict(self.ram_inputs or {})
        tp, pp, dp = world_size_of(flags)
        ram = host_ram_needed(flags, env=dict(self.env), vllm_version=self.version, **ri)
        return replace(self, flags=dict(flags), tp=tp, pp=pp, dp=dp, ram=ram)

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def engine_workers(self) -> int:
        return self.tp * self.pp

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "model": self.model,
            "tensor_parallel_size": self.tp,
            "pipeline_parallel_size": self.pp,
            "data_parallel_size": self.dp,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "utilization_explicit": self.utilization_explicit,
            "visible_devices": list(self.visible_devices) if self.visible_devices else None,
            "numa_bound": self.numa_bound,
            "vllm_version": self.version,
            "host_ram": self.ram.to_dict(),
            "deployment": dict(self.deployment) if self.deployment else None,
            "notes": list(self.notes),
        }


def default_utilization(version: str | None) -> float:
    """vLLM's default --gpu-memory-utilization for ``version`` (the newest release when unknown)."""
    from oomguard.model.engine import default_utilization as engine_default, parse_version

    return engine_default(parse_version(version))


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def checkpoint_on_disk(root: Root, model: str | None, env: Mapping[str, str] | None = None) -> tuple[int, int, str] | None:
    """(total bytes, largest file bytes, format) of a local checkpoint, or None when not on this disk.

    Looks at the model path under ``root``, then (real root only) the Hugging
    Face cache for a repo id. Only sizes are read (stat), never contents.
    """
    if not model:
        return None
    candidates: list[Path] = []
    if model.startswith("/") or model.startswith("."):
        candidates.append(root.file(model) if model.startswith("/") else Path(model))
    elif root.is_real and re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        env = env or {}
        hub = env.get("HF_HUB_CACHE") or os.environ.get("HF_HUB_CACHE")
        if not hub:
            home = env.get("HF_HOME") or os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface")
            hub = os.path.join(home, "hub")
        snapshots = Path(hub) / f"models--{model.replace('/', '--')}" / "snapshots"
        if input_files.is_dir(snapshots):
            candidates.extend(sorted(input_files.list_dir(snapshots, "HF cache"), key=_mtime, reverse=True)[:1])
    for directory in candidates:
        if input_files.is_file(directory) and directory.suffix == ".gguf":
            size = directory.stat().st_size
            return size, size, "gguf"
        if not input_files.is_dir(directory):
            continue
        files = [p for p in input_files.list_dir(directory, "model directory")
                 if p.suffix in _WEIGHT_SUFFIXES and input_files.is_file(p)]
        safetensors = [p for p in files if p.suffix == ".safetensors"]
        chosen = safetensors or files  # vLLM prefers safetensors when both exist
        if not chosen:
            continue
        sizes = [p.stat().st_size for p in chosen]
        fmt = "safetensors" if safetensors else ("gguf" if chosen[0].suffix == ".gguf" else "pt")
        return sum(sizes), max(sizes), fmt
    return None


def _visible(env: Mapping[str, str]) -> tuple[str, ...] | None:
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    return tuple(x.strip() for x in raw.split(",") if x.strip())


def launch_view(
    *,
    source: str,
    flags: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    model: str | None = None,
    version: str | None = None,
    text: str | None = None,
    root: Root | None = None,
    weights_bytes: int | None = None,
    kv_layout: KvTierLayout | None = None,
    deployment: Mapping[str, Any] | None = None,
) -> LaunchView:
    """Build the view; looks up the checkpoint size on disk when ``weights_bytes`` is not given."""
    env = dict(env or {})
    tp, pp, dp = world_size_of(flags)
    notes: list[str] = []
    shard = fmt = None
    if weights_bytes is None and root is not None:
        found = checkpoint_on_disk(root, model or flags.get("model"), env)
        if found:
            weights_bytes, shard, fmt = found
            notes.append(f"checkpoint size from the files on disk ({fmt})")
    util_flag = flags.get("gpu_memory_utilization")
    try:
        util = float(util_flag) if util_flag is not None else default_utilization(version)
    except (TypeError, ValueError):
        util = default_utilization(version)
    ram_inputs = {"weights_bytes": weights_bytes, "shard_bytes": shard, "checkpoint_format": fmt, "kv_layout": kv_layout}
    ram = host_ram_needed(flags, env=env, vllm_version=version, **ram_inputs)
    bound = bool(text and re.search(r"(^|[\s;|&(])(numactl|taskset)\s", text))
    return LaunchView(
        source=source,
        model=model or flags.get("model"),
        flags=flags,
        env=env,
        tp=tp,
        pp=pp,
        dp=dp,
        gpu_memory_utilization=util,
        utilization_explicit=util_flag is not None,
        visible_devices=_visible(env),
        numa_bound=bound,
        ram=ram,
        version=version,
        notes=tuple(notes),
        deployment=deployment,
        ram_inputs=ram_inputs,
    )
