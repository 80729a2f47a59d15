"""The fast evaluator: ``plan_launch``'s verdict for many launches at arithmetic speed.

``plan_launch`` builds the whole ledger (weights per rank, KV specs, grouping,
formulas, log lines) in a few hundred microseconds. Most of it does not change
when only the token budget T, ``max_num_seqs`` S, ``gpu_memory_utilization``,
``kv_cache_memory_bytes`` or ``max_model_len`` L change. So:

- a ``Base`` holds what one structural combination (TP, PP, KV dtype, eager)
  fixes: weights and non-torch bytes per rank, the KV layout and bytes per
  block, taken from one real ``plan_launch`` call;
- a ``Step`` holds what (T, S) fixes: the activation peak per rank and the
  CUDA-graph estimate, from the memory model's own functions;
- ``evaluate`` redoes the planner's last lines (KV = requested − W − nt − X − G,
  blocks, tokens, and the failure checks in vLLM's order) for one
  (util, L, kv_cache_memory_bytes).

Everything here is pure: functions take the varied quantity as a parameter and
never mutate their inputs. tests/unit/fit/test_search.py checks ``evaluate``
against ``plan_launch`` on samples of candidates.
"""

from __future__ import annotations


from oomguard.model import activation as act
from oomguard.model.cudagraph import cudagraph_estimate
from oomguard.model.engine import ceil_requested, derive_len, mamba_blocks_per_request, resolve, tokens_logged_by_groups
from oomguard.model.failures import FailureClass
from oomguard.model.kv_spec import KVLayout, blocks_per_request
from oomguard.model.non_torch import startup_free_check
from oomguard.model.planner import CUDA_CONTEXT_BYTES, plan_launch
from oomguard.records import NamedTuple, field, record
from oomguard.units import MiB, cdiv



class RankCost(NamedTuple):
    """One pipeline stage's fixed bytes (every TP rank of a stage is the same)."""

    weights_bytes: int
    bytes_per_block: int
    last_stage: bool


