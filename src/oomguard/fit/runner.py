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


@dataclass
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
    key: tuple = field(default=(), compare=False)


def _bucket(x: float) -> int:
    return int(round(math.log(x) / _BUCKET)) if x > 0 else -10**9


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
        self.env = dict(launch.env) if launch is not None else {}
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
        for bi, (st, base) in enumerate(bases):
            eager = st.enforce_eager
            for T in space.token_budgets:
                if not chunked and fixed_len and T < fixed_len:
                    continue
                for S in space.num_seqs:
                    if S > T or (C and S < C):
                        continue
                    step = self._step(steps, common, st, T, S)
                    d_act = max(h - a for h, a in zip(step.activation_high_bytes, step.activation_bytes))
                    for mode in space.kv_memory_modes:
                        for util in space.utilizations:
                            L = fixed_len
                            kvmem = None
                            if mode is KVMemoryMode.PINNED_AS_LAUNCHED:
                                kvmem = space.launched_kv_memory_bytes
                            elif mode is KVMemoryMode.PINNED_TO_NEED and L is not None:
                                kvmem = kv_bytes_for(base, L, T, C or 1, goal.input_len(L) if C else None)
                            elif mode is KVMemoryMode.PINNED_TO_NEED:
                                kvmem = self._max_safe_kv(base, step, eager)
                                if kvmem <= 0:
                                    continue
                            if L is None:
                                # --max-context: the length is the varied quantity; keep the estimate's error as slack.
                                per_len_c = C if (C and not goal.avg_input_len) else None
                                reserve = d_act if kvmem is None else 0
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
                            I = goal.input_len(L)
                            bpb = base.ranks[o.tight_rank].bytes_per_block
                            need = o.one_request_bytes
                            if C:
                                cap_i = capacity(base, o, I, T)
                                if cap_i < C:
                                    rejected["concurrency × input length > KV capacity"] += 1
                                    continue
                                need = max(need, C * base.blocks_per_request(I, T) * bpb)
                            margin = base.total_bytes - base.other_bytes - o.footprint_bytes
                            if margin < margin_req + (d_act if kvmem is not None else 0):
                                rejected["prefill peak margin"] += 1
                                continue
                            if peak_limit is not None and o.footprint_bytes > peak_limit:
                                rejected["peak limit"] += 1
                                continue
                            spare = o.tight_kv_bytes - bpb - need
                            robust = kvmem is not None or spare >= d_act
                            trials.append(Trial(bi, T, S, util, mode, kvmem, L, o, robust, margin, spare))
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

    def _score(self, t: Trial, bases, rl_cache: dict, perf_cache: dict) -> tuple[tuple, dict]:
        st, base = bases[t.base_index]
        goal = self.goal
        L = t.max_model_len
        I = goal.input_len(L)
        cap_i = capacity(base, t.outcome, I, t.token_budget)
        b = max(1, min(t.num_seqs, cap_i))
        key = (t.base_index, t.token_budget, b, I)
        perf = perf_cache.get(key)
        if perf is None:
            rl = self._roofline(rl_cache, t.base_index, base, st)
            b_lat = max(1, min(b, goal.concurrency or 1))
            perf = {
                "decode_tokens_per_s": rl.decode_tokens_per_s(b, I),
                "prefill_tokens_per_s": rl.prefill_tokens_per_s(t.token_budget, I // 2),
                "ttft_s": rl.prefill_s(I, t.token_budget),
                "itl_s": rl.mixed_step_s(t.token_budget, b_lat, I),
            }
            perf_cache[key] = perf
        obj = goal.objective
        dec, pre = _bucket(perf["decode_tokens_per_s"]), _bucket(perf["prefill_tokens_per_s"])
        if obj is Objective.THROUGHPUT:
            k = (dec, pre)
        elif obj is Objective.LATENCY:
            k = (-_bucket(perf["ttft_s"] + perf["itl_s"]), dec)
        elif obj is Objective.MAX_CONTEXT:
            k = (_bucket(L), dec)
        else:
            k = (_bucket(b), dec)
        return k + (t.margin_bytes // (256 * MiB),), {**perf, "batch": b, "capacity_at_input": cap_i}

    def _changes(self, t: Trial, bases) -> list[cmd.Change]:
        """The --from edit: each searched flag whose value differs from what the launch runs with."""
        st, base = bases[t.base_index]
        ls, lf = self.ls, self.lf
        sites = getattr(self.launch, "sites", {}) or {}
        new = {
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
        out = []
        for dest, value in new.items():
            effective = getattr(ls, dest) if dest != "kv_cache_memory_bytes" else ls.kv_cache_memory_bytes
            if dest == "kv_cache_dtype" and str(effective) == str(value):
                continue
            if value == effective:
                continue
            site = sites.get(dest)
            out.append(cmd.Change(dest, lf.get(dest), value, effective, getattr(site, "file", None), getattr(site, "line", None)))
        env = self._env_for(t)
        for k, val in env.items():
            if self.env.get(k) != val:
                out.append(cmd.Change(k, self.env.get(k), val, None, is_env=True))
        return out

    def _env_for(self, t: Trial) -> dict:
        env = {}
        if t.max_model_len > self.derived and str(self.env.get(cmd.ENV_LONG_LEN, "0")) not in _TRUE:
            env[cmd.ENV_LONG_LEN] = "1"
        return env

    def rank(self, trials: list[Trial], bases, *, from_launch: bool, relaxed_len: bool) -> list[tuple[Trial, dict, list]]:
        rl_cache: dict = {}
        perf_cache: dict = {}
        scored = []
        for t in trials:
            k, perf = self._score(t, bases, rl_cache, perf_cache)
            changes = self._changes(t, bases) if from_launch else []
            if from_launch:
                size = sum(cmd.magnitude(c) for c in changes)
                if relaxed_len:
                    key = (-_bucket(t.max_model_len), len(changes), not t.robust, round(size, 3), tuple(-x for x in k))
                else:
                    key = (len(changes), not t.robust, round(size, 3), tuple(-x for x in k))
            else:
                key = (not t.robust, tuple(-x for x in k))
            scored.append((key, t, perf, changes))
        scored.sort(key=lambda x: x[0])
        # One candidate per shape, so the list shows alternatives rather than near-copies.
        seen = set()
        out = []
        for key, t, perf, changes in scored:
            st, _ = bases[t.base_index]
            shape = frozenset(c.dest for c in changes) if from_launch else (st, t.mode, t.token_budget if self.goal.objective is Objective.LATENCY else None)
            if shape in seen:
                continue
            seen.add(shape)
            out.append((t, perf, changes))
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
        env = {**self.env, **self._env_for(t)}
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
    def cpu_tier_info(self, length: int, bases, steps: dict) -> dict | None:
        if not bases:
            return None
        best_len, best_desc, best = 0, "", None
        common = {k: v for k, v in self.lf.items() if k not in cmd.SEARCHED}
        for st, base in bases:
            step = self._step(steps, common, st, 256, 1)
            for util in (0.95, 0.92, 0.90):
                o = evaluate(base, step, util, base.block_size)
                if o.failure is None or o.failure.value == "kv-too-small":
                    n = max_len(base, step, util, None, cap=max(length, self.derived) * 4)
                    if n > best_len:
                        pool = o.num_blocks * base.ranks[o.tight_rank].bytes_per_block
                        best_len, best = n, (st, base)
                        best_desc = f"TP {st.tensor_parallel_size} PP {st.pipeline_parallel_size} {st.kv_cache_dtype} KV, {pool / GiB:.2f} GiB per GPU at util {util:g}, token budget 256"
                    break
        if best is None:
            return None
        st, base = best
        # The launch's own dtype/split when there is one: that is the request the user sized.
        ref = next(((s2, b2) for s2, b2 in bases if self.ls is not None and s2.kv_cache_dtype == (self.lf.get("kv_cache_dtype") or "auto") and s2.tensor_parallel_size == self.ls.tensor_parallel_size and s2.pipeline_parallel_size == self.ls.pipeline_parallel_size), best)
        rst, rbase = ref
        per_gpu = rbase.kv_bytes_per_token
        cpu_per_token = per_gpu * rst.tensor_parallel_size
        engine_workers = rst.tensor_parallel_size * rst.pipeline_parallel_size
        weights = self.model.checkpoint_bytes or int(sum(r.weights_bytes for r in rbase.ranks) * rst.tensor_parallel_size)
        launch_bytes = cpu_tier.launch_offload_bytes(self.lf)
        host = self.goal.host_ram_bytes
        need = pinned = largest = None
        if host is not None:
            size = launch_bytes or int(length * cpu_per_token)
            flags = cpu_tier.set_offload({**self.lf, "tensor_parallel_size": rst.tensor_parallel_size, "pipeline_parallel_size": rst.pipeline_parallel_size, "max_model_len": length}, size, self.v)
            hn = cpu_tier.host_need(flags, weights_bytes=weights, world_size=engine_workers, env=self.env, version=self.req.version)
            need = hn.expected_bytes
            comp = hn.component("kv offload (CPU tier)")
            pinned = comp.expected_bytes if comp else None
            largest = cpu_tier.largest_offload(flags, weights_bytes=weights, world_size=engine_workers, engine_workers=engine_workers, env=self.env, version=self.req.version, host_ram_bytes=host)
        info = cpu_tier.analyse(
            length=length,
            cpu_bytes_per_token=cpu_per_token,
            gpu_max_len=best_len,
            gpu_max_desc=best_desc,
            per_gpu_bytes_per_token=per_gpu,
            world_size=rst.tensor_parallel_size,
            launch_bytes=launch_bytes,
            host_ram_bytes=host,
            host_need_bytes=need,
            host_need_pinned_bytes=pinned,
            largest_fit_bytes=largest,
        )
        return info

    def offload_for(self, info: dict | None) -> dict | None:
        """The CPU tier each candidate carries: the launch's, shrunk to fit host RAM, or sized to one request."""
        if info is None:
            return None
        launch_bytes = info.get("launch_cpu_bytes")
        host = info.get("host_ram_bytes")
        largest = info.get("largest_fit_bytes")
        if launch_bytes:
            size = launch_bytes
            if host is not None and info.get("host_need_bytes") and info["host_need_bytes"] > host:
                size = largest or 0
            return {"size_bytes": size, "lines": []}
        if host is not None and info.get("needs_cpu_tier") and largest:
            return {"size_bytes": min(largest, info["one_request_bytes"]), "lines": []}
        return None

    # ------------------------------------------------------------------ driver
    def run(self) -> FitResult:
        t0 = time.perf_counter()
        goal = self.goal
        fixed, cap, source = self._length_goal()
        if (fixed or cap) > self.derived and str(self.env.get(cmd.ENV_LONG_LEN, "0")) not in _TRUE:
            self.notes.append(
                f"max-model-len {(fixed or cap):,} is above the model's derived maximum ({self.derived:,}): the command sets "
                f"{cmd.ENV_LONG_LEN}=1; quality beyond the trained context depends on the model's RoPE scaling"
            )
            self.env[cmd.ENV_LONG_LEN] = "1"
        from_launch = self.launch is not None
        trials, bases, steps = self.search(fixed, cap, goal.concurrency)
        relaxed = False
        closest: list[Candidate] = []
        goal_len = fixed or cap
        info = None
        if not trials and fixed is not None and self.rejected.get("kv-too-small"):
            info = self.cpu_tier_info(fixed, bases, steps)
        elif self.lf and cpu_tier.launch_offload_bytes(self.lf):
            info = self.cpu_tier_info(goal_len, bases, steps)
        offload = self.offload_for(info)
        result_trials = trials
        if not trials and fixed is not None:
            # Relax the length: the largest max-model-len that meets everything else.
            relaxed_trials, bases2, steps2 = self.search(None, fixed, goal.concurrency)
            if relaxed_trials:
                bases, steps = bases2, steps2
                if from_launch and source != "--context":
                    result_trials, relaxed = relaxed_trials, True
                    self.notes.append(f"the launch's max-model-len {fixed:,} does not fit: the edit lowers it to the largest that does")
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
    return _Search(req).run()
