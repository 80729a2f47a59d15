"""The GPU catalog: total memory as CUDA reports it, compute capability, bandwidth.

Names match the way people type them: case, spaces, dashes and underscores
are ignored, and common aliases resolve ("a100 80g", "4090", "H100-SXM").
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from oomguard.errors import InputError, UnknownGPUError
from oomguard.units import GiB

_CATALOG = Path(__file__).resolve().parent.parent / "data" / "gpus.json"


@dataclass(frozen=True)
class GPU:
    name: str
    total_bytes: int
    compute_capability: str
    bandwidth_gbs: float
    bf16_tflops: float
    vendor: str = "nvidia"
    total_source: str = "catalog"
    no_bf16: bool = False
    unified_memory: bool = False
    nvlink: bool = False  # all GPUs of a node linked (SXM / OAM): custom all-reduce beyond 2 GPUs

    @property
    def cc_major_minor(self) -> tuple[int, int]:
        m = re.match(r"^(\d+)\.(\d+)$", self.compute_capability)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    @property
    def supports_fp8(self) -> bool:
        return self.vendor == "amd" or self.cc_major_minor >= (8, 9)

    @property
    def native_fp4(self) -> bool:
        return self.cc_major_minor >= (10, 0)

    @property
    def is_a100(self) -> bool:
        return self.name.startswith("A100")


def _norm(s: str) -> str:
    s = s.lower().replace("nvidia", "").replace("geforce", "").replace("tesla", "")
    s = re.sub(r"[\s\-_]+", "", s)
    return s.replace("gb", "g")


@functools.lru_cache(maxsize=1)
def _entries() -> tuple[dict, ...]:
    return tuple(json.loads(_CATALOG.read_text())["gpus"])


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, dict]:
    idx: dict[str, dict] = {}
    for e in _entries():
        for n in [e["name"], *e.get("aliases", [])]:
            idx.setdefault(_norm(n), e)
    return idx


@functools.lru_cache(maxsize=1)
def _ambiguous() -> dict[str, tuple[str, ...]]:
    """Names that stand for cards with different memory (a bare "A100" is a 40 GB or an 80 GB card)."""
    raw = json.loads(_CATALOG.read_text()).get("ambiguous", {})
    return {_norm(k): tuple(v) for k, v in raw.items()}


def gpu_names() -> list[str]:
    return [e["name"] for e in _entries()]


def _to_gpu(e: dict, total_gib: float | None) -> GPU:
    total = total_gib if total_gib is not None else e["total_gib"]
    return GPU(
        name=e["name"],
        total_bytes=int(round(total * GiB)),
        compute_capability=e["cc"],
        bandwidth_gbs=e["bandwidth_gbs"],
        bf16_tflops=e["bf16_tflops"],
        vendor=e.get("vendor", "nvidia"),
        total_source="--gpu-memory-gib" if total_gib is not None else e.get("total_source", "catalog"),
        no_bf16=bool(e.get("no_bf16")),
        unified_memory=bool(e.get("unified_memory")),
        nvlink=bool(e.get("nvlink")),
    )


def lookup_gpu(name: str | None, memory_gib: float | None = None) -> GPU:
    """Resolve a GPU by name; ``memory_gib`` overrides the catalog total."""
    if memory_gib is not None and memory_gib <= 0:
        raise InputError(f"--gpu-memory-gib must be positive, got {memory_gib}")
    if not name:
        if memory_gib is None:
            raise InputError("no GPU given: use --gpu NAME (e.g. --gpu A100-80GB) or --gpu-memory-gib X")
        return GPU("custom", int(round(memory_gib * GiB)), "8.0", 1000.0, 100.0, total_source="--gpu-memory-gib")
    key = _norm(name)
    choices = _ambiguous().get(key)
    if choices:
        by_name = {e["name"]: e for e in _entries()}
        if memory_gib is not None:  # the total settles which card it is
            best = min(choices, key=lambda c: abs(by_name[c]["total_gib"] - memory_gib))
            return _to_gpu(by_name[best], memory_gib)
        listed = " or ".join(f"{c} ({by_name[c]['total_gib']:.2f} GiB)" for c in choices)
        raise UnknownGPUError(f"GPU name {name!r} is ambiguous: {listed}; pass one of them "
                              "(or --gpu-memory-gib with the total your log prints)")
    e = _index().get(key)
    if e is None:
        # "a100 80gb pcie" -> try dropping form-factor words
        for suffix in ("pcie", "sxm4", "sxm5", "sxm", "hbm3"):
            if key.endswith(suffix) and key[: -len(suffix)] in _index():
                e = _index()[key[: -len(suffix)]]
                break
    if e is None:
        keys = list(_index())
        from oomguard.inputs.suggest import close_matches

        close = close_matches(key, keys, n=5, cutoff=0.5)
        names = sorted({_index()[k]["name"] for k in close})
        hint = f"; did you mean {', '.join(names)}?" if names else f"; known: {', '.join(gpu_names())}"
        raise UnknownGPUError(f"unknown GPU {name!r}{hint} (or give --gpu-memory-gib with the total your log prints)")
    return _to_gpu(e, memory_gib)


def find_gpu_in_text(text: str) -> GPU | None:
    """The catalog GPU named somewhere in free text ("2x NVIDIA A100-SXM4-80GB (TP2)").

    Tries runs of up to four consecutive words, longest first, so "L40S" never matches "L4"
    and "RTX 3090 Ti" wins over "RTX 3090".
    """
    words = [w for w in re.split(r"[^0-9A-Za-z]+", text or "") if w]
    index = _index()
    for size in range(min(4, len(words)), 0, -1):
        for i in range(len(words) - size + 1):
            key = _norm(" ".join(words[i : i + size]))
            e = index.get(key)
            if e is not None:  # a bare "A100" is ambiguous (40 or 80 GB) and not in the index
                return _to_gpu(e, None)
    return None
