"""The CPU KV tier inside a fit run: the longest request the GPUs hold, and the tier each candidate carries.

Mixed into ``oomguard.fit.runner._Search``; the arithmetic is in ``oomguard.fit.cpu_tier``.
"""

from __future__ import annotations

from oomguard.fit import command as cmd
from oomguard.fit import cpu_tier
from oomguard.fit.roofline import Roofline, prefill_steps
from oomguard.fit.search import Base, evaluate, max_len
from oomguard.fit.space import Structure
from oomguard.units import GiB


class TierMixin:
    """Sizes the CPU KV tier for a fit run (needs the run state of oomguard.fit.runner._Search)."""

    def _gpu_limit(self, length: int, bases, steps: dict, trials: list) -> tuple[int, str]:
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
        need = pinned = largest = status = None
        size = launch_bytes or int(length * cpu_per_token)
        if host is not None:
            flags = cpu_tier.set_offload(
                {**self.lf, "tensor_parallel_size": st.tensor_parallel_size, "pipeline_parallel_size": st.pipeline_parallel_size, "max_model_len": length}, size, self.v
            )
            engine = ls.engine if ls is not None else None
            hn = cpu_tier.host_need(flags, weights_bytes=weights, world_size=workers, env=self.env, version=self.req.version, model=self.model, engine=engine)
            from oomguard.host.ram_model import ram_status

            need = hn.expected_bytes
            status = ram_status(hn, host)
            comp = hn.component("kv offload (CPU tier)")
            pinned = comp.expected_bytes if comp else None
            largest = cpu_tier.largest_offload(flags, weights_bytes=weights, world_size=workers, engine_workers=workers, env=self.env, version=self.req.version, host_ram_bytes=host, model=self.model, engine=engine)
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
            host_status=status,
        )
        info["engine_workers"] = workers
        return info

    def _long_prefill(self, length: int, st: Structure, base: Base) -> tuple[int, int, float]:
        budget = self.ls.max_num_batched_tokens if self.ls is not None else self._ref_budget()[0]
        rl = Roofline.build(self.model, self.gpu, tensor_parallel_size=st.tensor_parallel_size, weights_bytes=sum(r.weights_bytes for r in base.ranks), kv_bytes_per_token=base.kv_bytes_per_token, eager=st.enforce_eager)
        return budget, prefill_steps(length, budget), rl.prefill_s(length, budget)

    def _tier_form(self) -> str:
        from oomguard.host.ram_model import SHARED_REGION_FROM

        v = tuple(self.v) if getattr(self, "v", None) else None
        if v is None or v >= SHARED_REGION_FROM:
            return "one file in /dev/shm, which must hold it"
        return "pinned tensors, each rounded up to a power of two"

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
            if host is not None and info.get("host_status") in ("tight", "exceeds"):
                size = largest or 0  # the size check proposes too (ram_model's policy)
        elif host is not None and info.get("needs_cpu_tier") and largest:
            size = largest
        if size is None:
            return None
        workers = info.get("engine_workers", 1)
        tokens = int(size / info["bytes_per_token"]) if info["bytes_per_token"] else 0
        line = (
            f"CPU tier {size / GiB:.0f} GiB in all ({workers} workers × {size / workers / GiB:.1f} GiB, {self._tier_form()}): keeps ~{tokens:,} tokens of "
            "evicted KV for prefix reuse"
            + (f" — a whole {info['length']:,}-token request fits in it" if tokens >= info["length"] else f" — less than one {info['length']:,}-token request")
            + (f"; sized against {host / GiB:.0f} GiB of host RAM" if host is not None else "")
        )
        if size == 0:
            line = "no CPU tier fits in host RAM next to the rest of the server: offloading removed"
        return {"size_bytes": size, "lines": [line]}