@record
class Base:
    """What one (TP, PP, KV dtype, eager) combination fixes, from one ``plan_launch``."""

    flags: dict  # the launch flags this base was planned with (cheap axes overwritten per candidate)
    env: dict
    settings: object  # EngineSettings of the reference plan
    ranks: tuple[RankCost, ...]
    non_torch_bytes: int
    layout: KVLayout  # whole model on one TP rank (blocks per request, one-request bytes)
    block_size: int
    kv_bytes_per_token: float
    total_bytes: int
    other_bytes: int
    context_bytes: int  # CUDA context (+ NCCL) outside vLLM's budget
    derived_len: int
    allow_long: bool
    config_failure: FailureClass | None  # rejected before memory (TP vs heads, GPUs): no cheap axis cures it
    config_error: str | None
    weights_oom: bool  # the heaviest rank's weights do not fit the card: no cheap axis cures it either
    mamba_blocks: int
    world_size: int
    _bpr_cache: dict = field(default_factory=dict, repr=False)
    _requested: dict = field(default_factory=dict, repr=False)
    _peak_cache: dict = field(default_factory=dict, repr=False)  # activation per stage -> heaviest stage

    def __post_init__(self) -> None:
        # Facts evaluate() asks for every candidate, computed once.
        s = self.settings
        v = s.version
        g = self.layout.groups
        self.single_full_group = len(g) == 1 and g[0].kind in ("full", "mla", "cross")
        self.first_block_size = g[0].block_size if g else self.block_size
        self.is_v0 = s.engine == "V0"
        self.charge_context = False  # the plan's non-torch term carries the context where a release charges it
        self.startup_check = startup_free_check(s)
        self.tokens_by_groups = tokens_logged_by_groups(s, len(g))
        self.graphs_possible = not s.enforce_eager and s.cudagraph_mode != "NONE"
        self.override = int(s.num_gpu_blocks_override) if s.num_gpu_blocks_override else 0

    @property
    def version(self) -> tuple[int, int, int]:
        return self.settings.version

    @property
    def engine(self) -> str:
        return self.settings.engine

    def requested(self, utilization: float) -> int:
        """vLLM's budget, ceil(total × util) (cached per utilization)."""
        r = self._requested.get(utilization)
        if r is None:
            r = self._requested[utilization] = ceil_requested(self.total_bytes, utilization, self.settings.version)
        return r

    def blocks_per_request(self, length: int, token_budget: int) -> int:
        """vLLM's blocks for one request of ``length`` tokens (cached; T matters for sliding windows only)."""
        if self.single_full_group:
            return -(-length // self.first_block_size)
        if not self.layout.groups:
            return 1
        key = (length, token_budget)
        v = self._bpr_cache.get(key)
        if v is None:
            v = blocks_per_request(
                self.layout,
                length,
                max_num_batched_tokens=token_budget,
                max_concurrent_batches=self.settings.max_concurrent_batches,
                mamba_blocks=self.mamba_blocks,
            )
            if len(self._bpr_cache) < 200_000:
                self._bpr_cache[key] = v
        return v


class Step(NamedTuple):
    """What the token budget T and max_num_seqs S fix for one parallel split."""

    token_budget: int
    num_seqs: int
    activation_bytes: tuple[int, ...]  # per rank
    activation_high_bytes: tuple[int, ...]
    graphs_bytes: int  # CUDA-graph estimate with graphs on (0 is used for eager bases)
    graphs_in_budget: bool  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS in effect
    graphs_high_bytes: int = 0  # the estimate's high end

    def graph_slack(self, eager: bool) -> int:
        """What graphs captured outside the budget may take beyond their estimate (goalfix.graph_slack)."""
        if eager or self.graphs_in_budget or not self.graphs_bytes:
            return 0
        return max(0, self.graphs_high_bytes - self.graphs_bytes)


@record(slots=True)
class Outcome:
    """``plan_launch``'s verdict for one candidate, and the numbers fit ranks on."""

    failure: FailureClass | None
    num_blocks: int
    tight_rank: int
    tight_kv_bytes: int
    blocks_per_request: int
    one_request_bytes: int
    kv_cache_tokens: int
    max_concurrency: float
    footprint_bytes: int  # the heaviest rank's bytes at the prefill peak, CUDA context included
    requested_bytes: int

    @property
    def starts(self) -> bool:
        return self.failure is None


def _mamba_blocks(model, s) -> int:
    return mamba_blocks_per_request(model, s)


def make_base(model, gpu, flags: dict, env: dict, *, version: str | None, num_gpus: int, other_gpu_use_bytes: int = 0, usage: str = "serve",
              calibration=None) -> Base:
    """Plan ``flags`` once and keep the parts the cheap axes do not change."""
    plan = plan_launch(model, gpu, flags, env, version=version, num_gpus=num_gpus, other_gpu_use_bytes=other_gpu_use_bytes, usage=usage,
                       calibration=calibration)
    s = plan.settings
    pp = s.pipeline_parallel_size
    ranks = tuple(RankCost(r.weights.bytes, r.layout.bytes_per_block, i == pp - 1) for i, r in enumerate(plan.ranks))
    world = s.tensor_parallel_size * pp
    context = plan.outside_bytes - other_gpu_use_bytes  # the planner's rule (model/non_torch.py), per release
    config = plan.failure if plan.failure is FailureClass.CONFIG_ERROR else None
    heaviest = max(r.weights_bytes for r in ranks)
    return Base(
        flags=dict(flags),
        env=dict(env),
        settings=s,
        ranks=ranks,
        non_torch_bytes=plan.ranks[0].non_torch.bytes,
        layout=plan.layout,
        block_size=plan.block_size,
        kv_bytes_per_token=plan.kv_bytes_per_token,
        total_bytes=gpu.total_bytes,
        other_bytes=other_gpu_use_bytes,
        context_bytes=context,
        derived_len=derive_len(model, s.version),
        allow_long=s.allow_long_max_model_len,
        config_failure=config,
        config_error=plan.error if config else None,
        weights_oom=heaviest + plan.baseline_bytes > gpu.total_bytes,  # the planner's physical check
        mamba_blocks=_mamba_blocks(model, s),
        world_size=world,
    )


def make_step(model, gpu, flags: dict, env: dict, *, version: str | None, token_budget: int, num_seqs: int, usage: str = "serve",
              calibration=None) -> Step:
    """Activation per rank and the CUDA-graph estimate for (T, S), from the memory model's functions."""
    f = dict(flags)
    f["max_num_batched_tokens"] = token_budget
    f["max_num_seqs"] = num_seqs
    f["enforce_eager"] = False
    s = resolve(model, f, env, version=version, gpu=gpu, usage=usage)
    pp = s.pipeline_parallel_size
    terms = [act.activation_peak(model, s, last_stage=i == pp - 1) for i in range(pp)]
    g = cudagraph_estimate(model, s)
    if calibration is not None:  # the same offsets plan_launch applies (model/calibration.py)
        from oomguard.model.calibration import adjust, group_key

        key = group_key(gpu, s.version, model)
        use, _notes = calibration.lookup(key)
        if "activation" in use:
            terms = [adjust(t, use["activation"], key) for t in terms]
        if "cuda_graph" in use and g.bytes:
            g = adjust(g, use["cuda_graph"], key)
    return Step(
        token_budget,
        num_seqs,
        tuple(t.bytes for t in terms),
        tuple(t.high if t.high is not None else t.bytes for t in terms),
        g.bytes,
        bool(s.estimate_cudagraphs),
        g.high if g.high is not None else g.bytes,
    )


def evaluate(base: Base, step: Step, utilization: float, max_model_len: int, kv_cache_memory_bytes: int | None = None) -> Outcome:
    """``plan_launch``'s verdict and KV numbers for one candidate, by arithmetic."""
    L = max_model_len
    graphs = step.graphs_bytes if base.graphs_possible else 0
    g_in = graphs if (step.graphs_in_budget and graphs > 0) else 0
    total, other, ctx = base.total_bytes, base.other_bytes, base.context_bytes
    requested = base.requested(utilization)
    nt = base.non_torch_bytes
    override = base.override
    ranks = base.ranks
    acts = step.activation_bytes
    pinned = kv_cache_memory_bytes is not None

    if len(ranks) == 1:
        # the common case, without the per-rank loops
        r = ranks[0]
        if pinned:
            kv = kv_cache_memory_bytes
        else:
            kv = requested - r.weights_bytes - nt - acts[0] - g_in
            if base.charge_context:
                kv -= CUDA_CONTEXT_BYTES + other
        nb = override or (max(0, kv // r.bytes_per_block) if r.bytes_per_block else 0)
        if override:
            kv = override * r.bytes_per_block
        tight, tight_kv = 0, int(kv)
    else:
        nb = -1
        tight = 0
        tight_kv = 0
        rank_kv = []
        for i, r in enumerate(ranks):
            if pinned:
                kv = kv_cache_memory_bytes
            else:
                kv = requested - r.weights_bytes - nt - acts[i] - g_in
                if base.charge_context:
                    kv -= CUDA_CONTEXT_BYTES + other
            n = override or (max(0, kv // r.bytes_per_block) if r.bytes_per_block else 0)
            if override:
                kv = override * r.bytes_per_block
            rank_kv.append(int(kv))
            if nb < 0 or n < nb:
                nb, tight, tight_kv = int(n), i, int(kv)
    nb = int(nb)
    bpr = base.blocks_per_request(L, step.token_budget)
    conc = nb / bpr if bpr else 0.0
    if base.tokens_by_groups:
        tokens = (nb // max(1, len(base.layout.groups))) * base.block_size
    else:
        tokens = int(conc * L)
    if base.is_v0:
        conc = nb * base.block_size / L
    # one max-length request per rank, against that rank's own pool (plan_launch does the same)
    one_req, short_avail = base.layout.bytes_per_block * bpr, tight_kv - ranks[tight].bytes_per_block
    if len(ranks) > 1:
        worst = max(range(len(ranks)), key=lambda i: ranks[i].bytes_per_block * bpr - (rank_kv[i] - ranks[i].bytes_per_block))
        one_req = ranks[worst].bytes_per_block * bpr
        short_avail = rank_kv[worst] - ranks[worst].bytes_per_block
    tr = ranks[tight]

    # --- the failure checks, in plan_launch's order (the first one wins)
    failure = base.config_failure
    if failure is None and L > base.derived_len and not base.allow_long:
        failure = FailureClass.MAX_LEN_EXCEEDS_MODEL
    if failure is None and base.startup_check and total - ctx - other < requested:
        failure = FailureClass.STARTUP_FREE_MEMORY
    if failure is None and base.weights_oom:
        failure = FailureClass.WEIGHTS_OOM
    if failure is None:
        peak = tr.weights_bytes + acts[0] if len(ranks) == 1 else _stage_peak(base, step)
        if peak + nt + ctx + other > total:
            failure = FailureClass.PROFILE_OOM
    if failure is None and pinned:
        resident = tr.weights_bytes + nt + kv_cache_memory_bytes + graphs + ctx + other
        if resident + acts[tight] > total:
            failure = FailureClass.PROFILE_OOM if resident <= total else FailureClass.NO_KV_MEMORY
    if failure is None and tight_kv - tr.bytes_per_block <= 0:
        failure = FailureClass.NO_KV_MEMORY
    if failure is None:
        if base.is_v0:
            if L > nb * base.block_size:
                failure = FailureClass.KV_TOO_SMALL
        elif one_req > short_avail:
            failure = FailureClass.KV_TOO_SMALL
    if failure is None and graphs and not step.graphs_in_budget and not pinned:
        if requested + ctx + other + graphs > total:
            failure = FailureClass.CUDAGRAPH_OOM

    if len(ranks) == 1:
        footprint = tr.weights_bytes + acts[0] + nb * tr.bytes_per_block
    else:
        footprint = max(r.weights_bytes + acts[i] + nb * r.bytes_per_block for i, r in enumerate(ranks))
    footprint += nt + graphs + ctx
    return Outcome(failure, nb, tight, tight_kv, bpr, one_req, tokens, conc, int(footprint), requested)


def _stage_peak(base: Base, step: Step) -> int:
    """max over pipeline stages of weights + activation (cached: it does not depend on util or L)."""
    key = step.activation_bytes
    v = base._peak_cache.get(key)
    if v is None:
        v = base._peak_cache[key] = max(r.weights_bytes + step.activation_bytes[i] for i, r in enumerate(base.ranks))
    return v


def max_len(
    base: Base,
    step: Step,
    utilization: float,
    kv_cache_memory_bytes: int | None = None,
    *,
    cap: int,
    concurrency: int | None = None,
    reserve_bytes: int = 0,
) -> int:
    """The largest max-model-len (≤ ``cap``) whose one request fits the KV pool, as vLLM's auto-fit finds it.

    With ``concurrency``, that many requests at full length must fit together
    (the average input length defaults to the context). ``reserve_bytes`` is
    kept free in the pool (e.g. the activation estimate's error).
    """
    o = evaluate(base, step, utilization, base.block_size, kv_cache_memory_bytes)
    kv, bpb = o.tight_kv_bytes - reserve_bytes, base.ranks[o.tight_rank].bytes_per_block
    nb = kv // bpb if bpb else 0
    budget = kv - bpb
    if budget <= 0 or base.layout.bytes_per_block == 0:
        return 0
    page = base.layout.bytes_per_block
    T = step.token_budget
    many = concurrency is not None and concurrency > 1
    if base.engine == "V0":
        best = min(cap, nb * base.block_size)
        if many:
            best = min(best, ((nb - 1) // concurrency) * base.block_size)
        return max(0, best)
    if base.single_full_group and not many:
        bs = base.layout.groups[0].block_size
        return max(0, min(cap, (budget // page) * bs))

    def fits(length: int) -> bool:
        bpr = base.blocks_per_request(length, T)
        if page * bpr > budget:
            return False
        return not many or nb - 1 >= concurrency * bpr

    lo, hi = 0, max(1, cap)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def capacity(base: Base, outcome: Outcome, input_len: int, token_budget: int) -> int:
    """How many requests of ``input_len`` tokens the pool holds at once (the null block excluded)."""
    if input_len <= 0:
        return 0
    bpr = base.blocks_per_request(input_len, token_budget)
    return max(0, (outcome.num_blocks - 1) // bpr) if bpr else 0


def kv_bytes_for(base: Base, length: int, token_budget: int, concurrency: int = 1, input_len: int | None = None) -> int:
    """``--kv-cache-memory-bytes`` that holds one ``length`` request and ``concurrency`` × ``input_len``.

    One null block and one spare block on top, rounded up to 256 MiB so the
    value reads well on a command line.
    """
    bpb = max(r.bytes_per_block for r in base.ranks)
    one = base.layout.bytes_per_block * base.blocks_per_request(length, token_budget) + bpb
    many = 0
    if concurrency > 1:
        many = (concurrency * base.blocks_per_request(input_len or length, token_budget) + 1) * bpb
    need = max(one, many) + bpb
    step_bytes = 256 * MiB
    return cdiv(need, step_bytes) * step_bytes
