"""Several vLLM servers on one GPU set: plan them in start order, say which one fails and why, and split the card.

Every server is planned with ``plan_launch`` and the memory the servers started before it hold
on the card (``other_gpu_use_bytes``), so each release's own accounting decides what happens
(docs/memory-model.md#non-torch, model/non_torch.py::accounting):

- from 0.9.1 (V1), ``--gpu-memory-utilization`` is a share of the **whole card**, and the free
  memory at start must cover it ("Free memory on device ... on startup is less than desired
  GPU memory utilization"); the profiling baseline excludes the servers already running;
- before that (V0 0.6.4, V1 0.8-0.9.0), the budget is still ``total × util`` but the servers
  already running are charged to it: the second server's pool shrinks by the first one's
  memory, with no check at start;
- ``--kv-cache-memory-bytes`` pins the pool (from 0.10.2); the start check still applies.

A server that has served a long prompt keeps its activation memory in PyTorch's cache, so the
free memory a later server meets is the earlier ones' **peak** footprint (weights, KV pool,
non-torch, graphs, activation, CUDA context); at an idle start it is their peak less the
activation. Both are reported. After every server started, the peaks must add up to the card
less the headroom floor (2 % of the card, at least 0.5 GiB: the floor check and fit use),
or the next long prefill on one of them dies with a CUDA OOM at run time.

The split the planner proposes gives every server its minimum (its non-KV memory plus one
max-length request) and shares what is left in proportion to those minimums; it is offered
as pinned pools (``--kv-cache-memory-bytes``, start-order proof) and as utilizations, each
re-planned in start order before it is shown. On a GPU with MIG, each server also gets the
smallest MIG profile it fits in; MIG instances are GPUs of their own size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oomguard.units import GiB, MiB

POOL_STEP = 256 * MiB  # pinned pools are rounded down to this
UTIL_STEP = 0.01


@dataclass
class Server:
    """One launch of the set, in start order."""

    name: str
    model: Any  # ModelDescription
    flags: dict
    env: dict
    version: str | None = None
    model_name: str | None = None
    calibration: Any = None


@dataclass
class Outcome:
    """One server planned next to the ones started before it."""

    server: Server
    plan: Any
    others_peak_bytes: int  # per GPU, the servers before it at their peak
    others_idle_bytes: int
    footprint_bytes: int  # its own per-GPU bytes at its prefill peak
    activation_bytes: int
    starts: bool
    starts_if_idle: bool  # starts when the servers before it have not served yet
    why: str = ""

    @property
    def idle_bytes(self) -> int:
        return self.footprint_bytes - self.activation_bytes

    def to_dict(self) -> dict:
        p = self.plan
        s = p.settings
        return {
            "name": self.server.name,
            "model": self.server.model_name or getattr(self.server.model, "name", None),
            "vllm_version": ".".join(map(str, s.version)),
            "gpu_memory_utilization": s.gpu_memory_utilization,
            "kv_cache_memory_bytes": s.kv_cache_memory_bytes,
            "requested_gib": _gib(p.tight_rank.requested_bytes),
            "others_at_start_gib": _gib(self.others_peak_bytes),
            "others_at_start_idle_gib": _gib(self.others_idle_bytes),
            "free_at_start_gib": _gib(p.gpu.total_bytes - self.others_peak_bytes - _context(p)),
            "footprint_gib": _gib(self.footprint_bytes),
            "idle_gib": _gib(self.idle_bytes),
            "kv_cache_gib": _gib(p.tight_rank.kv_bytes),
            "kv_cache_tokens": p.kv_cache_tokens,
            "max_concurrency": round(p.max_concurrency, 2),
            "max_model_len": s.max_model_len,
            "starts": self.starts,
            "starts_if_idle": self.starts_if_idle,
            "failure": p.failure.value if p.failure else None,
            "why": self.why or None,
            "error": p.error,
        }


@dataclass
class Option:
    """One way to make every server start with headroom (flags per server, re-planned in order)."""

    kind: str  # "pinned" | "utilization" | "mig"
    edits: list[dict]  # per server: {dest: value}
    outcomes: list[Outcome]
    ok: bool
    total_peak_bytes: int
    headroom_bytes: int
    note: str = ""
    gpus: list[Any] = field(default_factory=list)  # MIG: the instance each server gets

    def to_dict(self) -> dict:
        d = {"kind": self.kind, "ok": self.ok, "total_peak_gib": _gib(self.total_peak_bytes), "headroom_gib": _gib(self.headroom_bytes),
             "servers": [{"name": o.server.name, "edits": e, "plan": o.to_dict(), **({"gpu": g.name} if g is not None else {})}
                         for o, e, g in zip(self.outcomes, self.edits, self.gpus or [None] * len(self.outcomes))]}
        if self.note:
            d["note"] = self.note
        return d


@dataclass
class SharedPlan:
    gpu: Any
    num_gpus: int
    outcomes: list[Outcome]
    margin_bytes: int
    options: list[Option] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total_peak_bytes(self) -> int:
        return sum(o.footprint_bytes for o in self.outcomes)

    @property
    def all_start(self) -> bool:
        return all(o.starts for o in self.outcomes)

    @property
    def fits_together(self) -> bool:
        return self.total_peak_bytes <= self.gpu.total_bytes - self.margin_bytes

    @property
    def ok(self) -> bool:
        return self.all_start and self.fits_together

    def verdict(self) -> str:
        first = next((o for o in self.outcomes if not o.starts), None)
        if first is not None:
            return f"{first.server.name} fails at start: {first.why}"
        if not self.fits_together:
            over = self.total_peak_bytes - (self.gpu.total_bytes - self.margin_bytes)
            return (f"every server starts, but their peaks add up to {_gib(self.total_peak_bytes)} GiB per GPU, "
                    f"{_gib(over)} GiB over the {_gib(self.gpu.total_bytes)} GiB card less its {_gib(self.margin_bytes)} GiB headroom: "
                    "the next long prefill on one of them dies with a CUDA OOM at run time (runtime-oom): the one that "
                    "allocates its activations last")
        return (f"all {len(self.outcomes)} servers start in this order and their peaks ({_gib(self.total_peak_bytes)} GiB) "
                f"leave {_gib(self.gpu.total_bytes - self.total_peak_bytes)} GiB of the card free")

    def to_dict(self) -> dict:
        return {
            "gpu": {"name": self.gpu.name, "total_gib": _gib(self.gpu.total_bytes), "count": self.num_gpus},
            "start_order": [o.server.name for o in self.outcomes],
            "servers": [o.to_dict() for o in self.outcomes],
            "all_start": self.all_start,
            "fits_together": self.fits_together,
            "total_peak_gib": _gib(self.total_peak_bytes),
            "headroom_floor_gib": _gib(self.margin_bytes),
            "ok": self.ok,
            "verdict": self.verdict(),
            "options": [o.to_dict() for o in self.options],
            "notes": list(self.notes),
        }


def _gib(b: float) -> float:
    return round(b / GiB, 2)


def _context(plan) -> int:
    """The server's own bytes outside its terms (CUDA context, communicators built before the snapshot)."""
    return max(0, plan.outside_bytes - _charged_other(plan))


