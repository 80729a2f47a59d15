"""When a GPU OOM happened, from its own numbers: what the process held against what the model weighs.

Issue 16: an OOM whose report shows no phase line (no "Loading weights", no traceback frame) still carries facts
about its phase. vLLM's start-up fills the GPU in order: the weights (the process's PyTorch allocations grow up to
the weights per GPU), then the profile run (weights + the activations of max_num_batched_tokens tokens), then the
KV cache (up to utilization x total), then CUDA graphs, then requests. torch's message says how much this process's
tensors held when the allocation failed ("Of the allocated memory X is allocated by PyTorch", the old "X already
allocated", else "this process has X in use", which also counts the CUDA context), and which other processes held
the rest of the device ("Process N has X memory in use"). Set against the weights per GPU:

- held below the weights: they were still being loaded (``size:held-below-weights``);
- held about the weights: loading had just finished (the weights' post-processing, or the profile's first
  allocations: ``size:held-near-weights``);
- held well above the weights: it got past loading (``size:held-above-weights``);
- other processes hold a share of the device (``size:others-hold``): the memory vLLM expected was not there;
- some of it sits in CUDA graphs' private pools (``size:graph-pools``): capture had begun.

Each fact is a feature the scorer weighs (its prior in ``src/oomguard/data/diagnose_priors.json``, its weight fitted
by ``scripts/train_diagnose.py``) and reads in ``--explain`` with its arithmetic. ``settle`` says which missing
fact would decide a phase the report leaves open.
"""

from __future__ import annotations

from typing import Any

from oomguard.records import record

# How far a weights estimate may be off, by its source: vLLM's own "Model loading took" figure and the config's
# arithmetic are close (the config leaves out small buffers); a name's rounded parameter count ("7B" is 7.6B for
# Qwen2.5-7B, +8 %) and its guessed bytes per parameter are not.
# Names round the count down more often than up, so the estimate is surer as a floor than as a ceiling: (below,
# above) shares.
ESTIMATE_MARGIN = {"logged": (0.05, 0.05), "config": (0.05, 0.08), "name": (0.1, 0.2)}
# What a process holds besides its tensors: the CUDA context, cuBLAS / NCCL workspaces (0.3-1 GiB on NVIDIA GPUs).
# Only subtracted when torch's figure is the process's whole in-use memory.
NON_TORCH_GIB = 0.75
# Beyond the weights, a later phase adds at least this much (the profile's activations, the KV cache).
LATER_PHASE_MIN_GIB = 0.5
# Other processes holding less than this share of the device are noise (a monitoring agent, another context).
OTHERS_SHARE = 0.1


@record(frozen=True)
class Fact:
    feature: str
    why: str


def held_gib(numbers: dict[str, Any]) -> tuple[float, str] | None:
    """What this process's tensors held when the allocation failed (GiB), and which of torch's figures says so."""
    for key, how in (("torch_allocated_gib", "allocated by PyTorch"), ("allocated_gib", "already allocated")):
        value = numbers.get(key)
        if isinstance(value, (int, float)) and value >= 0:
            return float(value), how
    value = numbers.get("in_use_gib")
    if isinstance(value, (int, float)) and value >= 0:
        how = f"this process's {value:.2f} GiB in use less ~{NON_TORCH_GIB} GiB of CUDA context"
        return max(0.0, float(value) - NON_TORCH_GIB), how
    return None


def others_gib(numbers: dict[str, Any]) -> float | None:
    """Memory other processes held on the device, from torch's list of processes (None when it lists none)."""
    procs = [float(p) for p in numbers.get("processes_gib") or () if isinstance(p, (int, float))]
    if not procs:
        return None
    own = numbers.get("in_use_gib")
    if not isinstance(own, (int, float)):
        # torch names its own process by pid only: the smallest entry that can hold this process's tensors
        tensors = numbers.get("torch_allocated_gib") or numbers.get("allocated_gib") or 0.0
        candidates = [p for p in procs if p >= tensors]
        own = min(candidates) if candidates else max(procs)
    rest = list(procs)
    for i, p in enumerate(rest):
        if abs(p - own) < 0.01:
            del rest[i]  # this process's own entry (a container's NVML may list it under another pid, or not at all)
            break
    return sum(rest)


def margin_of(how: str) -> tuple[float, float]:
    if how == "logged":
        return ESTIMATE_MARGIN["logged"]
    return ESTIMATE_MARGIN["config"] if how.startswith("from the model's config") else ESTIMATE_MARGIN["name"]


