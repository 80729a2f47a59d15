"""The GPU catalog: total memory as torch reports it, and what vLLM's platform code allows on each card.

``data/gpus.json`` is the one place for GPU facts. ``archs`` holds what belongs to a compute
target (platform, the capability vLLM reports, dtypes, FP8/FP4, backend defaults), ``gpus``
what belongs to a card (memory as torch reports it, interconnect, P2P, spec-sheet speeds);
every row names its source. Commands and the memory model read these fields from ``GPU``,
never a rule of their own on the compute capability.

Names match the way people type them: case, spaces, dashes and underscores are ignored, the
vendor's words (NVIDIA, GeForce, Tesla, AMD, Instinct, Intel) too, and common aliases resolve
("a100 80g", "4090", "RTX4090", "H100-SXM", "MI210").
"""

from __future__ import annotations

import functools
import json
import os
import re

from oomguard.errors import InputError, UnknownGPUError
from oomguard.units import GiB
import oomguard.lazy_re as lazy_re
from oomguard.records import NamedTuple

# Interconnects that link every GPU of a node to every other (custom all-reduce beyond two GPUs,
# NCCL's NVLink channel count): NVSwitch boards, rack NVLink, AMD's XGMI between OAM modules.
FULLY_CONNECTED = ("nvswitch", "mnnvl", "xgmi")


class GPU(NamedTuple):
    """One GPU of the bundled table (data/gpus.json): the memory vLLM sees and the card's capabilities."""
    name: str
    total_bytes: int
    compute_capability: str  # as vLLM's platform reports it (AMD: derived from the gfx target)
    bandwidth_gbs: float
    bf16_tflops: float
    vendor: str = "nvidia"
    total_source: str = "catalog"
    unified_memory: bool = False
    arch: str = "sm_80"
    platform: str = "cuda"
    dtypes: tuple[str, ...] = ("bfloat16", "float16", "float32")
    fp8: str = "weight-only"  # native | weight-only | none
    fp4: str = "none"  # nvfp4 | mxfp4 | none
    fp8_kv: bool = True  # vLLM stores an fp8 KV cache on this target
    interconnect: str = "pcie"
    p2p: bool = True  # cudaDeviceCanAccessPeer between two of these cards (GeForce: no)
    nvls: bool = False  # NVSwitch multicast (NVLS) buffers on NVSwitch boards
    mla_fp8_block_size: int | None = None  # the MLA backend's block with an fp8 KV cache (FlashMLA: 64)
    custom_all_reduce: bool = True  # the platform allows vLLM's custom all-reduce on this target
    default_block_size: int | None = None  # a platform whose attention backend prefers another block
    source: str = ""

    @property
    def cc_major_minor(self) -> tuple[int, int]:
        m = re.match(r"^(\d+)\.(\d+)$", self.compute_capability)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    @property
    def supports_fp8(self) -> bool:
        """FP8 tensor cores (FP8 GEMMs, not weight-only kernels)."""
        return self.fp8 == "native"

    @property
    def native_fp4(self) -> bool:
        """NVFP4 natively (Blackwell)."""
        return self.fp4 == "nvfp4"

    @property
    def no_bf16(self) -> bool:
        return "bfloat16" not in self.dtypes

    @property
    def nvlink(self) -> bool:
        """All GPUs of a node linked to each other (what vLLM's ``is_fully_connected`` checks)."""
        return self.interconnect in FULLY_CONNECTED

    @property
    def is_a100(self) -> bool:
        return self.name.startswith("A100")

    @property
    def target(self) -> str:
        """What the platform calls the compute target: ``sm 8.9``, ``gfx942``."""
        return f"sm {self.compute_capability}" if self.platform == "cuda" else self.arch


_WORDS = ("nvidia", "geforce", "tesla", "amd", "instinct", "intel(r)", "intel", "(tm)")


def _norm(s: str) -> str:
    s = s.lower()
    for w in _WORDS:
        s = s.replace(w, "")
    s = re.sub(r"[\s\-_/()]+", "", s)
    return s.replace("gb", "g")


@functools.lru_cache(maxsize=1)
def _catalog() -> dict:
    # the package's own file, by path: importlib.resources would load zipfile, tempfile and threading
    # into every command's start-up for one read
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data", "gpus.json"),
              encoding="utf-8") as fh:
        return json.loads(fh.read())


def _entries() -> tuple[dict, ...]:
    return tuple(_catalog()["gpus"])


def _archs() -> dict[str, dict]:
    return _catalog()["archs"]


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
    raw = _catalog().get("ambiguous", {})
    return {_norm(k): tuple(v) for k, v in raw.items()}


def gpu_names() -> list[str]:
    return [e["name"] for e in _entries()]


def catalog_rows() -> list[dict]:
    """Every card with its arch facts merged in (for docs and tests)."""
    return [{**_archs()[e["arch"]], **e} for e in _entries()]


_VENDOR = {"cuda": "nvidia", "rocm": "amd", "hpu": "intel", "xpu": "intel"}


