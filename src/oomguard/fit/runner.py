"""``fit``: search the launch space, keep what meets the goal, rank, explain, verify.

1. Build the axes (``space``), one ``Base`` per structural combination and
   one ``Step`` per (TP, PP, T, S) (``search``).
2. Evaluate every (base, T, S, util, KV sizing, L) by arithmetic; keep those
   that start, hold one max-length request, hold the stated concurrency at the
   average input length, and keep the prefill peak margin.
3. Rank: for ``--from``, fewest flags changed then smallest change; otherwise
   the objective. Keep one candidate per shape so the list shows alternatives.
4. Re-plan each shown candidate with the full ``plan_launch`` (its JSON is the
   ``plan`` object) and explain its trade-offs.
"""

from __future__ import annotations

import gc
import time
from collections import Counter

from oomguard.fit import command as cmd
from oomguard.fit import cpu_tier
from oomguard.fit.candidates import CandidatesMixin
from oomguard.fit.edits import _TRUE, EditsMixin
from oomguard.fit.ranking import RankingMixin
from oomguard.fit.result import Candidate, FitResult
from oomguard.fit.rope import needed_factor
from oomguard.fit.search import Base, Outcome, Step, evaluate, kv_bytes_for, make_base, make_step, max_len
from oomguard.fit.space import Goal, KVMemoryMode, Structure, build_space
from oomguard.fit.tiering import TierMixin
from oomguard.model.engine import derive_len, parse_version
from oomguard.model.planner import plan_launch
from oomguard.records import record
from oomguard.units import GiB, MiB

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any


@record
class FitRequest:
    model: object
    gpu: object
    num_gpus: int
    goal: Goal
    version: str | None = None
    launch: object | None = None  # oomguard.inputs.launch.Launch (or anything with .flags/.env/.sites/.path/.model)
    model_name: str | None = None  # as written on the command line
    other_gpu_use_bytes: int = 0
    usage: str = "serve"
    top: int = 5
    # check --fix's memory edits of the --from launch ({dest: value}, {env: value}): shown first, so both
    # commands give the same first choice (None: fit's own goal-keeping ranking decides)
    first_edit: tuple | None = None
    calibration: object | None = None  # model.calibration.Calibration: every plan and step of the search uses it
    max_tensor_parallel: int | None = None  # several nodes (fit/hardware.py): TP within a node, PP across nodes
    fixed_flags: dict | None = None  # no launch: flags every candidate carries (e.g. --hf-overrides with a RoPE scaling)


@record(slots=True)
class Trial:
    """One feasible candidate, before it is turned into flags."""

    base_index: int
    token_budget: int
    num_seqs: int
    utilization: float
    mode: KVMemoryMode
    kv_memory_bytes: int | None
    max_model_len: int
    outcome: Outcome
    robust: bool
    margin_bytes: int
    spare_bytes: int