def memory_facts(numbers: dict[str, Any], ctx: Any, collector: Any = None) -> list[Fact]:
    """The phase facts of one GPU OOM's numbers (see the module docstring)."""
    out: list[Fact] = []
    total = numbers.get("total_gib") or ctx.gpu_total_gib
    held = held_gib(numbers)
    weights = ctx.weights_per_gpu_gib(collector)
    offload = ctx.arg("cpu_offload_gb")
    if held is not None and weights is not None:
        h, held_how = held
        w, how = weights
        if isinstance(offload, (int, float)) and not isinstance(offload, bool) and 0 < offload < w:
            w -= offload  # --cpu-offload-gb keeps that much of the weights in host memory
            how += f", less --cpu-offload-gb {offload:g}"
        below, above = margin_of(how)
        said = (f"the process held {h:.2f} GiB ({held_how}) against weights of ~{w:.1f} GiB per GPU ({how}, "
                f"-{below:.0%}/+{above:.0%})")
        if h < w * (1 - below):
            out.append(Fact("size:held-below-weights", said + ": it died before the weights were all loaded"))
        elif h > w * (1 + above) + LATER_PHASE_MIN_GIB:
            out.append(Fact("size:held-above-weights", said + ": the weights were loaded, it died in a later phase"))
        else:
            out.append(Fact("size:held-near-weights", said + ": loading had just finished (post-processing of the "
                            "weights, or the profile run's first allocations)"))
    pools = numbers.get("graph_pools_gib")
    if isinstance(pools, (int, float)) and pools > 0:
        # torch names this figure only when CUDA graphs hold memory: capture had begun (or was done)
        out.append(Fact("size:graph-pools", f"{pools * 1024:.0f} MiB of it in CUDA graphs' private pools: graphs had "
                        "been captured, or were being captured"))
    others = others_gib(numbers)
    if others is not None and total and others >= max(OTHERS_SHARE * total, 1.0):
        out.append(Fact("size:others-hold", f"other processes held {others:.2f} GiB of the {total:.1f} GiB device "
                        "(torch's list of processes): the memory vLLM expected was not free"))
    return out


def largest_tensor_gib(description: Any) -> float | None:
    """The largest single weight tensor of the model as vLLM allocates it (TP 1), in GiB: the embedding / lm_head
    (vocab x hidden), the merged gate_up projection (2 x intermediate x hidden), or a layer's fused experts
    (experts x 2 x expert intermediate x hidden). An allocation larger than this is not a weight."""
    hidden, vocab = description.hidden_size, description.vocab_size
    sizes = [vocab * hidden, 2 * description.intermediate_size * hidden]
    moe = description.moe
    if moe is not None:
        sizes.append(moe.num_experts * 2 * moe.expert_intermediate_size * hidden)
    biggest = max(sizes)
    return biggest * description.dtype_bytes / (1 << 30) if biggest > 0 else None


# What each missing fact would tell, in the order a reader can most easily supply them.
_SETTLE_PARTS = (
    ("lines", ("the log lines before the error (vLLM's 'Loading weights', 'Model loading took', 'Capturing CUDA "
               "graphs', request lines) or the whole traceback")),
    ("held", "torch's whole out-of-memory message (what it says the process held, against the weights)"),
    ("weights", "--model (or the model's size in its name) to weigh its weights against the GPU"),
    ("gpu", "--gpu to know the GPU's capacity"),
)


def settle(active: set[str], numbers: dict[str, Any] | None, ctx: Any, collector: Any = None) -> str | None:
    """What would settle the phase of an OOM the report leaves open: the facts it lacks, named."""
    missing = set()
    if "oom:no-phase" in active:
        missing.add("lines")
    if numbers is None or held_gib(numbers) is None:
        missing.add("held")
    if ctx.weights_per_gpu_gib(collector) is None:
        missing.add("weights")
    if not ((numbers or {}).get("total_gib") or ctx.gpu_total_gib or ctx.mentioned_gpu_gib):
        missing.add("gpu")
    parts = [text for key, text in _SETTLE_PARTS if key in missing]
    if not parts:
        return None
    return "; ".join(parts) + " would settle the phase"


# Release suffixes that do not change a model's weights (a base model and its chat tune have the same tensors).
_RELEASE_SUFFIXES = ("-instruct", "-chat", "-it", "-hf", "-base")


def _stem(name: str) -> str:
    base = name.strip().split()[0].rstrip("/").rsplit("/", 1)[-1].lower() if name.strip() else ""
    changed = True
    while changed:
        changed = False
        for suffix in _RELEASE_SUFFIXES:
            if base.endswith(suffix):
                base, changed = base[: -len(suffix)], True
    return base


def catalog_sibling(model: str) -> str | None:
    """The bundled catalog's entry with the same weights as ``model`` under another release suffix
    ("meta-llama/Llama-4-Scout-17B-16E" -> the catalog's "-Instruct"); None when there is none, or when the name
    names a quantization (the sibling's bytes would not be this model's)."""
    import os

    from oomguard.diagnose.context import bytes_per_param_from_name
    from oomguard.inputs.model_config import CATALOG_DIR  # a path string

    stem = _stem(model)
    if not stem or bytes_per_param_from_name(model) != 2.0 or not os.path.isdir(CATALOG_DIR):
        return None
    for entry in sorted(n for n in os.listdir(CATALOG_DIR) if os.path.isdir(os.path.join(CATALOG_DIR, n))):
        if _stem(entry.split("__", 1)[-1]) == stem:
            return entry.replace("__", "/", 1)
    return None
