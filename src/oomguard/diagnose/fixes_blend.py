"""Fixes that do not hang on the class being exactly right: the runner-up classes' fixes, and the flags the report
itself names, join the verdict's list when the class is uncertain.

A verdict's class is a probability. When it is not a sure one (below ``BLEND_BELOW``), the fixes that would answer
the next classes (those at least ``ALT_MIN`` likely) are merged in: each fix is scored by the probability of every
class that proposes it, discounted by its place in that class's ordered list (``1 / (place + 1)``), so a fix that
two likely classes both propose leads, and a runner-up's first fix can pass the top class's third. A flag the report
suggests changing ("lowering --max-num-seqs helped", vLLM's own "Try increasing `gpu_memory_utilization`") that no
builder proposed is added with the standard step for that flag. Every fix says why it is where it is
(``Fix.chosen``: shown by ``--explain`` and in the JSON).

The two thresholds were chosen by leave-one-batch-out cross-validation of the fix-flag rate
(benchmarks/diagnose_accuracy.py --cv-by batch; see docs/diagnose.md "Which fix comes first"): they are two numbers
over the whole corpus, the votes they combine are refitted per fold.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from oomguard.diagnose.classes import FailureClass as FC
from oomguard.diagnose.context import Context
from oomguard.diagnose.events import CHOOSE_VALUE, Fix, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.fixes_rank import BLENDED
import oomguard.lazy_re as lazy_re

# A verdict at least this likely keeps its own fixes only (its class's facts decide them). LOBO fix flag among the
# first two, with ALT_MIN 0.1: 0.4 -> 76.0 %, 0.6 -> 77.0 %, 0.8 -> 79.0 %, always -> 79.0 % (0.05: 79.5 %).
BLEND_BELOW = 0.8
# A runner-up class joins with its fixes when at least this likely.
ALT_MIN = 0.1
# At most this many fixes after blending (the runner-ups add candidates, not a catalogue).
MAX_FIXES = 6

Builder = Callable[[FC, list[Any], Collector, Context], list[Fix]]


def top_probability(v: Verdict) -> float:
    """The verdict's probability before the paraphrase cap: a words-only verdict is capped at 0.5 for display, but its
    share against the runner-ups is what is left once they are counted."""
    if v.tier == "paraphrase":
        return max(v.confidence, 1.0 - sum(p for _c, p in v.alternatives))
    return v.confidence


def blend(v: Verdict, build: Builder, members: list[Any], col: Collector, ctx: Context) -> list[Fix]:
    """The verdict's fixes merged with the runner-up classes' (see the module docstring); its own list unchanged when
    the class is sure enough or no runner-up is likely enough. ``build(cls, members, col, ctx)`` gives a class's
    ordered fixes (the builder, the votes and the families of ``fixes.attach_fixes``)."""
    p_top = top_probability(v)
    if p_top >= BLEND_BELOW:
        return v.fix
    alts = []
    for name, p in v.alternatives:
        if p < ALT_MIN:
            continue
        try:
            cls = FC(name)
        except ValueError:
            continue
        alts.append((cls, p))
    if not alts:
        return v.fix
    scored: dict[str, float] = {}
    first: dict[str, Fix] = {}
    whose: dict[str, list[str]] = {}
    for cls, p, fixes in [(v.cls, p_top, v.fix)] + [(c, p, build(c, members, col, ctx)) for c, p in alts]:
        for place, f in enumerate(fixes):
            scored[f.flag] = scored.get(f.flag, 0.0) + p / (place + 1)
            whose.setdefault(f.flag, []).append(f"{cls.value} {p:.2f}")
            if f.flag not in first:
                first[f.flag] = f
                if cls != v.cls:
                    f.why = f"if it is {cls.value} (probability {p:.2f}): {f.why}"
    order = sorted(first, key=lambda flag: -scored[flag])  # stable: the top class's order on ties
    out = []
    for flag in order[:MAX_FIXES]:
        f = first[flag]
        f.chosen = (f"{f.chosen + '; ' if f.chosen else ''}{BLENDED}: "
                    f"proposed by {', '.join(whose[flag])} (score {scored[flag]:.2f})")
        out.append(f)
    return out


# --- a flag the report suggests that no builder proposed ------------------------------------------------------
_UP = lazy_re.compile(r"increas|rais|higher|bigger|larger|more|提高|增大|调高|加大", re.IGNORECASE)
_DOWN = lazy_re.compile(r"lower|reduc|decreas|smaller|less|fewer|调小|调低|减小|降低", re.IGNORECASE)
# Classes where more of the budget is the fix (the KV cache is short); elsewhere less of it leaves room.
_WANTS_MORE_BUDGET = frozenset({FC.KV_TOO_SMALL, FC.NO_KV_MEMORY, FC.MAMBA_STATE_LIMIT})


def _direction(text: str, cls: FC) -> int:
    up, down = bool(_UP.search(text)), bool(_DOWN.search(text))
    if up != down:
        return 1 if up else -1
    return 1 if cls in _WANTS_MORE_BUDGET else -1


def suggested_fix(flag: str, hit_text: str, v: Verdict, col: Collector, ctx: Context) -> Fix | None:
    """The standard step for a flag the report suggests (``None`` for a flag without one: oomguard would have no
    value to give it). The direction is the suggestion's own word ("increase", "lower", 调小) or the class's."""
    from oomguard.diagnose.remedy import default_util, int_arg, lower_seqs, lower_tokens, more_tp, round_util, util_of

    why = f"the report suggests changing it ({hit_text.strip()[:120]})"
    if flag == "--gpu-memory-utilization":
        util = util_of(ctx, col, None) or default_util(ctx)
        step = 0.05 * _direction(hit_text, v.cls)
        return Fix(flag, round_util(max(0.1, util + step)), why)
    if flag == "--max-num-seqs":
        return Fix(flag, lower_seqs(ctx), why)
    if flag == "--max-num-batched-tokens":
        return Fix(flag, lower_tokens(ctx), why)
    if flag == "--max-model-len":
        current = int_arg(ctx, "max_model_len") or ctx.config_max_len
        return Fix(flag, max(1024, current // 2) if current else CHOOSE_VALUE, why)
    if flag == "--tensor-parallel-size":
        return more_tp(ctx, why)
    if flag == "--cpu-offload-gb":
        return Fix(flag, max(4, 2 * (int_arg(ctx, "cpu_offload_gb") or 0)), why)
    if flag == "--enforce-eager":
        return None if ctx.enforce_eager else Fix(flag, True, why)
    if flag == "--kv-cache-dtype":
        return Fix(flag, "fp8", why)
    if flag == "--enable-chunked-prefill":
        return Fix(flag, True, why)
    if flag == "--disable-custom-all-reduce":
        return Fix(flag, True, why)
    if flag == "--max-cudagraph-capture-size":
        return Fix(flag, 64, why)
    if flag == "--swap-space":
        swap = int_arg(ctx, "swap_space")
        return Fix(flag, 0 if _direction(hit_text, v.cls) < 0 else max(8, 2 * (swap or 4)), why)
    return None
