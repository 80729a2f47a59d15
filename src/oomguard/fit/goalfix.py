"""Fixes that keep the goal: ranked, plan-verified edits of a launch that will not start.

The user's ``--max-model-len``, concurrency and features are the goal. An edit
of the engine around them (the per-step token budget, a little more of a
dedicated card, the KV pool's pinned size, eager mode, an fp8 KV cache) is
tried first; each candidate is re-planned with the full planner
(``plan_launch`` through the caller's ``planner``) and kept only when it
starts, leaves the headroom floor free at the prefill peak, and still holds
the goal. Only when nothing keeps the goal is ``--max-model-len`` lowered, to
the longest that the best engine edit fits, and the option says so.

``rank_key`` is the one ranking both ``oomguard check --fix`` and
``oomguard fit --from`` apply, so their first choice is the same edit.
Everything here is pure: the planner is passed in.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from oomguard.fit.space import HEADROOM_FLOOR_BYTES, HEADROOM_FLOOR_SHARE
from oomguard.model.failures import FailureClass
from oomguard.records import NamedTuple
from oomguard.units import GiB, MiB

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

# Start-up failures an engine edit can cure. WEIGHTS_OOM needs more GPUs or a smaller checkpoint (fit's job).
CURABLE = (
    FailureClass.PROFILE_OOM,
    FailureClass.NO_KV_MEMORY,
    FailureClass.KV_TOO_SMALL,
    FailureClass.CUDAGRAPH_OOM,
)
# S2's table, largest first (vLLM's own defaults are 2048-16384).
TOKEN_BUDGETS = (8192, 4096, 2048, 1024, 512, 256)
UTIL_STEPS = (0.01, 0.02, 0.03, 0.05)  # "a slightly higher utilization on a dedicated card"
UTIL_CAP = 0.95
KV_STEP = 256 * MiB
FP8_KV = "fp8"

# Trade-off weights on one scale (1.0 ≈ a change a careful operator would think twice about).
# A token budget of 2048 or more costs long prompts almost nothing (the attention work is the
# same in any chunking); S2's operators saw 256 halve throughput and 1024 restore it.
_BUDGET_COST = {256: 2.5, 512: 1.5, 1024: 0.5}
_BUDGET_COST_LARGE = 0.25
_UTIL_COST_PER_0_01 = 0.5  # less room on the card for the CUDA context, NCCL and spikes
_KVMEM_COST = 0.5  # a larger pinned pool: the headroom is the operator's to keep
_EAGER_COST = 2.0  # every decode step pays kernel-launch overhead
_FP8_COST = 3.0  # accuracy: check your evals
_LENGTH_COST = 10.0  # the goal itself
_DEFAULT_LENGTH_COST = 1.0  # a length the launch never asked for (the model's maximum): cheaper than fp8's accuracy


SHARED_MARGIN_BYTES = 2 * GiB  # room left for other tenants to grow (S1: "try 0.85 or 0.8")


def context_bytes(plan) -> int:
    """The CUDA context, plus NCCL's communicator state when the launch spans GPUs."""
    return _context_bytes() + (200 * MiB if plan.settings.world_size > 1 else 0)


def shared_util_cap(plan, other_use_bytes: int, step: float = 0.05) -> float | None:
    """The highest --gpu-memory-utilization (in ``step``s) that leaves the other tenants room to
    double (at least 2 GiB) on a shared card; None on a dedicated one."""
    if other_use_bytes <= 0:
        return None
    total = plan.gpu.total_bytes
    want = max(SHARED_MARGIN_BYTES, other_use_bytes)
    free = total - context_bytes(plan) - other_use_bytes
    return round(int((free - want) / total / step + 1e-9) * step, 2)


def headroom_floor(total_bytes: int, share: float = HEADROOM_FLOOR_SHARE, floor_bytes: int = HEADROOM_FLOOR_BYTES) -> int:
    """Card memory that must stay free at the prefill peak: a share of the card, never below the floor."""
    return max(int(floor_bytes), int(share * total_bytes))


