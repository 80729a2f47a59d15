"""Alert thresholds from a launch's plan: pure arithmetic on ``Plan.to_dict()``.

- **GPU memory**: vLLM preallocates its budget at start-up (weights, the profiled
  activation peak, non-torch memory, CUDA graphs and the KV pool: ``requested_gib``, or
  the sum of the parts when ``--kv-cache-memory-bytes`` fixes the pool), so a card sits
  at that fraction for the server's whole life. A fixed 95 % alert fires forever for a
  launch at ``--gpu-memory-utilization 0.95``. The threshold is the expected fraction
  plus half of what is left above it (``GPU_MEM_MARGIN_SHARE``): for vLLM's default
  utilization, 0.90, that is 0.95, the old default.
- **KV cache**: the alert means "fewer than one full-length request's blocks are left":
  ``1 - max_model_len / kv_cache_tokens``, floored to 0.01 and kept within
  ``KV_RANGE``. When one full-length request needs half the pool or more (S1: one
  1M-token request fills it), high usage is the normal state of a long request; the
  threshold is then ``KV_RANGE``'s top and the description says why.
- **Preemptions**: when the pool holds ``max_num_seqs`` requests at full length, vLLM
  never has to preempt, and one preemption means the plan is wrong (another process
  took memory, the version differs): the alert holds for ``UNEXPECTED_PREEMPTION_FOR``.
  Otherwise preemptions are the expected price of admitting more requests than fit at
  full length: the alert holds for the default 10 minutes (sustained pressure).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from oomguard.export.alerts import AlertSettings

GPU_MEM_MARGIN_SHARE = 0.5
GPU_MEM_MAX = 0.995
KV_RANGE = (0.5, 0.98)
UNEXPECTED_PREEMPTION_FOR = "1m"


def expected_gpu_fraction(plan: dict[str, Any]) -> tuple[float, str] | None:
    """(fraction of the card the launch holds, how it was derived), the largest over its GPUs."""
    best: tuple[float, str] | None = None
    stages = plan.get("per_stage") or ([plan["per_gpu"]] if isinstance(plan.get("per_gpu"), dict) else [])
    for g in stages:
        total = g.get("total_gib")
        if not total:
            continue
        parts = sum(float(g.get(k) or 0) for k in ("weights_gib", "activation_peak_gib", "non_torch_gib",
                                                     "cuda_graph_gib", "kv_cache_gib", "reserved_gib"))
        # the budget is --gpu-memory-utilization of the card (requested_gib is it, rounded to 0.01 GiB)
        util = plan.get("gpu_memory_utilization")
        budget = float(util) * float(total) if isinstance(util, (int, float)) else float(g.get("requested_gib") or 0)
        held = max(budget, parts)
        frac = min(1.0, held / float(total))
        why = f"the launch holds {held:.2f} GiB of {float(total):.2f} GiB per GPU ({frac:.3f} of the card)"
        if best is None or frac > best[0]:
            best = (frac, why)
    return best


def settings_from_plan(plan: dict[str, Any], base: AlertSettings, *, source: str,
                       explicit: frozenset[str] = frozenset()) -> AlertSettings:
    """``base`` with the thresholds the plan implies (those named in ``explicit`` are kept as given)."""
    changes: dict[str, Any] = {"source": source}
    held = expected_gpu_fraction(plan)
    if held is not None and "gpu_mem_threshold" not in explicit:
        frac, why = held
        threshold = min(GPU_MEM_MAX, math.floor((frac + (1 - frac) * GPU_MEM_MARGIN_SHARE) * 1000 + 1e-6) / 1000)
        changes["gpu_mem_threshold"] = threshold
        if threshold > frac:
            changes["gpu_mem_why"] = f"{why}; alert at {threshold:g}, half-way from there to the full card"
        else:
            changes["gpu_mem_why"] = (f"{why}: more than {GPU_MEM_MAX:g}, so this alert fires while it runs; lower "
                                      "--gpu-memory-utilization")
    tokens = plan.get("kv_cache_tokens")
    max_len = plan.get("max_model_len")
    if tokens and max_len and "kv_threshold" not in explicit:
        share = float(max_len) / float(tokens)
        low, high = KV_RANGE
        if share >= 0.5:
            changes["kv_threshold"] = high
            changes["kv_why"] = (f"one {int(max_len):,}-token request needs {share:.0%} of the {int(tokens):,}-token pool, "
                                 f"so a long request alone fills it: alert only above {high:g}")
        else:
            t = min(high, max(low, math.floor((1 - share) * 100 + 1e-6) / 100))
            changes["kv_threshold"] = t
            changes["kv_why"] = (f"above {t:g} fewer than one {int(max_len):,}-token request's blocks are left of the "
                                 f"{int(tokens):,}-token pool")
    seqs = plan.get("max_num_seqs")
    conc = plan.get("max_concurrency")
    if seqs and conc is not None and "preemption_for" not in explicit:
        if float(conc) >= float(seqs):
            changes["preemption_for"] = UNEXPECTED_PREEMPTION_FOR
            changes["preemption_why"] = (f"The plan says the pool holds all {int(seqs)} sequences at full length "
                                         f"({float(conc):.1f}): a preemption means memory is not what was planned")
        else:
            changes["preemption_why"] = (f"The plan: the pool holds {float(conc):.1f} requests at full length for "
                                         f"--max-num-seqs {int(seqs)}, so preemptions under full load are expected; "
                                         "sustained ones are not")
    return replace(base, **changes)
