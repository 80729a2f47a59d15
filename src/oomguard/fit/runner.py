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
import math
import time
from collections import Counter
from dataclasses import dataclass, field

from oomguard.fit import command as cmd
from oomguard.fit import cpu_tier, tradeoffs
from oomguard.fit.result import Candidate, FitResult
from oomguard.fit.roofline import LABEL, Roofline, prefill_steps
from oomguard.fit.search import Base, Outcome, Step, capacity, evaluate, kv_bytes_for, make_base, make_step, max_len
from oomguard.fit.space import Goal, KVMemoryMode, Objective, Structure, build_space
from oomguard.model.engine import default_batch_limits, derive_len, parse_version
from oomguard.model.planner import plan_launch
from oomguard.units import GiB, MiB

_BUCKET = math.log(1.03)  # scores within ~3% count as equal; the next criterion decides
_TRUE = ("1", "true", "True", "yes")


@dataclass
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


@dataclass(slots=True)
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


def _bucket(x: float, step: float = _BUCKET) -> int:
    return int(round(math.log(x) / step)) if x > 0 else -10**9


_COARSE = math.log(1.10)  # with --from and an explicit objective: gains under ~10% do not justify a bigger edit


def _round_len(n: int, block: int) -> int:
    """A max-model-len that reads well: whole KiB-of-tokens above 16K, whole blocks below."""
    if n > 16384:
        return n // 1024 * 1024
    return max(0, n // block * block)


class _Search:
    """The state of one fit run (bases, steps, caches); ``run`` returns the FitResult."""

    def __init__(self, req: FitRequest):
        self.req = req
        self.model, self.gpu, self.goal = req.model, req.gpu, req.goal
        self.v = parse_version(req.version)
        launch = req.launch
        self.launch = launch
        self.lf = dict(launch.flags) if launch is not None else {}
        self.launch_env = dict(launch.env) if launch is not None else {}
        self.env = dict(self.launch_env)  # what plans run with (fit may add VLLM_ALLOW_LONG_MAX_MODEL_LEN)
        self.notes: list[str] = []
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
        return plan_launch(self.model, self.gpu, flags, env, version=r.version, num_gpus=r.num_gpus, other_gpu_use_bytes=r.other_gpu_use_bytes, usage=r.usage)

    def _length_goal(self) -> tuple[int | None, int, str]:
        """(fixed max-model-len or None for a search, the search's upper bound, where it came from)."""
        g = self.goal
        if g.max_context:
            cap = g.context or max(self.derived, self.ls.max_model_len if self.ls else 0)
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
            base = make_base(self.model, self.gpu, flags, self.env, version=r.version, num_gpus=r.num_gpus, other_gpu_use_bytes=r.other_gpu_use_bytes, usage=r.usage)
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
            step = make_step(self.model, self.gpu, flags, self.env, version=self.req.version, token_budget=T, num_seqs=S, usage=self.req.usage)
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
        space = build_space(self.model, self.gpu, self.req.num_gpus, launched_flags=self.lf, launched_settings=self.ls, goal=goal, version=self.v)
        for n in space.notes:
            if n not in self.notes:
                self.notes.append(n)
        bases = self._bases(space.structures, common, fixed_len or min(cap, 4096))
        steps: dict = {}
        trials: list[Trial] = []
        C = concurrency
        chunked = self.ls.enable_chunked_prefill if self.ls is not None else True
        rejected = self.rejected
        margin_req = goal.margin_bytes
        peak_limit = goal.peak_limit_bytes
        per_len_c = C if (C and not goal.avg_input_len) else None
        fixed_input = goal.input_len(fixed_len) if fixed_len else None
        for bi, (st, base) in enumerate(bases):
            eager = st.enforce_eager
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
                                kvmem = kv_bytes_for(base, fixed_len, T, C or 1, fixed_input if C else None)
                            else:
                                kvmem = self._max_safe_kv(base, step, eager)
                                if kvmem <= 0:
                                    continue
                        margin_need = margin_req + (d_act if kvmem is not None else 0)
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
                            trials.append(Trial(bi, T, S, util, mode, kvmem, L, o, kvmem is not None or spare >= d_act, margin, spare))
        return trials, bases, steps

    # ------------------------------------------------------------------ ranking
    def _roofline(self, cache: dict, bi: int, base: Base, st: Structure) -> Roofline:
        rl = cache.get(bi)
        if rl is None:
            rl = Roofline.build(
                self.model,
                self.gpu,
                tensor_parallel_size=st.tensor_parallel_size,
                weights_bytes=sum(r.weights_bytes for r in base.ranks),
                kv_bytes_per_token=base.kv_bytes_per_token,
                eager=st.enforce_eager,
            )
            cache[bi] = rl
        return rl

    def _score(self, t: Trial, bases, rl_cache: dict, perf_cache: dict) -> tuple[tuple, dict, int, int]:
        """(objective key, roofline figures, decode batch, requests of the input length the pool holds)."""
        base = bases[t.base_index][1]
        goal = self.goal
        L = t.max_model_len
        I = goal.input_len(L)
        bpr = base.blocks_per_request(I, t.token_budget)
        cap_i = max(0, (t.outcome.num_blocks - 1) // bpr) if bpr else 0
        b = max(1, min(t.num_seqs, cap_i))
        key = (t.base_index, t.token_budget, b, I)
        perf = perf_cache.get(key)
        if perf is None:
            rl = self._roofline(rl_cache, t.base_index, base, bases[t.base_index][0])
            b_lat = max(1, min(b, goal.concurrency or 1))
            perf = {
                "decode_tokens_per_s": rl.decode_tokens_per_s(b, I),
                "prefill_tokens_per_s": rl.prefill_tokens_per_s(I, t.token_budget),
                "ttft_s": rl.prefill_s(I, t.token_budget),
                "itl_s": rl.mixed_step_s(t.token_budget, b_lat, I),
            }
            perf["_buckets"] = (_bucket(perf["decode_tokens_per_s"]), _bucket(perf["prefill_tokens_per_s"]), -_bucket(perf["ttft_s"] + perf["itl_s"]))
            perf_cache[key] = perf
        dec, pre, lat = perf["_buckets"]
        obj = goal.objective
        if obj is Objective.THROUGHPUT:
            k = (dec, pre)
        elif obj is Objective.LATENCY:
            k = (lat, dec)
        elif obj is Objective.MAX_CONTEXT:
            k = (_bucket(L), dec)
        else:
            k = (_bucket(b), dec)
        return k + (t.margin_bytes // (256 * MiB),), perf, b, cap_i

    def _coarse(self, t: Trial, perf: dict, b: int) -> int:
        obj = self.goal.objective
        if obj is Objective.THROUGHPUT:
            return _bucket(perf["decode_tokens_per_s"], _COARSE)
        if obj is Objective.LATENCY:
            return -_bucket(perf["ttft_s"] + perf["itl_s"], _COARSE)
        if obj is Objective.MAX_CONTEXT:
            return _bucket(t.max_model_len, _COARSE)
        return _bucket(b, _COARSE)

    def _new_values(self, t: Trial, bases) -> dict:
        st, _ = bases[t.base_index]
        return {
            "tensor_parallel_size": st.tensor_parallel_size,
            "pipeline_parallel_size": st.pipeline_parallel_size,
            "kv_cache_dtype": st.kv_cache_dtype,
            "enforce_eager": st.enforce_eager,
            "max_num_batched_tokens": t.token_budget,
            "max_num_seqs": t.num_seqs,
            "gpu_memory_utilization": t.utilization,
            "max_model_len": t.max_model_len,
            "kv_cache_memory_bytes": t.kv_memory_bytes,
        }

    def _effective(self) -> dict:
        """What the --from launch runs with for every searched flag (vLLM's default where it is unset)."""
        ls = self.ls
        return {
            "tensor_parallel_size": ls.tensor_parallel_size,
            "pipeline_parallel_size": ls.pipeline_parallel_size,
            "kv_cache_dtype": str(ls.kv_cache_dtype),
            "enforce_eager": ls.enforce_eager,
            "max_num_batched_tokens": ls.max_num_batched_tokens,
            "max_num_seqs": ls.max_num_seqs,
            "gpu_memory_utilization": ls.gpu_memory_utilization,
            "max_model_len": ls.max_model_len,
            "kv_cache_memory_bytes": ls.kv_cache_memory_bytes,
        }

    def _edit_size(self, t: Trial, bases, eff: dict) -> tuple[tuple, float]:
        """(changed flags, total magnitude) of the edit that turns the launch into ``t``; no objects built."""
        changed = []
        size = 0.0
        for dest, value in self._new_values(t, bases).items():
            old = eff[dest]
            if value == old:
                continue
            changed.append(dest)
            size += cmd.magnitude(cmd.Change(dest, old, value, old))
        if self._env_for(t):
            changed.append(cmd.ENV_LONG_LEN)
            size += 0.5
        return tuple(changed), size

    def _changes(self, t: Trial, bases) -> list[cmd.Change]:
        """The --from edit: each searched flag whose value differs from what the launch runs with."""
        eff = self._effective()
        sites = getattr(self.launch, "sites", None) or {}
        out = []
        for dest, value in self._new_values(t, bases).items():
            if value == eff[dest]:
                continue
            site = sites.get(dest)
            out.append(cmd.Change(dest, self.lf.get(dest), value, eff[dest], getattr(site, "file", None), getattr(site, "line", None)))
        for k, val in self._env_for(t).items():
            out.append(cmd.Change(k, self.launch_env.get(k), val, None, is_env=True))
        return out

    def _env_for(self, t: Trial) -> dict:
        """Environment the candidate needs beyond the launch's own."""
        if t.max_model_len > self.derived and str(self.launch_env.get(cmd.ENV_LONG_LEN, "0")) not in _TRUE:
            return {cmd.ENV_LONG_LEN: "1"}
        return {}

    def rank(self, trials: list[Trial], bases, *, from_launch: bool, relaxed_len: bool) -> list[tuple[Trial, dict, list]]:
        rl_cache: dict = {}
        perf_cache: dict = {}
        if relaxed_len and trials:
            # The length is what the goal gave up: stay within 10% of the longest that fits, then edit least.
            best = max(t.max_model_len for t in trials)
            trials = [t for t in trials if t.max_model_len >= 0.9 * best]
        eff = self._effective() if from_launch else None
        scored = []
        for t in trials:
            k, perf, b, cap_i = self._score(t, bases, rl_cache, perf_cache)
            st, _ = bases[t.base_index]
            fp8 = st.kv_cache_dtype != "auto" and (not from_launch or st.kv_cache_dtype != eff["kv_cache_dtype"])
            # An fp8 cache costs accuracy: it wins only where it raises the objective itself.
            obj = (-k[0], fp8) + tuple(-x for x in k[1:])
            if from_launch:
                changed, size = self._edit_size(t, bases, eff)
                key = (len(changed), not t.robust, round(size, 3), obj)
                if self.goal.explicit_objective and not relaxed_len:
                    key = (-self._coarse(t, perf, b),) + key
            else:
                changed = ()
                key = (not t.robust, obj)
            scored.append((key, t, (perf, b, cap_i), changed, k))
        scored.sort(key=lambda x: x[0])
        # One candidate per shape, so the list shows alternatives rather than near-copies; an alternative
        # whose edit only adds changes to one already shown must also do better on the objective.
        seen = set()
        shown: list[tuple[frozenset, tuple]] = []
        out = []
        for key, t, perf, changed, k in scored:
            st, _ = bases[t.base_index]
            if from_launch:
                shape = frozenset(changed)
                if any(prev <= shape and pk >= k for prev, pk in shown):
                    continue
            else:
                shape = (st, t.mode, t.token_budget if self.goal.objective is Objective.LATENCY else None)
            if shape in seen:
                continue
            seen.add(shape)
            shown.append((frozenset(changed), k))
            perf, b, cap_i = perf
            out.append((t, {k2: v for k2, v in perf.items() if not k2.startswith("_")} | {"batch": b, "capacity_at_input": cap_i}, self._changes(t, bases) if from_launch else []))
            if len(out) >= self.req.top * 3:
                break
        return out

    # ------------------------------------------------------------------ output
    def _flags_for(self, t: Trial, st: Structure) -> dict:
        lf = self.lf
        flags = {k: v for k, v in lf.items() if k not in cmd.SEARCHED}
        if lf.get("kv_offloading_size") is not None:
            flags["kv_offloading_size"] = lf["kv_offloading_size"]
        if st.tensor_parallel_size != 1 or "tensor_parallel_size" in lf:
            flags["tensor_parallel_size"] = st.tensor_parallel_size
        if st.pipeline_parallel_size != 1 or "pipeline_parallel_size" in lf:
            flags["pipeline_parallel_size"] = st.pipeline_parallel_size
        if st.kv_cache_dtype != "auto" or "kv_cache_dtype" in lf:
            flags["kv_cache_dtype"] = st.kv_cache_dtype
        if st.enforce_eager:
            flags["enforce_eager"] = True
        flags["max_num_batched_tokens"] = t.token_budget
        flags["max_num_seqs"] = t.num_seqs
        flags["gpu_memory_utilization"] = t.utilization
        flags["max_model_len"] = t.max_model_len
        if t.kv_memory_bytes is not None:
            flags["kv_cache_memory_bytes"] = t.kv_memory_bytes
        return flags

    def _ref_budget(self) -> tuple[int, str]:
        if self.ls is not None:
            return self.ls.max_num_batched_tokens, "the launch's"
        t, _ = default_batch_limits(self.v, self.gpu.total_bytes, self.gpu.name, usage=self.req.usage)
        return t, "vLLM's default"

    def candidate(self, t: Trial, perf: dict, changes: list, bases, steps: dict, offload: dict | None) -> Candidate | None:
        st, base = bases[t.base_index]
        flags = self._flags_for(t, st)
        env = {**self.launch_env, **self._env_for(t)}
        if offload is not None and offload.get("size_bytes"):
            before = dict(flags)
            flags = cpu_tier.set_offload(flags, offload["size_bytes"], self.v)
            if self.launch is not None:
                for dest in ("kv_offloading_size", "kv_transfer_config"):
                    if flags.get(dest) != before.get(dest) and flags.get(dest) != self.lf.get(dest):
                        site = (getattr(self.launch, "sites", {}) or {}).get(dest)
                        changes = changes + [cmd.Change(dest, self.lf.get(dest), flags.get(dest), None, getattr(site, "file", None), getattr(site, "line", None))]
        plan = self._plan(flags, env)
        if not plan.starts:
            self.notes.append(f"dropped a candidate the fast path passed but plan_launch rejects ({plan.failure.value}): please report")
            return None
        step = steps[(st.tensor_parallel_size, st.pipeline_parallel_size, t.token_budget, t.num_seqs)]
        ref_T, ref_src = self._ref_budget()
        ref_step = steps.get((st.tensor_parallel_size, st.pipeline_parallel_size, ref_T, t.num_seqs))
        if ref_step is None:
            common = {k: v for k, v in self.lf.items() if k not in cmd.SEARCHED}
            ref_step = self._step(steps, common, st, ref_T, min(t.num_seqs, ref_T))
        tight = t.outcome.tight_rank
        rl = self._roofline({}, t.base_index, base, st)
        I = self.goal.input_len(t.max_model_len)
        ctx = tradeoffs.Context(
            gpu=self.gpu,
            model=self.model,
            roofline=rl,
            token_budget=t.token_budget,
            ref_token_budget=ref_T,
            ref_source=ref_src,
            activation_bytes=step.activation_bytes[-1],
            ref_activation_bytes=ref_step.activation_bytes[-1],
            activation_high_bytes=step.activation_high_bytes[tight],
            max_model_len=t.max_model_len,
            input_len=I,
            kv_cache_dtype=plan.settings.kv_cache_dtype,
            kv_bytes_per_token=plan.kv_bytes_per_token,
            eager=st.enforce_eager,
            graphs_bytes=plan.tight_rank.cuda_graph.bytes,
            cudagraph_mode=plan.settings.cudagraph_mode,
            utilization=t.utilization,
            requested_bytes=t.outcome.requested_bytes,
            total_bytes=self.gpu.total_bytes,
            footprint_bytes=t.outcome.footprint_bytes,
            other_bytes=self.req.other_gpu_use_bytes,
            kv_pool_bytes=t.outcome.num_blocks * base.ranks[tight].bytes_per_block,
            kv_cache_tokens=plan.kv_cache_tokens,
            one_request_bytes=plan.one_request_bytes,
            spare_bytes=t.spare_bytes,
            pinned_kv_bytes=t.kv_memory_bytes,
            tensor_parallel_size=st.tensor_parallel_size,
            pipeline_parallel_size=st.pipeline_parallel_size,
            weights_bytes=max(r.weights_bytes for r in base.ranks),
            num_seqs=t.num_seqs,
            capacity_at_input=perf["capacity_at_input"],
            concurrency=self.goal.concurrency,
            decode_concurrency=perf["batch"],
        )
        lines = tradeoffs.for_candidate(ctx)
        if offload is not None:
            lines.extend(offload.get("lines", []))
        estimates = {
            "label": LABEL,
            "prefill_steps_max_len": prefill_steps(t.max_model_len, t.token_budget),
            "ttft_max_len_s": round(rl.prefill_s(t.max_model_len, t.token_budget), 3),
            "ttft_input_len_s": round(perf["ttft_s"], 3),
            "prefill_tokens_per_s": round(perf["prefill_tokens_per_s"], 1),
            "decode_tokens_per_s": round(perf["decode_tokens_per_s"], 1),
            "decode_concurrency": perf["batch"],
            "itl_with_prefill_chunk_s": round(perf["itl_s"], 4),
        }
        summary = {
            "max_model_len": t.max_model_len,
            "kv_cache_tokens": plan.kv_cache_tokens,
            "capacity_at_input_len": perf["capacity_at_input"],
            "input_len": I,
            "peak_gib": round(t.outcome.footprint_bytes / GiB, 2),
            "margin_gib": round(t.margin_bytes / GiB, 2),
            "spare_kv_gib": round(t.spare_bytes / GiB, 2),
            "robust": t.robust,
            "kv_sizing": t.mode.value,
        }
        command = cmd.render(self.model_name, flags, {k: v for k, v in env.items() if k in self._env_to_print(env)}, version=self.v, program=getattr(self.launch, "program", "vllm serve") or "vllm serve")
        return Candidate(flags, env, command, plan, lines, estimates, summary, changes if self.launch is not None else None, offload)

    def _env_to_print(self, env: dict) -> set:
        # Only the variables that change vLLM's verdict belong on the command line.
        keep = {cmd.ENV_LONG_LEN, "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_USE_V1", "VLLM_PP_LAYER_PARTITION", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_USE_V2_MODEL_RUNNER", "PYTORCH_CUDA_ALLOC_CONF"}
        return {k for k in env if k in keep}

    # ------------------------------------------------------------------ the CPU tier
    def _gpu_limit(self, length: int, bases, steps: dict, trials: list[Trial]) -> tuple[int, str]:
        """The longest request the GPUs hold: from the searched launches, else the raw pool at util 0.95."""
        if trials:
            t = max(trials, key=lambda x: x.max_model_len)
            st, base = bases[t.base_index]
            pool = t.outcome.num_blocks * base.ranks[t.outcome.tight_rank].bytes_per_block
            n = t.max_model_len
            how = "pinned" if t.kv_memory_bytes is not None else f"util {t.utilization:g}"
            return n, (
                f"TP {st.tensor_parallel_size} PP {st.pipeline_parallel_size} {st.kv_cache_dtype} KV, {pool / GiB:.2f} GiB per GPU ({how}), "
                f"token budget {t.token_budget}, within the {self.goal.margin_bytes / GiB:g} GiB margin"
            )
        best_len, best_desc = 0, "no launch leaves room for KV"
        common = {k: v for k, v in self.lf.items() if k not in cmd.SEARCHED}
        for st, base in bases:
            step = self._step(steps, common, st, 256, 1)
            o = evaluate(base, step, 0.95, base.block_size)
            if o.failure is None or o.failure.value == "kv-too-small":
                n = max_len(base, step, 0.95, None, cap=max(length, self.derived) * 4)
                if n > best_len:
                    pool = o.num_blocks * base.ranks[o.tight_rank].bytes_per_block
                    best_len = n
                    best_desc = f"TP {st.tensor_parallel_size} PP {st.pipeline_parallel_size} {st.kv_cache_dtype} KV, {pool / GiB:.2f} GiB per GPU at util 0.95, token budget 256, no margin"
        return best_len, best_desc

    def cpu_tier_info(self, length: int, bases, gpu_max_len: int, gpu_desc: str) -> dict | None:
        """One full request of ``length`` tokens against the GPU pool and host RAM (the launch's split and dtype)."""
        if not bases:
            return None
        ls = self.ls
        ref = None
        if ls is not None:
            want = str(self.lf.get("kv_cache_dtype") or "auto")
            ref = next(((st, b) for st, b in bases if st.kv_cache_dtype == want and (st.tensor_parallel_size, st.pipeline_parallel_size) == (ls.tensor_parallel_size, ls.pipeline_parallel_size)), None)
        st, base = ref or max(bases, key=lambda x: (x[0].tensor_parallel_size * x[0].pipeline_parallel_size, x[0].kv_cache_dtype != "auto"))
        per_gpu = base.kv_bytes_per_token
        cpu_per_token = per_gpu * st.tensor_parallel_size
        workers = st.tensor_parallel_size * st.pipeline_parallel_size
        weights = self.model.checkpoint_bytes or int(sum(r.weights_bytes for r in base.ranks) * st.tensor_parallel_size)
        launch_bytes = cpu_tier.launch_offload_bytes(self.lf)
        host = self.goal.host_ram_bytes
        need = pinned = largest = None
        size = launch_bytes or int(length * cpu_per_token)
        if host is not None:
            flags = cpu_tier.set_offload(
                {**self.lf, "tensor_parallel_size": st.tensor_parallel_size, "pipeline_parallel_size": st.pipeline_parallel_size, "max_model_len": length}, size, self.v
            )
            hn = cpu_tier.host_need(flags, weights_bytes=weights, world_size=workers, env=self.env, version=self.req.version)
            need = hn.expected_bytes
            comp = hn.component("kv offload (CPU tier)")
            pinned = comp.expected_bytes if comp else None
            largest = cpu_tier.largest_offload(flags, weights_bytes=weights, world_size=workers, engine_workers=workers, env=self.env, version=self.req.version, host_ram_bytes=host)
        info = cpu_tier.analyse(
            length=length,
            cpu_bytes_per_token=cpu_per_token,
            gpu_max_len=gpu_max_len,
            gpu_max_desc=gpu_desc,
            per_gpu_bytes_per_token=per_gpu,
            world_size=st.tensor_parallel_size,
            launch_bytes=launch_bytes,
            host_ram_bytes=host,
            host_need_bytes=need,
            host_need_pinned_bytes=pinned,
            largest_fit_bytes=largest,
            sized_bytes=size,
            prefill=self._long_prefill(length, st, base),
        )
        info["engine_workers"] = workers
        return info

    def _long_prefill(self, length: int, st: Structure, base: Base) -> tuple[int, int, float]:
        budget = self.ls.max_num_batched_tokens if self.ls is not None else self._ref_budget()[0]
        rl = Roofline.build(self.model, self.gpu, tensor_parallel_size=st.tensor_parallel_size, weights_bytes=sum(r.weights_bytes for r in base.ranks), kv_bytes_per_token=base.kv_bytes_per_token, eager=st.enforce_eager)
        return budget, prefill_steps(length, budget), rl.prefill_s(length, budget)

    def offload_for(self, info: dict | None) -> dict | None:
        """The CPU tier each candidate carries: the launch's (shrunk to fit host RAM), or the largest that fits."""
        if info is None:
            return None
        launch_bytes = info.get("launch_cpu_bytes")
        host = info.get("host_ram_bytes")
        largest = info.get("largest_fit_bytes")
        size = None
        if launch_bytes:
            size = launch_bytes
            if host is not None and info.get("host_need_bytes") and info["host_need_bytes"] > host:
                size = largest or 0
        elif host is not None and info.get("needs_cpu_tier") and largest:
            size = largest
        if size is None:
            return None
        workers = info.get("engine_workers", 1)
        tokens = int(size / info["bytes_per_token"]) if info["bytes_per_token"] else 0
        line = (
            f"CPU tier {size / GiB:.0f} GiB in all ({workers} workers × {size / workers / GiB:.1f} GiB, pinned): keeps ~{tokens:,} tokens of "
            "evicted KV for prefix reuse"
            + (f" — a whole {info['length']:,}-token request fits in it" if tokens >= info["length"] else f" — less than one {info['length']:,}-token request")
            + (f"; sized against {host / GiB:.0f} GiB of host RAM" if host is not None else "")
        )
        if size == 0:
            line = "no CPU tier fits in host RAM next to the rest of the server: offloading removed"
        return {"size_bytes": size, "lines": [line]}

    # ------------------------------------------------------------------ driver
    def run(self) -> FitResult:
        t0 = time.perf_counter()
        goal = self.goal
        fixed, cap, source = self._length_goal()
        for n in getattr(self.launch, "notes", None) or []:
            self.notes.append(n)
        if (fixed or cap) > self.derived and str(self.env.get(cmd.ENV_LONG_LEN, "0")) not in _TRUE:
            self.notes.append(
                f"max-model-len {(fixed or cap):,} is above the model's derived maximum ({self.derived:,}): the command sets "
                f"{cmd.ENV_LONG_LEN}=1; quality beyond the trained context depends on the model's RoPE scaling"
            )
            self.env[cmd.ENV_LONG_LEN] = "1"
        from_launch = self.launch is not None
        trials, bases, steps = self.search(fixed, cap, goal.concurrency)
        relaxed = False
        relaxed_trials: list[Trial] = []
        if not trials and fixed is not None:
            # Relax the length: the largest max-model-len that meets everything else.
            relaxed_trials, bases2, steps2 = self.search(None, fixed, goal.concurrency)
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
        if result_trials:
            ranked = self.rank(result_trials, bases, from_launch=from_launch, relaxed_len=relaxed)
            for t, perf, changes in ranked:
                c = self.candidate(t, perf, changes, bases, steps, offload)
                if c is not None:
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
        )


def fit(req: FitRequest) -> FitResult:
    """Search the launches of ``req.model`` on ``req.num_gpus`` × ``req.gpu`` and rank those that meet ``req.goal``."""
    # The search keeps ~10^5 small objects alive; the cyclic GC rescanning them would dominate the run.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Search(req).run()
    finally:
        if enabled:
            gc.enable()