def _to_gpu(e: dict, total_gib: float | None) -> GPU:
    a = _archs()[e["arch"]]
    total = total_gib if total_gib is not None else e["total_gib"]
    return GPU(
        name=e["name"],
        total_bytes=int(round(total * GiB)),
        compute_capability=a["cc"],
        bandwidth_gbs=e["bandwidth_gbs"],
        bf16_tflops=e["bf16_tflops"],
        vendor=_VENDOR[a["platform"]],
        total_source="--gpu-memory-gib" if total_gib is not None else e.get("total_source", "catalog"),
        unified_memory=bool(e.get("unified_memory")),
        arch=e["arch"],
        platform=a["platform"],
        dtypes=tuple(a["dtypes"]),
        fp8=a["fp8"],
        fp4=a["fp4"],
        fp8_kv=bool(a["fp8_kv"]),
        interconnect=e["interconnect"],
        p2p=bool(e.get("p2p", True)),
        nvls=bool(a.get("nvls")) and e["interconnect"] in ("nvswitch", "mnnvl"),
        mla_fp8_block_size=a.get("mla_fp8_block_size"),
        custom_all_reduce=bool(a.get("custom_all_reduce", True)),
        default_block_size=a.get("default_block_size"),
        source=e.get("source", ""),
    )


class MigProfile(NamedTuple):
    """One MIG profile of a card: a GPU of its own size (``gpu``), and the slices it takes."""

    name: str  # "3g.40gb"
    gpu: GPU
    compute_slices: int
    memory_slices: int
    total_compute_slices: int
    total_memory_slices: int


_MIG_SUFFIX = lazy_re.compile(r"^(.*?)[\s:_/-]*(?:mig[\s:_-]*)?(\d+g\.\d+gb)$", re.IGNORECASE)


def mig_profiles(gpu: GPU) -> list[MigProfile]:
    """The card's MIG profiles (data/gpus.json ``mig_profiles``), smallest first; [] without MIG or for a MIG instance."""
    if " MIG " in gpu.name:
        return []
    e = next((x for x in _entries() if x["name"] == gpu.name), None)
    if e is None or not e.get("mig"):
        return []
    spec = _catalog()["mig_profiles"][e["mig"]]
    out = [_mig_instance(gpu, name, c, m, spec) for name, (c, m) in spec["profiles"].items()]
    return sorted(out, key=lambda p: (p.memory_slices, p.compute_slices))


def _mig_instance(card: GPU, name: str, compute: int, memory: int, spec: dict) -> MigProfile:

    mem_share = memory / spec["memory_slices"]
    g = card._replace(
        name=f"{card.name} MIG {name}",
        total_bytes=int(card.total_bytes * mem_share),
        total_source=f"derived: {card.name} total × {memory}/{spec['memory_slices']} memory slices ({spec['source']})",
        bandwidth_gbs=card.bandwidth_gbs * mem_share,
        bf16_tflops=card.bf16_tflops * compute / spec["compute_slices"],
        interconnect="none",  # one MIG instance is one device: no NVLink or P2P to another instance
        p2p=False,
        nvls=False,
    )
    return MigProfile(name, g, compute, memory, spec["compute_slices"], spec["memory_slices"])


def lookup_gpu(name: str | None, memory_gib: float | None = None) -> GPU:
    """Resolve a GPU by name; ``memory_gib`` overrides the catalog total. ``A100-80GB MIG 3g.40gb`` (or
    ``A100-80GB:3g.40gb``) is that MIG instance: a GPU of its own size."""
    if memory_gib is not None and memory_gib <= 0:
        raise InputError(f"--gpu-memory-gib must be positive, got {memory_gib}")
    m = _MIG_SUFFIX.match(name.strip()) if name and re.search(r"\dg\.\d+gb\s*$", name.strip(), re.IGNORECASE) else None
    if m and m.group(1):
        card = lookup_gpu(m.group(1), None)
        prof = next((p for p in mig_profiles(card) if p.name == m.group(2).lower()), None)
        if prof is None:
            have = ", ".join(p.name for p in mig_profiles(card)) or "none in the catalog"
            raise UnknownGPUError(f"{card.name} has no MIG profile {m.group(2)!r} (profiles: {have})")
        if memory_gib is not None:

            return prof.gpu._replace(total_bytes=int(round(memory_gib * GiB)), total_source="--gpu-memory-gib")
        return prof.gpu
    if not name:
        if memory_gib is None:
            raise InputError("no GPU given: use --gpu NAME (e.g. --gpu A100-80GB) or --gpu-memory-gib X")
        # an unnamed card: an Ampere-class CUDA GPU of that size (say so in the plan: total_source)
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
        # "a100 80gb sxm4" -> try dropping form-factor words
        for suffix in ("sxm4", "sxm5", "sxm", "hbm3"):
            if key.endswith(suffix) and key[: -len(suffix)] in _index():
                e = _index()[key[: -len(suffix)]]
                break
    if e is None:
        keys = list(_index())
        from oomguard.inputs.suggest import close_matches

        close = close_matches(key, keys, n=5, cutoff=0.5)
        names = sorted({_index()[k]["name"] for k in close})
        hint = f"; did you mean {', '.join(names)}?" if names else "; docs/gpus.md lists the catalog"
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
