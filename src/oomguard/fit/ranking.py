"""Ranking fit's feasible launches: the objective's score, and the order the list is shown in.

Mixed into ``oomguard.fit.runner._Search``; ``rank`` returns the shown
candidates (one per shape) with their roofline figures and --from edits.
"""

from __future__ import annotations

import math

from oomguard.fit.roofline import Roofline
from oomguard.fit.search import Base
from oomguard.fit.space import Objective, Structure
from oomguard.units import MiB

MIN_COMFORTABLE_BUDGET = 1024  # S2's budget for ordinary online serving
_BUCKET = math.log(1.03)  # scores within ~3% count as equal; the next criterion decides
_COARSE = math.log(1.10)  # with --from and an explicit objective: gains under ~10% do not justify a bigger edit


def bucket(x: float, step: float = _BUCKET) -> int:
    return int(round(math.log(x) / step)) if x > 0 else -10**9


class RankingMixin:
    """Scores and orders the trials of a fit run (needs .goal, .model, .gpu, .req, .launch state)."""

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

    def _score(self, t, bases, rl_cache: dict, perf_cache: dict) -> tuple[tuple, dict, int, int]:
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
            perf["_buckets"] = (bucket(perf["decode_tokens_per_s"]), bucket(perf["prefill_tokens_per_s"]), -bucket(perf["ttft_s"] + perf["itl_s"]))
            perf_cache[key] = perf
        dec, pre, lat = perf["_buckets"]
        obj = goal.objective
        if obj is Objective.THROUGHPUT:
            k = (dec, pre)
        elif obj is Objective.LATENCY:
            k = (lat, dec)
        elif obj is Objective.MAX_CONTEXT:
            k = (bucket(L), dec)
        else:
            k = (bucket(b), dec)
        return k + (t.margin_bytes // (256 * MiB),), perf, b, cap_i

    def _coarse(self, t, perf: dict, b: int) -> int:
        obj = self.goal.objective
        if obj is Objective.THROUGHPUT:
            return bucket(perf["decode_tokens_per_s"], _COARSE)
        if obj is Objective.LATENCY:
            return -bucket(perf["ttft_s"] + perf["itl_s"], _COARSE)
        if obj is Objective.MAX_CONTEXT:
            return bucket(t.max_model_len, _COARSE)
        return bucket(b, _COARSE)

    def rank(self, trials: list, bases, *, from_launch: bool, relaxed_len: bool) -> list[tuple]:
        rl_cache: dict = {}
        perf_cache: dict = {}
        if relaxed_len and trials:
            # The length is what the goal gave up: stay within 10% of the longest that fits, then edit least.
            best = max(t.max_model_len for t in trials)
            trials = [t for t in trials if t.max_model_len >= 0.9 * best]
        if any(t.token_budget >= MIN_COMFORTABLE_BUDGET for t in trials):
            # S2: 256 halved throughput and lengthened TTFT, 1024 restored it; smaller only when nothing else fits
            trials = [t for t in trials if t.token_budget >= MIN_COMFORTABLE_BUDGET]
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