def _charged_other(plan) -> int:
    """The other servers' bytes this plan was given (in its baseline, or charged to its non-torch term)."""
    return plan.tight_rank.other_use_bytes


def footprint(plan) -> tuple[int, int]:
    """(own bytes per GPU at the prefill peak, of which activation) on the heaviest rank.

    The terms plus the KV pool plus what sits outside them (CUDA context, early communicators),
    less the other processes the plan was told about: a release that charges them to the budget
    carries them in its non-torch term, one that does not in its baseline."""
    best = (0, 0)
    for r in plan.ranks:
        own = r.weights.bytes + r.activation.bytes + r.non_torch.bytes + r.cuda_graph.bytes + max(0, r.kv_bytes) + plan.outside_bytes \
            - r.other_use_bytes
        if own > best[0]:
            best = (int(own), int(r.activation.bytes))
    return best


def _plan(server: Server, gpu, num_gpus: int, flags: dict | None = None, other: int = 0):
    from oomguard.model.planner import plan_launch

    return plan_launch(server.model, gpu, server.flags if flags is None else flags, server.env, version=server.version,
                       num_gpus=num_gpus, other_gpu_use_bytes=other, calibration=server.calibration)


def plan_in_order(servers: list[Server], gpu, num_gpus: int, *, margin_bytes: int, flags: list[dict] | None = None,
                  gpus: list | None = None) -> list[Outcome]:
    """Plan each server next to the ones before it (at their peak; and idle, for the start check)."""
    out: list[Outcome] = []
    peak = idle = 0
    for i, s in enumerate(servers):
        g = gpus[i] if gpus else gpu
        f = flags[i] if flags else s.flags
        p = _plan(s, g, num_gpus, f, 0 if gpus else peak)
        foot, act = footprint(p)
        starts = p.starts
        why = "" if starts else f"{p.failure.value}: {p.error}"
        if not gpus and not starts and peak != idle:
            p_idle = _plan(s, g, num_gpus, f, idle)
            starts_idle = p_idle.starts
        else:
            starts_idle = starts
        if not gpus and starts and p.settings.kv_cache_memory_bytes is None and peak and _charges_others(p):
            why = (f"starts, but this release charges the {_gib(peak)} GiB the servers before it hold to its own budget "
                   f"(total × {p.settings.gpu_memory_utilization}): its KV pool is what is left of that")
        out.append(Outcome(s, p, 0 if gpus else peak, 0 if gpus else idle, foot, act, starts, starts_idle, why))
        if not gpus:
            peak += foot
            idle += foot - act
    return out