def graph_slack(plan) -> int:
    """What CUDA graphs captured outside vLLM's budget (before 0.20, or with the profiler estimate off)
    may take beyond their estimate on the tightest GPU: a fix leaves it free on top of the floor."""
    s = plan.settings
    if s.estimate_cudagraphs or s.kv_cache_memory_bytes is not None:
        return 0
    return max(max(0, (r.cuda_graph.high or r.cuda_graph.bytes) - r.cuda_graph.bytes) for r in plan.ranks)


def util_for_headroom(plan, other_use_bytes: int = 0, floor_bytes: int | None = None, extra_bytes: int = 0, step: float = 0.01) -> float:
    """The largest --gpu-memory-utilization (in ``step``s) that leaves ``floor + extra`` free at the
    prefill peak on the tightest GPU (``headroom``): the one answer check's utilization rules and
    fit give. With a profiled pool the card holds the budget plus the graphs captured outside it."""
    total = plan.gpu.total_bytes
    floor = headroom_floor(total) if floor_bytes is None else floor_bytes
    outside = 0 if plan.settings.estimate_cudagraphs else max(r.cuda_graph.bytes for r in plan.ranks)
    room = total - _context_bytes() - other_use_bytes - outside - floor - extra_bytes
    u = int(room / total / step + 1e-9) * step
    return round(max(0.0, u), 2)


def _context_bytes() -> int:
    from oomguard.model.planner import CUDA_CONTEXT_BYTES

    return CUDA_CONTEXT_BYTES


def headroom(plan, other_use_bytes: int = 0) -> int:
    """Card memory free at the prefill peak on the tightest rank (CUDA context and other tenants counted)."""
    worst = 0
    for r in plan.ranks:
        used = r.weights.bytes + r.non_torch.bytes + r.activation.bytes + r.cuda_graph.bytes + r.kv_bytes
        worst = max(worst, used)
    return plan.gpu.total_bytes - worst - _context_bytes() - other_use_bytes


def kv_spare(plan) -> int:
    """KV pool bytes beyond one max-model-len request (and the null block) on the tightest rank."""
    t = plan.tight_rank
    return t.kv_bytes - t.layout.bytes_per_block - plan.one_request_bytes


def activation_slack(plan) -> int:
    """How much more the activation peak may be than estimated (the estimate's high end)."""
    return max((r.activation.high or r.activation.bytes) - r.activation.bytes for r in plan.ranks)


class Goal(NamedTuple):
    """What a fix must keep."""

    max_model_len: int
    concurrency: int | None = None  # requests that must fit together
    avg_input_len: int | None = None  # their length (default: max-model-len)
    user_length: bool = True  # False: the length is the model's default, which the launch did not ask for

    def holds(self, plan) -> bool:
        if plan.settings.max_model_len < self.max_model_len and self.user_length:
            return False
        if self.concurrency:
            need = self.concurrency * min(self.avg_input_len or self.max_model_len, self.max_model_len)
            return plan.kv_cache_tokens >= need
        return True


class Option(NamedTuple):
    """One verified edit: flags by vLLM dest (value None removes), the plan it gives, and its cost."""

    edits: tuple[tuple[str, Any], ...]
    plan: Any
    keeps_goal: bool
    headroom_bytes: int
    floor_bytes: int
    kv_spare_bytes: int
    robust: bool  # starts even at the high end of the activation estimate
    cost: float
    tradeoffs: tuple[str, ...] = ()

    @property
    def flags(self) -> dict:
        return dict(self.edits)

    @property
    def floor_ok(self) -> bool:
        return self.headroom_bytes >= self.floor_bytes

    def to_dict(self) -> dict:
        p = self.plan
        return {
            "edits": [{"dest": d, "value": v} for d, v in self.edits],
            "keeps_goal": self.keeps_goal,
            "max_model_len": p.settings.max_model_len,
            "kv_cache_tokens": p.kv_cache_tokens,
            "max_concurrency": round(p.max_concurrency, 2),
            "headroom_gib": round(self.headroom_bytes / GiB, 2),
            "headroom_floor_gib": round(self.floor_bytes / GiB, 2),
            "kv_spare_gib": round(self.kv_spare_bytes / GiB, 2),
            "robust": self.robust,
            "cost": round(self.cost, 2),
            "tradeoffs": list(self.tradeoffs),
        }