def _round_len(n: int, block: int) -> int:
    """A max-model-len that reads well: whole KiB-of-tokens above 16K, whole blocks below."""
    if n > 16384:
        return n // 1024 * 1024
    return max(0, n // block * block)


class _Search(RankingMixin, EditsMixin, CandidatesMixin, TierMixin):
    """The state of one fit run (bases, steps, caches); ``run`` returns the FitResult."""

    def __init__(self, req: FitRequest):
        from oomguard.model.overrides import apply_overrides, hf_overrides_of

        self.req = req
        self.gpu, self.goal = req.gpu, req.goal
        self.v = parse_version(req.version)
        launch = req.launch
        self.launch = launch
        # without a launch: the flags every candidate keeps (fit/hardware.py: the user's RoPE scaling)
        self.lf = dict(launch.flags) if launch is not None else dict(req.fixed_flags or {})
        if self.lf.get("hf_overrides") is not None:
            self.lf["hf_overrides"] = hf_overrides_of({"hf_overrides": self.lf["hf_overrides"]})  # one shape: a dict
        if launch is not None and req.fixed_flags:
            # --from a launch with --rope-scaling: the launch's overrides, with the stated RoPE scaling on top
            for dest, value in req.fixed_flags.items():
                self.lf[dest] = {**(self.lf.get(dest) or {}), **value} if isinstance(value, dict) else value
        # the model as vLLM sees it after the launch's --hf-overrides (the planner's one function)
        self.model = apply_overrides(req.model, self.lf, self.v)
        self.launch_env = dict(launch.env) if launch is not None else {}
        self.env = dict(self.launch_env)  # what plans run with (fit may add VLLM_ALLOW_LONG_MAX_MODEL_LEN)
        self.notes: list[str] = []
        from oomguard.model.coverage import mark

        if mark(self.model):  # every candidate is ranked on the generic path's estimates: say so first
            self.notes.append(f"{mark(self.model)}: candidates are ranked on the generic path's estimates "
                              f"({'; '.join(self.model.assumptions)}); each plan's coverage.ranges gives the range")
        if req.calibration is not None:  # never applied silently: what the profile adjusts, or why not
            from oomguard.model.calibration import group_key

            self.notes += req.calibration.lookup(group_key(self.gpu, self.v, self.model))[1]
        self.added_flags: dict = {}  # flags fit adds beyond its searched axes (the model's RoPE recipe)
        self._implied_cache: dict = {}
        self.rejected: Counter = Counter()
        self.searched = 0
        self.launch_plan = None
        if launch is not None:
            self.launch_plan = self._plan(self.lf, self.env)
        self.ls = self.launch_plan.settings if self.launch_plan is not None else None
        self.derived = derive_len(self.model, self.v)
        self.model_name = req.model_name or (getattr(launch, "model", None) if launch is not None else None) or self.model.name

    # ------------------------------------------------------------------ planning helpers
    def _plan(self, flags: dict, env: dict):
        r = self.req
        return plan_launch(self.model, self.gpu, flags, env, version=r.version, num_gpus=r.num_gpus, other_gpu_use_bytes=r.other_gpu_use_bytes, usage=r.usage, calibration=r.calibration)

    def _length_goal(self) -> tuple[int | None, int, str]:
        """(fixed max-model-len or None for a search, the search's upper bound, where it came from)."""
        g = self.goal
        if g.max_context:
            cap = g.context or max(self.derived, self.ls.max_model_len if self.ls else 0, self._recipe_reach())
            return None, cap, "--max-context"
        if g.context:
            return g.context, g.context, "--context"
        if self.ls is not None:
            return self.ls.max_model_len, self.ls.max_model_len, "the launch's max-model-len"
        return self.derived, self.derived, "the model's maximum"

    # ------------------------------------------------------------------ search
    def _bases(self, structures, common: dict, length: int) -> list[tuple[Structure, Base]]:
        out = []
        r = self.req
        for st in structures:
            flags = {**common, **st.flags(), "max_num_batched_tokens": 2048, "max_num_seqs": 16, "gpu_memory_utilization": 0.9, "max_model_len": length}
            base = make_base(self.model, self.gpu, flags, self.env, version=r.version, num_gpus=r.num_gpus, other_gpu_use_bytes=r.other_gpu_use_bytes, usage=r.usage, calibration=r.calibration)
            if base.config_failure is not None:
                self.rejected["config-error (" + (base.config_error or "")[:60] + ")"] += 1
                continue
            if base.weights_oom:
                self.rejected[f"weights-oom at TP {st.tensor_parallel_size} PP {st.pipeline_parallel_size}"] += 1
                continue
            out.append((st, base))
        return out

    def _step(self, cache: dict, common: dict, st: Structure, T: int, S: int) -> Step:
        key = (st.tensor_parallel_size, st.pipeline_parallel_size, T, S)
        step = cache.get(key)
        if step is None:
            flags = {**common, "tensor_parallel_size": st.tensor_parallel_size, "pipeline_parallel_size": st.pipeline_parallel_size}
            step = make_step(self.model, self.gpu, flags, self.env, version=self.req.version, token_budget=T, num_seqs=S, usage=self.req.usage, calibration=self.req.calibration)
            cache[key] = step
        return step

    def _max_safe_kv(self, base: Base, step: Step, eager: bool) -> int:
        """The largest pinned KV pool that keeps the margin at the (high) activation estimate."""
        graphs = 0 if eager else step.graphs_bytes
        worst = max(r.weights_bytes + base.non_torch_bytes + step.activation_high_bytes[i] + graphs for i, r in enumerate(base.ranks))
        room = base.total_bytes - base.other_bytes - base.context_bytes - worst - self.goal.margin_bytes
        return max(0, room // (256 * MiB) * (256 * MiB))

    def search(self, fixed_len: int | None, cap: int, concurrency: int | None) -> tuple[list[Trial], list[tuple[Structure, Base]], dict]:
        goal = self.goal
        common = {k: v for k, v in self.lf.items() if k not in cmd.SEARCHED}
        space = build_space(self.model, self.gpu, self.req.num_gpus, launched_flags=self.lf, launched_settings=self.ls, goal=goal, version=self.v,
                            max_tp=self.req.max_tensor_parallel)
        for n in space.notes:
            if n not in self.notes:
                self.notes.append(n)
        bases = self._bases(space.structures, common, fixed_len or min(cap, 4096))
        steps: dict = {}
        trials: list[Trial] = []
        C = concurrency
        launch_chunked = self.ls.enable_chunked_prefill if self.ls is not None else True
        rejected = self.rejected
        margin_req = goal.margin_bytes
        peak_limit = goal.peak_limit_bytes
        per_len_c = C if (C and not goal.avg_input_len) else None
        fixed_input = goal.input_len(fixed_len) if fixed_len else None
        for bi, (st, base) in enumerate(bases):
            eager = st.enforce_eager
            chunked = launch_chunked if st.enable_chunked_prefill is None else st.enable_chunked_prefill
            total_free = base.total_bytes - base.other_bytes
            for T in space.token_budgets:
                if not chunked and fixed_len and T < fixed_len:
                    continue
                for S in space.num_seqs:
                    if S > T or (C and S < C):
                        continue
                    step = self._step(steps, common, st, T, S)
                    d_act = max(h - a for h, a in zip(step.activation_high_bytes, step.activation_bytes))
                    for mode in space.kv_memory_modes:
                        kvmem = None
                        if mode is KVMemoryMode.PINNED_AS_LAUNCHED:
                            kvmem = space.launched_kv_memory_bytes
                        elif mode is KVMemoryMode.PINNED_TO_NEED:
                            if fixed_len is not None:
                                # what the goal needs plus the headroom floor, so a pinned pool is never sized to the byte
                                need_kv = kv_bytes_for(base, fixed_len, T, C or 1, fixed_input if C else None) + margin_req
                                kvmem = -(-need_kv // (256 * MiB)) * (256 * MiB)
                            else:
                                kvmem = self._max_safe_kv(base, step, eager)
                                if kvmem <= 0:
                                    continue
                        # the headroom floor, plus what the estimates may add outside the budget: a pinned
                        # pool's activation error, graphs captured after the pool (goalfix.graph_slack)
                        margin_need = margin_req + (d_act if kvmem is not None else 0) + step.graph_slack(eager)
                        reserve = d_act if kvmem is None else 0
                        for util in space.utilizations:
                            L = fixed_len
                            if L is None:
                                # --max-context: the length is the varied quantity; keep the estimate's error as slack.
                                L = _round_len(max_len(base, step, util, kvmem, cap=cap, concurrency=per_len_c, reserve_bytes=reserve), base.block_size)
                                if L < base.block_size:
                                    self.searched += 1
                                    rejected["kv-too-small (no length fits)"] += 1
                                    continue
                            o = evaluate(base, step, util, L, kvmem)
                            self.searched += 1
                            if o.failure is not None:
                                rejected[o.failure.value] += 1
                                continue
                            bpb = base.ranks[o.tight_rank].bytes_per_block
                            need = o.one_request_bytes
                            if C:
                                I = fixed_input or goal.input_len(L)
                                bpr_i = base.blocks_per_request(I, T)
                                if (o.num_blocks - 1) // bpr_i < C:
                                    rejected["concurrency × input length > KV capacity"] += 1
                                    continue
                                need = max(need, C * bpr_i * bpb)
                            margin = total_free - o.footprint_bytes
                            if margin < margin_need:
                                rejected["prefill peak margin"] += 1
                                continue
                            if peak_limit is not None and o.footprint_bytes > peak_limit:
                                rejected["peak limit"] += 1
                                continue
                            spare = o.tight_kv_bytes - bpb - need
                            # robust: a pinned pool carries the headroom floor by construction; a profiled one
                            # must still hold the goal at the high end of the activation estimate
                            robust = kvmem is not None or spare >= d_act
                            trials.append(Trial(bi, T, S, util, mode, kvmem, L, o, robust, margin, spare))
        return trials, bases, steps

    def check_option(self) -> list:
        """check --fix's memory edits as a re-planned option ([] when, re-planned here, it does not start)."""
        from oomguard.fit.goalfix import Goal, _option, headroom_floor

        lp = self.launch_plan
        flags, env = self.req.first_edit
        g = self.goal
        env2 = {**self.launch_env, **env}
        floor = headroom_floor(self.gpu.total_bytes, floor_bytes=g.margin_bytes)
        goal = Goal(lp.settings.max_model_len, g.concurrency, g.avg_input_len, user_length="max_model_len" in self.lf)
        o = _option(self._plan, lp, self.lf, env2, dict(flags), goal, self.req.other_gpu_use_bytes, floor)
        if o is None:
            return []
        self._first_env = env
        return [o]

    def goal_fixes(self, fixed: int | None, source: str) -> list:
        """check's ranked goal-keeping edits for a --from launch that will not start (same ranking, same first choice)."""
        lp = self.launch_plan
        if lp is None or source != "the launch's max-model-len" or self.goal.max_context:
            return []
        from oomguard.fit.goalfix import Goal, goal_options, s2_option

        g = self.goal
        if lp.starts:
            # S2: a launch that starts with whole-prompt prefill steps still gets check's OG103 edit first
            o = s2_option(self._plan, dict(self.lf), dict(self.launch_env), lp, other_gpu_use_bytes=self.req.other_gpu_use_bytes, floor_bytes=g.margin_bytes)
            return [o] if o is not None else []
        # the environment check's other fixes set first (VLLM_ALLOW_LONG_MAX_MODEL_LEN for a scaled length)
        env = {**self.launch_env, **(self.req.first_edit[1] if self.req.first_edit else {})}
        base = self._plan(dict(self.lf), env) if env != self.launch_env else lp
        if base.starts:
            return []
        opts = goal_options(
            self._plan,
            dict(self.lf),
            env,
            base,
            model=self.model,
            goal=Goal(fixed or lp.settings.max_model_len, g.concurrency, g.avg_input_len, user_length="max_model_len" in self.lf),
            other_gpu_use_bytes=self.req.other_gpu_use_bytes,
            floor_bytes=g.margin_bytes,
        )
        # fit's own constraints (a peak cap) narrow the list; they never reorder it
        total = self.gpu.total_bytes
        return [o for o in opts if g.peak_limit_bytes is None or total - o.headroom_bytes - self.req.other_gpu_use_bytes <= g.peak_limit_bytes]

    def _recipe_reach(self) -> int:
        """How far the model card's own RoPE recipe reaches (0 without one, or when the config or the
        launch already scales the positions): ``--max-context`` tries it as ``--context`` does."""
        from oomguard.fit.rope import YARN_RECIPES

        rec = YARN_RECIPES.get(getattr(self.model, "model_type", "") or "")
        if rec is None or getattr(self.model, "rope_scaling", None):
            return 0
        return int(rec[0] * rec[1])

    def _long_context(self, length: int) -> int | None:
        """Reach ``length`` beyond the model's native context with its own RoPE recipe (YaRN with the
        factor the length needs), never with the bare VLLM_ALLOW_LONG_MAX_MODEL_LEN. Returns None when
        the recipe is applied, else the native maximum the search must stay within."""
        from oomguard.fit.rope import yarn_recipe
        from oomguard.model.overrides import apply_overrides, rope_reach

        reach = rope_reach(self.model)
        if reach is not None and reach >= length:
            # the launch (or the config) already scales the positions that far: vLLM >= 0.30 still
            # derives the unscaled length for YaRN, so it needs the variable next to the scaling
            if derive_len(self.model, self.v) < length:
                self.env[cmd.ENV_LONG_LEN] = "1"
                self.notes.append(
                    f"max-model-len {length:,} is within the {reach:,} positions the RoPE scaling covers, but vLLM "
                    f"{'.'.join(map(str, self.v))} derives {self.derived:,} from the config: the command adds {cmd.ENV_LONG_LEN}=1"
                )
            self.derived = max(self.derived, length)
            return None
        rope, why = yarn_recipe(self.model, length)
        if rope is None:
            self.notes.append(
                f"max-model-len {length:,} is beyond the model's native {self.derived:,} and {why}: fit does not offer "
                f"{cmd.ENV_LONG_LEN}=1 alone (vLLM warns that positions the model was not trained for give NaNs or garbage)"
            )
            return self.derived
        dest = "hf_overrides" if self.v >= (0, 11, 2) or "hf_overrides" in self.lf else "rope_scaling"
        if dest == "hf_overrides":
            over = dict(self.lf.get("hf_overrides") or {})
            over["rope_scaling"] = rope
            self.lf["hf_overrides"] = over
        else:
            self.lf["rope_scaling"] = rope
        self.added_flags[dest] = self.lf[dest]
        self.model = apply_overrides(self.model, self.lf, self.v)
        if derive_len(self.model, self.v) < length:
            self.env[cmd.ENV_LONG_LEN] = "1"  # >= 0.30 takes YaRN's max_position_embeddings as already scaled
        self.derived = max(self.derived, length)
        self.notes.append(
            f"max-model-len {length:,} is beyond the model's native context: the command adds its own YaRN recipe "
            f"(factor {rope['factor']:g} over {rope['original_max_position_embeddings']:,} tokens; {why})"
            + (f" and {cmd.ENV_LONG_LEN}=1, which this release needs next to it" if cmd.ENV_LONG_LEN in self.env else "")
            + ". A static YaRN factor also scales short requests: when most are short, consider a second instance without it"
        )
        return None

    # ------------------------------------------------------------------ driver
    def run(self) -> FitResult:
        t0 = time.perf_counter()
        goal = self.goal
        fixed, cap, source = self._length_goal()
        for n in getattr(self.launch, "notes", None) or []:
            self.notes.append(n)
        no_recipe_cap = None
        native = (self.model, dict(self.lf), dict(self.env), self.derived, len(self.notes))
        if (fixed or cap) > self.derived and str(self.env.get(cmd.ENV_LONG_LEN, "0")) not in _TRUE:
            no_recipe_cap = self._long_context(fixed or cap)
        from_launch = self.launch is not None
        trials, bases, steps = self.search(fixed, cap, goal.concurrency)
        best = max((t.max_model_len for t in trials), default=0)
        if fixed is None and self.added_flags and best < cap:
            # --max-context tried the model card's RoPE recipe for its full reach; the GPUs hold less.
            # Search again with the factor the reachable length needs, or without the recipe when the
            # native context is all they hold (it would scale every request for nothing).
            # The length offered first is the ranking's (lengths are compared in buckets), not always
            # the longest trial: when it needs a smaller half-step of the factor than the one applied,
            # search again with that length (twice at most).
            for _ in range(3):
                self.model, self.lf, self.env, self.derived = native[0], native[1], native[2], native[3]
                del self.notes[native[4]:]
                self.added_flags = {}
                self.rejected.clear()
                self.searched = 0
                cap = best if best > self.derived else self.derived
                if cap > self.derived:
                    self._long_context(cap)
                used = dict((self.added_flags.get("hf_overrides") or {}).get("rope_scaling")
                            or self.added_flags.get("rope_scaling") or {})
                trials, bases, steps = self.search(None, cap, goal.concurrency)
                orig = used.get("original_max_position_embeddings")
                if not trials or not orig:
                    break
                best = self.rank(trials, bases, from_launch=from_launch, relaxed_len=False)[0][0].max_model_len
                if best <= native[3] or needed_factor(best, orig) >= used.get("factor", 0):
                    break
        relaxed = False
        relaxed_trials: list[Trial] = []
        if not trials and fixed is not None:
            # Relax the length: the largest max-model-len that meets everything else.
            relaxed_trials, bases2, steps2 = self.search(None, min(fixed, no_recipe_cap or fixed), goal.concurrency)
            if relaxed_trials:
                bases, steps = bases2, steps2
        info = None
        launch_offloads = bool(self.lf) and bool(cpu_tier.launch_offload_bytes(self.lf))
        if fixed is not None and not trials and self.rejected.get("kv-too-small"):
            info = self.cpu_tier_info(fixed, bases, *self._gpu_limit(fixed, bases, steps, relaxed_trials))
        elif launch_offloads:
            info = self.cpu_tier_info(fixed or cap, bases, *self._gpu_limit(fixed or cap, bases, steps, trials or relaxed_trials))
        offload = self.offload_for(info)
        result_trials = trials
        closest: list[Candidate] = []
        if relaxed_trials:
            if from_launch and source != "--context":
                result_trials, relaxed = relaxed_trials, True
                self.notes.append(f"the launch's max-model-len {fixed:,} does not fit: the edit lowers it to (near) the largest that does")
            else:
                ranked = self.rank(relaxed_trials, bases, from_launch=from_launch, relaxed_len=True)
                closest = [c for c in (self.candidate(t, p, ch, bases, steps, offload) for t, p, ch in ranked[:3]) if c]
        candidates: list[Candidate] = []
        # check's ranked goal-keeping edits, in check's order (one ranking for both commands): check
        # --fix's own choice first when check made one, then the rest of the same ranked list
        goal_opts = self.check_option() if self.req.first_edit else []
        for o in self.goal_fixes(fixed, source):
            if not any(dict(o.edits) == dict(x.edits) for x in goal_opts):
                goal_opts.append(o)
        goal_opts = goal_opts[: self.req.top]
        ranked = self.rank(result_trials, bases, from_launch=from_launch, relaxed_len=relaxed) if result_trials else []
        for rank_no, option in enumerate(goal_opts, 1):
            # fit's own view of the option when the search found that launch too, else the option as planned
            g = self.goal_candidate(option, rank_no)
            hit = next((i for i, (t, _, _) in enumerate(ranked)
                        if _same_flags(self._flags_for(t, bases[t.base_index][0]), g.flags, _resolved(g.plan))), None)
            if hit is not None:
                t, perf, changes = ranked.pop(hit)
                c = self.candidate(t, perf, changes, bases, steps, offload)
                if c is not None:
                    c.tradeoffs = g.tradeoffs + c.tradeoffs
                    c.summary["goal_fix"] = g.summary["goal_fix"]
                    g = c
            candidates.append(g)
        if goal_opts and not goal_opts[0].keeps_goal:
            self.notes.append(f"nothing keeps max-model-len {fixed:,}: the first edit lowers it (and says so)")
        if ranked:
            for t, perf, changes in ranked:
                c = self.candidate(t, perf, changes, bases, steps, offload)
                if c is not None and not any(_same_edit(c, x) for x in candidates):
                    candidates.append(c)
                if len(candidates) >= self.req.top:
                    break
        goal_d = {
            "objective": goal.objective.value,
            "max_model_len": fixed,
            "max_context": goal.max_context,
            "length_from": source,
            "concurrency": goal.concurrency,
            "avg_input_len": goal.avg_input_len,
            "margin_gib": round(goal.margin_bytes / GiB, 2),
            "peak_limit_gib": round(goal.peak_limit_bytes / GiB, 2) if goal.peak_limit_bytes else None,
            "host_ram_gib": round(goal.host_ram_bytes / GiB, 2) if goal.host_ram_bytes else None,
            "model": self.model_name,
            "gpu": self.gpu.name,
            "num_gpus": self.req.num_gpus,
            "vllm_version": ".".join(map(str, self.v)),
        }
        return FitResult(
            candidates=candidates,
            searched=self.searched,
            goal=goal_d,
            notes=self.notes,
            rejected=dict(self.rejected.most_common()),
            cpu_tier=info,
            closest=closest,
            launch_plan=self.launch_plan,
            elapsed_s=time.perf_counter() - t0,
            from_launch=from_launch,
            goal_lowered=bool(candidates) and (relaxed if not goal_opts else not goal_opts[0].keeps_goal),
        )


def _resolved(plan: Any) -> dict:
    """What a planned launch runs with for the searched flags: vLLM's default where the flags leave one unset
    (a goal-keeping edit leaves --max-num-seqs unset where the search writes its default, 256, out)."""
    s = getattr(plan, "settings", None)
    if s is None:
        return {}
    keys = set(cmd.SEARCHED) | {"enable_chunked_prefill"}
    return {k: getattr(s, k) for k in keys if hasattr(s, k)}


def _same_flags(a: dict, b: dict, defaults: dict | None = None) -> bool:
    keys = set(cmd.SEARCHED) | {"enable_chunked_prefill"}
    norm = {"kv_cache_dtype": "auto", "enforce_eager": False, "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
            **(defaults or {})}
    return all(a.get(k, norm.get(k)) == b.get(k, norm.get(k)) for k in keys)


def _same_edit(a: Candidate, b: Candidate) -> bool:
    # Both are planned: an unset flag is the value vLLM resolves it to, so "--max-num-seqs 256" written out
    # and left to its default are one launch (fit used to list check's fix and the same search result twice).
    ra, rb = _resolved(a.plan), _resolved(b.plan)
    return _same_flags({**ra, **a.flags}, {**rb, **b.flags})


def fit(req: FitRequest, *, checkpoints: bool = True) -> FitResult:
    """Search the launches of ``req.model`` on ``req.num_gpus`` × ``req.gpu`` and rank those that meet ``req.goal``
    (and, without ``--from``, the best launch of each quantized checkpoint of the model, unless ``checkpoints`` is off)."""
    # The search keeps ~10^5 small objects alive; the cyclic GC rescanning them would dominate the run.
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = _Search(req).run()
        if req.launch is None and checkpoints:
            result.checkpoints = _checkpoint_candidates(req)
        _set_aside(req.launch, result)
        return result
    finally:
        if enabled:
            gc.enable()


def _set_aside(launch: Any, result: FitResult) -> None:
    """A --from launch read with --lenient keeps flags this release does not know out of the search: vLLM
    itself stops on them ('unrecognized arguments'), so the launch as written does not start, and every
    shown launch's edit says it drops them (fit used to print "no edit needed" over a dropped --swap-space)."""
    if launch is None:
        return
    unknown = [(opt, value, file, line) for opt, value, file, line in getattr(launch, "unknown", []) if opt.startswith("--")]
    if not unknown:
        return
    result.rejected_flags = [opt for opt, *_ in unknown]
    removals = [cmd.Change(opt[2:].replace("-", "_"), value if value is not None else True, None, None, file, line)
                for opt, value, file, line in unknown]
    carried = any(r.dest == "rope_scaling" for r in removals) and "rope_scaling" in (launch.flags.get("hf_overrides") or {})
    if carried:
        # the plan already read --rope-scaling as --hf-overrides (cli.common._carry_removed_flags): the edit says so
        site = next(r for r in removals if r.dest == "rope_scaling")
        removals.append(cmd.Change("hf_overrides", None, launch.flags["hf_overrides"], None, site.file, site.line))
    for c in [*result.candidates, *result.closest]:
        c.edit = removals + [ch for ch in (c.edit or []) if ch.dest not in {r.dest for r in removals}]
    for note in launch.report_notes():
        if carried and "--rope-scaling" in note and note.endswith("not applied"):
            continue  # it was applied, as --hf-overrides (the note above says so)
        if note not in result.notes:
            result.notes.append(note)


def _checkpoint_candidates(req: FitRequest) -> list[Candidate]:
    """The best launch of each quantized checkpoint of the same model in the catalog (same goal)."""
    from oomguard.records import replace as dc_replace

    from oomguard.errors import OomguardError
    from oomguard.fit.checkpoints import siblings
    from oomguard.inputs.model_config import catalog_ids, load_model

    name = req.model_name or getattr(req.model, "name", "")
    out = []
    for cid, fmt, trade in siblings(name, req.gpu if hasattr(req.gpu, "fp8") else None, catalog_ids()):
        try:
            model = load_model(cid, allow_hub=False)
        except OomguardError:
            continue
        sub = _Search(dc_replace(req, model=model, model_name=cid, top=1)).run()
        if sub.candidates:
            c = sub.candidates[0]
            c.tradeoffs.insert(0, f"{fmt} checkpoint of the same model ({cid}): {trade}")
            out.append(c)
    return out