def _charges_others(plan) -> bool:
    from oomguard.model.non_torch import accounting

    return accounting(plan.settings).context_in_budget


def plan_shared(servers: list[Server], gpu, num_gpus: int = 1, *, margin_bytes: int | None = None, propose: bool = True) -> SharedPlan:
    """The servers as launched, in start order, and (when they do not all fit) the splits that do."""
    from oomguard.fit.goalfix import headroom_floor

    margin = headroom_floor(gpu.total_bytes) if margin_bytes is None else margin_bytes
    outs = plan_in_order(servers, gpu, num_gpus, margin_bytes=margin)
    sp = SharedPlan(gpu, num_gpus, outs, margin)
    for o in outs:
        if not o.starts and o.starts_if_idle:
            sp.notes.append(f"{o.server.name} starts only while the servers before it have not served a long prompt yet "
                            "(their activation memory stays in PyTorch's cache afterwards): a restart under load fails")
    if propose:
        sp.options = propose_splits(servers, gpu, num_gpus, margin)
    return sp


# ---------------------------------------------------------------- splits


@dataclass
class _Need:
    non_kv: int  # own bytes at the peak besides the KV pool
    kv_min: int  # one max-length request (+ the null block)
    per_token: float


def _needs(s: Server, gpu, num_gpus: int) -> _Need | None:
    p = _plan(s, gpu, num_gpus)
    r = max(p.ranks, key=lambda x: x.weights.bytes)
    non_kv = r.weights.bytes + r.activation.bytes + r.non_torch.bytes + r.cuda_graph.bytes + p.outside_bytes - r.other_use_bytes
    if p.failure is not None and p.failure.value in ("config-error", "max-len-exceeds-model", "weights-oom"):
        return None
    return _Need(int(non_kv), int(p.one_request_bytes + r.layout.bytes_per_block), p.kv_bytes_per_token)


def _has_pinned(s: Server) -> bool:
    from oomguard.versions import get_release

    try:
        return get_release(s.version).has_option("--kv-cache-memory-bytes")
    except Exception:  # noqa: BLE001 - no table for the release: do not propose the flag
        return False