def rank_key(o: Option) -> tuple:
    """The order fixes are offered in: the goal, then the floor and robustness, then the trade-offs' cost,
    then the fewest flags changed, then the most headroom."""
    return (not o.keeps_goal, not o.floor_ok, not o.robust, round(o.cost, 2), len(o.edits), -o.headroom_bytes)


def rank(options: list[Option]) -> list[Option]:
    return sorted(options, key=rank_key)


def _costs(base, plan, edits: dict, goal: Goal) -> tuple[float, list[str]]:
    """(weight, trade-off sentences) of the edits, from the base settings to the plan's."""
    s0, s = base.settings, plan.settings
    cost, out = 0.0, []
    if "max_num_batched_tokens" in edits and s.max_num_batched_tokens != s0.max_num_batched_tokens:
        t = s.max_num_batched_tokens
        steps = -(-s.max_model_len // t)
        cost += _BUDGET_COST.get(t, _BUDGET_COST_LARGE if t >= 2048 else 2.5)
        out.append(
            f"token budget {s0.max_num_batched_tokens:,} → {t:,}: a {s.max_model_len:,}-token prompt takes {steps:,} prefill steps"
            + ("; below 1024, short-prompt throughput and TTFT suffer (operators have seen 256 halve throughput)" if t < 1024 else "")
        )
    du = round(s.gpu_memory_utilization - s0.gpu_memory_utilization, 2)
    if "gpu_memory_utilization" in edits and du > 0:
        cost += _UTIL_COST_PER_0_01 * du / 0.01
        out.append(f"--gpu-memory-utilization {s0.gpu_memory_utilization} → {s.gpu_memory_utilization}: a dedicated card only")
    elif "gpu_memory_utilization" in edits and du < 0:
        out.append(f"--gpu-memory-utilization {s0.gpu_memory_utilization} → {s.gpu_memory_utilization}: leaves the other processes on the card room to grow")
    if "kv_cache_memory_bytes" in edits and s.kv_cache_memory_bytes != s0.kv_cache_memory_bytes:
        cost += _KVMEM_COST
        out.append(f"--kv-cache-memory-bytes {(s0.kv_cache_memory_bytes or 0) / GiB:.2f} → {(s.kv_cache_memory_bytes or 0) / GiB:.2f} GiB pinned")
    if s.enforce_eager and not s0.enforce_eager:
        cost += _EAGER_COST
        out.append("--enforce-eager: no CUDA graph memory, slower decode steps")
    if str(s.kv_cache_dtype).startswith("fp8") and not str(s0.kv_cache_dtype).startswith("fp8"):
        cost += _FP8_COST
        out.append("--kv-cache-dtype fp8: half the KV bytes per token, some accuracy cost (check your evals)")
    if s.max_model_len < goal.max_model_len:
        lost = 1 - s.max_model_len / goal.max_model_len
        if goal.user_length:
            cost += _LENGTH_COST + 10 * lost
            out.append(f"--max-model-len {goal.max_model_len:,} → {s.max_model_len:,}: gives up {lost:.0%} of the goal (nothing else fits)")
        else:
            cost += _DEFAULT_LENGTH_COST * (1 + lost)
            out.append(f"max-model-len {s.max_model_len:,} instead of the model's {goal.max_model_len:,} (the launch did not ask for a length)")
    return cost, out


def _round_len(n: int) -> int:
    if n >= 8192:
        return n // 1024 * 1024
    if n >= 1024:
        return n // 256 * 256
    return max(16, n // 16 * 16)


def _levers(base, flags: dict, model, other_use: int, floor: int) -> dict[str, list]:
    """Values worth trying per flag; the first of each list is the launch's own (no edit)."""
    s = base.settings
    out: dict[str, list] = {}
    T = s.max_num_batched_tokens
    budgets = [None] + [t for t in TOKEN_BUDGETS if t < T and t >= 16]
    out["max_num_batched_tokens"] = budgets
    if s.kv_cache_memory_bytes is None:
        utils = [None]
        cap = shared_util_cap(base, other_use)
        if cap is not None and s.gpu_memory_utilization > cap > 0:
            utils = [cap]  # a shared card: the neighbours' room is not ours to give away (OG302)
        elif cap is None:
            for d in UTIL_STEPS:
                u = round(s.gpu_memory_utilization + d, 2)
                if u <= UTIL_CAP + 1e-9:
                    utils.append(u)
        out["gpu_memory_utilization"] = utils
    else:
        t = base.tight_rank
        need = base.one_request_bytes + t.layout.bytes_per_block
        room = max(
            r.total_bytes - r.weights.bytes - r.non_torch.bytes - (r.activation.high or r.activation.bytes) - r.cuda_graph.bytes
            for r in [t]
        ) - _context_bytes() - other_use - floor
        cands = [None]
        want = -(-need // KV_STEP) * KV_STEP
        if want > s.kv_cache_memory_bytes:
            cands.append(int(want))
        most = room // KV_STEP * KV_STEP
        if most > s.kv_cache_memory_bytes and most not in cands:
            cands.append(int(most))
        out["kv_cache_memory_bytes"] = cands
    dtype = [None]
    if str(s.kv_cache_dtype) == "auto" and getattr(model, "dtype_bytes", 2) == 2:
        dtype.append(FP8_KV)
    out["kv_cache_dtype"] = dtype
    eager = [None]
    if not s.enforce_eager and any(r.cuda_graph.bytes > 0 for r in base.ranks):
        eager.append(True)
    out["enforce_eager"] = eager
    return out


def _edit_dict(base, flags: dict, choice: dict) -> dict:
    """The flag edits of one lever choice (chunked prefill on and max-num-seqs within a smaller budget)."""
    s = base.settings
    edits = {k: v for k, v in choice.items() if v is not None}
    t = edits.get("max_num_batched_tokens")
    if t is not None:
        if not s.enable_chunked_prefill and t < s.max_model_len:
            edits["enable_chunked_prefill"] = True
        if s.max_num_seqs > t:
            edits["max_num_seqs"] = t
    return edits


def _option(planner, base, flags: dict, env: dict, edits: dict, goal: Goal, other_use: int, floor: int) -> Option | None:
    p = planner({k: v for k, v in {**flags, **edits}.items() if v is not None}, env)  # None removes a flag
    if not p.starts:
        return None
    cost, trade = _costs(base, p, edits, goal)
    slack = activation_slack(p)
    spare = kv_spare(p)
    hr = headroom(p, other_use)
    floor = floor + graph_slack(p)  # graphs captured outside the budget may take their estimate's high end
    robust = spare >= slack if p.settings.kv_cache_memory_bytes is None else hr >= floor + slack
    return Option(tuple(edits.items()), p, goal.holds(p), hr, floor, spare, robust, cost, tuple(trade))


def goal_options(
    planner: Callable[[dict, dict], Any],
    flags: dict,
    env: dict,
    base,
    *,
    model,
    goal: Goal | None = None,
    other_gpu_use_bytes: int = 0,
    floor_share: float = HEADROOM_FLOOR_SHARE,
    floor_bytes: int = HEADROOM_FLOOR_BYTES,
    max_levers: int = 3,
    top: int = 5,
) -> list[Option]:
    """Ranked, plan-verified edits for a launch whose plan ``base`` does not start (a curable failure).

    Empty when the launch starts or its failure is not one an engine edit cures. The options that
    keep ``goal`` come first; when none does, the best few lower ``--max-model-len`` to what they fit.
    """
    if base is None or base.starts or base.failure not in CURABLE:
        return []
    goal = goal or Goal(base.settings.max_model_len)
    floor = headroom_floor(base.gpu.total_bytes, floor_share, floor_bytes)
    levers = _levers(base, flags, model, other_gpu_use_bytes, floor)
    names = list(levers)
    seen: set = set()
    options: list[Option] = []
    free = [None in levers[n] for n in names]  # a lever without None is forced (a shared card's utilization)
    for values in itertools.product(*(levers[n] for n in names)):
        choice = dict(zip(names, values))
        n_levers = sum(v is not None and f for v, f in zip(values, free))
        if n_levers == 0 or n_levers > max_levers:
            continue
        edits = _edit_dict(base, flags, choice)
        key = tuple(sorted(edits.items(), key=lambda kv: kv[0]))
        if key in seen:
            continue
        seen.add(key)
        o = _option(planner, base, flags, env, edits, goal, other_gpu_use_bytes, floor)
        if o is not None:
            options.append(o)
    keeping = [o for o in options if o.keeps_goal and o.floor_ok]
    if keeping and goal.user_length:
        return _distinct(rank(keeping), top)
    if keeping:  # no length asked for: lowering it competes with the engine edits on cost
        return _distinct(rank(keeping + _relaxed(planner, base, flags, env, levers, names, goal, other_gpu_use_bytes, floor, max_levers)), top)
    return _distinct(rank(_relaxed(planner, base, flags, env, levers, names, goal, other_gpu_use_bytes, floor, max_levers)), top)


def _relaxed(planner, base, flags, env, levers, names, goal, other_use, floor, max_levers) -> list[Option]:
    """Nothing keeps the length: each engine edit with the longest max-model-len it fits (verified)."""
    out = []
    free = [None in levers[n] for n in names]
    for values in itertools.product(*(levers[n] for n in names)):
        if sum(v is not None and f for v, f in zip(values, free)) > max_levers:
            continue
        edits = _edit_dict(base, flags, dict(zip(names, values)))
        p = planner({**flags, **edits}, env)
        if p.failure not in (FailureClass.KV_TOO_SMALL, None) or not p.max_fitting_len:
            continue
        L = min(_round_len(p.max_fitting_len), goal.max_model_len)
        for _ in range(8):
            if L < 16:
                break
            e2 = {**edits, "max_model_len": L}
            if "max_num_batched_tokens" not in e2 and not p.settings.enable_chunked_prefill and p.settings.max_num_batched_tokens > L:
                pass  # an unchunked budget follows the length: vLLM derives it
            o = _option(planner, base, flags, env, e2, Goal(L, goal.concurrency, goal.avg_input_len), other_use, floor)
            if o is not None and o.floor_ok:
                # it keeps the lowered length, not the user's: rebuild with the true goal to mark it so
                cost, trade = _costs(base, o.plan, e2, goal)
                out.append(Option(o.edits, o.plan, not goal.user_length and goal.holds(o.plan), o.headroom_bytes, floor, o.kv_spare_bytes, o.robust, cost, tuple(trade)))
                break
            L = _round_len(int(L * 0.97))
    return out


_DERIVED = ("enable_chunked_prefill", "max_num_seqs")  # follow a smaller token budget; not levers of their own


def levers_of(o: Option) -> frozenset:
    return frozenset(d for d, _ in o.edits if d not in _DERIVED)


def _distinct(options: list[Option], top: int) -> list[Option]:
    """Alternatives, not near-copies: the best option of each set of levers."""
    shown: list[Option] = []
    for o in options:
        mine = levers_of(o)
        if any(levers_of(prev) == mine for prev in shown):
            continue
        shown.append(o)
        if len(shown) >= top:
            break
    return shown


# S2's table: "ordinary online serving" takes 1024; "memory tight" starts at 256.
S2_BUDGETS = (1024, 512, 256)
UNCHUNKED_MIN = 4096  # a whole-prompt step this large is where S2's operators saw the staircase


def unchunked_whole_prompt(plan, flags: dict) -> bool:
    """Chunked prefill is off and vLLM derived the budget: every long prompt is one prefill step (S2)."""
    s = plan.settings
    T = s.max_num_batched_tokens
    return not s.enable_chunked_prefill and "max_num_batched_tokens" not in flags and T >= UNCHUNKED_MIN and T >= s.max_model_len


def _pcie_nccl(plan) -> bool:
    """TP beyond two GPUs without NVLink: vLLM turns custom all-reduce off
    (distributed/device_communicators/custom_all_reduce.py), so every whole-prompt step's
    all-reduces go through NCCL, whose buffers live outside what PyTorch's profile counted."""
    tp = plan.settings.tensor_parallel_size
    return tp > 2 and not getattr(plan.gpu, "nvlink", False)


def headroom_outside_budget(plan) -> int:
    """What the tightest GPU keeps outside vLLM's budget (total − utilization × total − other
    tenants): the only memory a reserved pool that outgrows the profile can take."""
    return min(r.total_bytes - r.requested_bytes - r.other_use_bytes for r in plan.ranks)


def unchunked_step_matters(plan, one_prompt_plan) -> str | None:
    """Why a launch's whole-prompt prefill steps put it at risk, or None when they do not.

    ``one_prompt_plan`` is the same launch with one sequence, so its activation is the forward
    step of one max-length prompt (no sampler rows of a full decode batch). The step matters when
    (a) the profile already fails on it, (b) the caching allocator's growth past the profiled peak,
    bounded by one more such step, has no room outside the budget, or (c) the step's all-reduces
    go through NCCL on PCIe beyond two GPUs (scenario S2's setup)."""
    from oomguard.model.failures import FailureClass as F

    if not plan.starts and plan.failure in (F.PROFILE_OOM, F.NO_KV_MEMORY, F.KV_TOO_SMALL):
        return "fails"
    step = max(r.activation.bytes for r in one_prompt_plan.ranks)
    if step > headroom_outside_budget(plan):
        return "headroom"
    if _pcie_nccl(plan):
        return "pcie-nccl"
    return None


def s2_edits(plan, tokens: int) -> dict:
    """S2's fix: chunked prefill with this budget, max-num-seqs no larger than it."""
    e = {"enable_chunked_prefill": True, "max_num_batched_tokens": tokens}
    if plan.settings.max_num_seqs > tokens:
        e["max_num_seqs"] = tokens
    return e


def s2_option(planner, flags: dict, env: dict, plan, *, goal: Goal | None = None, other_gpu_use_bytes: int = 0,
              floor_share: float = HEADROOM_FLOOR_SHARE, floor_bytes: int = HEADROOM_FLOOR_BYTES) -> Option | None:
    """The first budget of S2's table whose re-planned launch starts, for an unchunked launch that starts."""
    if plan is None or not plan.starts or not unchunked_whole_prompt(plan, flags):
        return None
    if unchunked_step_matters(plan, planner({**flags, "max_num_seqs": 1}, env)) is None:
        return None  # the same condition as check's OG103: no edit for a step that fits
    goal = goal or Goal(plan.settings.max_model_len)
    floor = headroom_floor(plan.gpu.total_bytes, floor_share, floor_bytes)
    for t in S2_BUDGETS:
        edits = s2_edits(plan, t)
        o = _option(planner, plan, flags, env, edits, goal, other_gpu_use_bytes, floor)
        if o is not None and not o.floor_ok and plan.settings.kv_cache_memory_bytes is None:
            # the budget alone leaves less than the floor free: the utilization that leaves it (the
            # same function check's OG303/OG305 use), re-planned
            u = util_for_headroom(o.plan, other_gpu_use_bytes, floor, graph_slack(o.plan))  # o.floor_bytes = floor + slack
            if 0 < u < o.plan.settings.gpu_memory_utilization:
                o = _option(planner, plan, flags, env, {**edits, "gpu_memory_utilization": u}, goal, other_gpu_use_bytes, floor)
        if o is not None and o.floor_ok:
            return o
    return None


def describe_edits(edits, option_for: Callable[[str], str] = lambda d: "--" + d.replace("_", "-")) -> str:
    """``--flag value`` words of an option's edits (for messages)."""
    parts = []
    for d, v in edits:
        opt = option_for(d)
        if v is None:
            parts.append(f"remove {opt}")
        elif v is True:
            parts.append(opt)
        elif d == "kv_cache_memory_bytes" and isinstance(v, int):
            parts.append(f"{opt} {v}")
        else:
            parts.append(f"{opt} {v}")
    return " ".join(parts)


def summary(o: Option) -> str:
    """One line: what the option gives and what it costs."""
    p = o.plan
    head = (
        f"KV {p.kv_cache_tokens:,} tokens, {p.max_concurrency:.2f}x at {p.settings.max_model_len:,}, "
        f"{o.headroom_bytes / GiB:.2f} GiB free at the prefill peak (floor {o.floor_bytes / GiB:.2f})"
        + ("" if o.robust else ", thin: within the activation estimate's error")
    )
    return head + ("; " + "; ".join(o.tradeoffs) if o.tradeoffs else "")
