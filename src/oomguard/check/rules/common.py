"""Small helpers the rule families share: formatting, rounding, and searches over re-plans.

Searches are pure: they take the context and the varied quantity, re-plan with
edited flags (``CheckContext.replan``) and never mutate the launch.
"""

from __future__ import annotations

from collections.abc import Iterable

from oomguard.check.finding import Edit
from oomguard.model.failures import FailureClass
from oomguard.units import GiB

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from oomguard.check.context import CheckContext

# S2's table of per-step token budgets, largest first; 8192 is vLLM's own
# default on large GPUs and what S1's operators used.
CHUNK_CANDIDATES = (8192, 4096, 2048, 1024, 512, 256)


def gib(n: float) -> str:
    return f"{n / GiB:,.2f} GiB"


def round_down(x: float, step: float) -> float:
    return (int(x / step + 1e-9)) * step


def round_len(n: int) -> int:
    """A max-model-len people write: a multiple of 1024 above 8K, of 256 above 1K."""
    if n >= 8192:
        return n // 1024 * 1024
    if n >= 1024:
        return n // 256 * 256
    return max(16, n // 16 * 16)


def util_str(u: float) -> float:
    return round(u, 2)


def peak_activation(plan) -> int:
    return max(r.activation.bytes for r in plan.ranks)


def starts(plan) -> bool:
    return plan is not None and plan.starts


def memory_failure(plan) -> bool:
    return plan is not None and plan.failure in (
        FailureClass.PROFILE_OOM,
        FailureClass.NO_KV_MEMORY,
        FailureClass.KV_TOO_SMALL,
        FailureClass.WEIGHTS_OOM,
        FailureClass.CUDAGRAPH_OOM,
        FailureClass.STARTUP_FREE_MEMORY,
    )


def headroom_after_weights(ctx: CheckContext, plan) -> int:
    """What one GPU has for activations, KV and graphs once weights, the CUDA
    context, non-torch memory and other tenants are in (tightest rank)."""
    r = max(plan.ranks, key=lambda x: x.weights.bytes + x.non_torch.bytes)
    # outside_bytes: the context, other tenants and early communicators, as this release counts them
    return r.total_bytes - r.weights.bytes - r.non_torch.bytes - plan.outside_bytes


_BUDGET_FAILURES = (FailureClass.PROFILE_OOM, FailureClass.NO_KV_MEMORY, FailureClass.WEIGHTS_OOM, FailureClass.STARTUP_FREE_MEMORY)


def suggest_chunk(ctx: CheckContext, extra: Iterable[Edit] = (), *, share: float = 0.10):
    """The largest per-step token budget from S2's table whose activation peak stays
    under ``share`` of the headroom after weights and whose launch no longer fails
    because of it (it may still fail for another reason, e.g. a max-model-len the pool
    cannot hold, which another rule fixes). When none stays under the share, the
    smallest that passes.

    Returns ``(tokens, plan, edits)``; ``edits`` include ``extra`` and, when the budget
    drops below max-num-seqs, the matching max-num-seqs. ``(None, None, [])`` when even
    256 does not start.
    """
    base = [e for e in extra if e.dest not in ("max_num_batched_tokens", "max_num_seqs")]
    seqs = ctx.plan.settings.max_num_seqs if ctx.plan is not None else None
    tried = []
    for t in CHUNK_CANDIDATES:
        edits = base + [ctx.edit("max_num_batched_tokens", t)]
        if seqs is not None and t < seqs:
            edits.append(ctx.edit("max_num_seqs", t))
        p = ctx.replan(edits)
        if not p.starts and p.failure in _BUDGET_FAILURES:
            continue  # still the activation peak's fault; other failures are other rules' business
        tried.append((t, p, edits))
        if peak_activation(p) <= share * max(headroom_after_weights(ctx, p), 1):
            return t, p, edits
    if tried:
        return tried[-1]
    return None, None, []


def world_of(flags: dict) -> int:
    return int(flags.get("tensor_parallel_size") or 1) * int(flags.get("pipeline_parallel_size") or 1)


def valid_tp(model, tp: int) -> bool:
    if model.family == "mla":
        return True
    if model.num_attention_heads % tp:
        return False
    if tp > model.num_kv_heads and tp % model.num_kv_heads:
        return False
    return True


def set_json_key(value, key: str, new) -> dict:
    """A copy of a JSON flag value with one top-level key changed (None removes it)."""
    out = dict(value) if isinstance(value, dict) else {}
    if new is None:
        out.pop(key, None)
    else:
        out[key] = new
    return out