def _targets(needs: list[_Need], room: int) -> list[int] | None:
    """KV bytes per server: its minimum plus a share of what is left, in proportion to the minimums."""
    spare = room - sum(n.non_kv + n.kv_min for n in needs)
    if spare < 0:
        return None
    total_min = sum(n.kv_min for n in needs) or 1
    return [n.kv_min + int(spare * n.kv_min / total_min) for n in needs]


def _finish(kind: str, servers, gpu, num_gpus, margin, edits, note="", gpus=None) -> Option:
    flags = [{**s.flags, **e} for s, e in zip(servers, edits)]
    for f in flags:
        for k, v in list(f.items()):
            if v is None:
                del f[k]
    outs = plan_in_order(servers, gpu, num_gpus, margin_bytes=margin, flags=flags, gpus=gpus)
    if gpus:
        ok = all(o.starts for o in outs) and all(o.footprint_bytes <= g.total_bytes - margin_for(g) for o, g in zip(outs, gpus))
        peak = sum(o.footprint_bytes for o in outs)
        head = min(g.total_bytes - o.footprint_bytes for o, g in zip(outs, gpus))
    else:
        peak = sum(o.footprint_bytes for o in outs)
        head = gpu.total_bytes - peak
        ok = all(o.starts for o in outs) and head >= margin
    return Option(kind, edits, outs, ok, peak, head, note, list(gpus or []))


def margin_for(gpu) -> int:
    from oomguard.fit.goalfix import headroom_floor

    return headroom_floor(gpu.total_bytes)


def propose_splits(servers: list[Server], gpu, num_gpus: int, margin: int) -> list[Option]:
    needs = [_needs(s, gpu, num_gpus) for s in servers]
    opts: list[Option] = []
    if all(n is not None for n in needs):
        room = gpu.total_bytes - margin
        kv = _targets(needs, room)  # type: ignore[arg-type]
        if kv is not None and all(_has_pinned(s) for s in servers):
            opts.append(_pinned(servers, gpu, num_gpus, margin, kv))
        # a utilization is rounded up to the next hundredth: leave each server that much on top of the floor
        kv = _targets(needs, room - len(servers) * int(UTIL_STEP * gpu.total_bytes))  # type: ignore[arg-type]
        if kv is not None:
            opts.append(_utilizations(servers, gpu, num_gpus, margin, kv))
        elif not opts:
            short = sum(n.non_kv + n.kv_min for n in needs) - room  # type: ignore[union-attr]
            opts.append(Option("none", [{} for _ in servers], [], False, 0, 0,
                               f"even with one max-length request each, the servers need {_gib(short)} GiB more than the card has "
                               "(less its headroom floor): lower a --max-model-len, quantize, or give one of them its own GPU"))
    mig = _mig_split(servers, gpu)
    if mig is not None:
        opts.append(mig)
    return [o for o in opts if o is not None]


def _pinned(servers, gpu, num_gpus, margin, kv) -> Option:
    """--kv-cache-memory-bytes per server, and a utilization whose start check passes in any start order."""
    pools = [max(POOL_STEP, k // POOL_STEP * POOL_STEP) for k in kv]
    plans = [_plan(s, gpu, num_gpus, {**s.flags, "kv_cache_memory_bytes": pool}) for s, pool in zip(servers, pools)]
    feet = [footprint(p)[0] for p in plans]
    edits = []
    for i, (p, pool) in enumerate(zip(plans, pools)):
        # vLLM still checks free >= ceil(total × util) at start: pass it even when every other server is at its peak
        free = gpu.total_bytes - (sum(feet) - feet[i]) - _context(p)
        util = max(UTIL_STEP, _floor_step(free / gpu.total_bytes - UTIL_STEP))
        edits.append({"kv_cache_memory_bytes": pool, "gpu_memory_utilization": round(util, 2)})
    return _finish("pinned", servers, gpu, num_gpus, margin, edits,
                   "each pool is pinned, so neither the start order nor what the others hold at profiling time changes it; "
                   "each --gpu-memory-utilization passes vLLM's free-memory check at start even with the others at their peak")


def _utilizations(servers, gpu, num_gpus, margin, kv) -> Option:
    """The smallest round utilization per server (in start order) whose profiled pool reaches its share."""
    edits = []
    flags_so_far = []
    before = 0
    for s, k in zip(servers, kv):
        base = {**s.flags, "kv_cache_memory_bytes": None}
        base.pop("kv_cache_memory_bytes")
        best = 99
        for hundredths in range(1, 100):
            # not bisected: too low leaves the pool short, too high fails the free-memory check at start
            p = _plan(s, gpu, num_gpus, {**base, "gpu_memory_utilization": hundredths / 100}, before)
            if p.starts and p.tight_rank.kv_bytes >= k - POOL_STEP // 2:
                best = hundredths
                break
        util = best / 100
        edit = {"gpu_memory_utilization": util}
        if "kv_cache_memory_bytes" in s.flags:
            edit["kv_cache_memory_bytes"] = None
        edits.append(edit)
        p = _plan(s, gpu, num_gpus, {**base, "gpu_memory_utilization": util}, before)
        foot, _ = footprint(p)
        before += foot
        flags_so_far.append(edit)
    note = ("utilizations are shares of the whole card, taken in this start order" +
            ("; this release charges the servers already running to each budget, so each later utilization includes them"
             if servers and _charges_others(_plan(servers[-1], gpu, num_gpus)) else ""))
    return _finish("utilization", servers, gpu, num_gpus, margin, edits, note)


def _floor_step(x: float) -> float:
    return int(x / UTIL_STEP + 1e-9) * UTIL_STEP


def _mig_split(servers, gpu) -> Option | None:
    """Each server on the smallest MIG profile it starts in (holding one max-length request); None without MIG."""
    from oomguard.inputs.hardware import mig_profiles

    profiles = mig_profiles(gpu)
    if not profiles or len(servers) < 2:
        return None
    chosen = []
    edits = []
    for s in servers:
        if int(s.flags.get("tensor_parallel_size") or 1) * int(s.flags.get("pipeline_parallel_size") or 1) > 1:
            return None  # a MIG instance is one device: no tensor or pipeline parallelism across instances
        fit = None
        # a MIG instance is the server's alone: vLLM's default utilization, where the launch lowered it to share
        edit = {"gpu_memory_utilization": 0.9} if float(s.flags.get("gpu_memory_utilization") or 0.9) < 0.9 \
            and s.flags.get("kv_cache_memory_bytes") is None else {}
        for prof in profiles:  # smallest first
            p = _plan(s, prof.gpu, 1, {**s.flags, **edit})
            foot, _ = footprint(p)
            if p.starts and foot <= prof.gpu.total_bytes - margin_for(prof.gpu):
                fit = prof
                break
        if fit is None:
            return None
        chosen.append(fit)
        edits.append(edit)
    mem = sum(p.memory_slices for p in chosen)
    comp = sum(p.compute_slices for p in chosen)
    if mem > chosen[0].total_memory_slices or comp > chosen[0].total_compute_slices:
        return Option("mig", [{} for _ in servers], [], False, 0, 0,
                      f"the smallest profiles that fit ({', '.join(p.name for p in chosen)}) need {mem}/{chosen[0].total_memory_slices} "
                      f"memory and {comp}/{chosen[0].total_compute_slices} compute slices: more than one {gpu.name}")
    note = (f"MIG {' + '.join(p.name for p in chosen)} on one {gpu.name} ({mem}/{chosen[0].total_memory_slices} memory slices, "
            f"{comp}/{chosen[0].total_compute_slices} compute slices; check the placement with nvidia-smi mig -lgipp): each server "
            "then has a GPU of its own size, isolated from the others")
    return _finish("mig", servers, gpu, 1, 0, edits, note, gpus=[p.gpu for p in chosen])
