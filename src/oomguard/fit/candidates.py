"""Turning a feasible trial into a shown candidate: its flags, its full plan, its trade-offs.

Mixed into ``oomguard.fit.runner._Search``.
"""

from __future__ import annotations

from oomguard.fit import command as cmd
from oomguard.fit import cpu_tier, tradeoffs
from oomguard.fit.result import Candidate
from oomguard.fit.roofline import LABEL, prefill_steps
from oomguard.fit.space import Structure
from oomguard.model.engine import default_batch_limits
from oomguard.units import GiB


class CandidatesMixin:
    """Builds the shown candidates (needs the run state of oomguard.fit.runner._Search)."""

    def _flags_for(self, t, st: Structure) -> dict:
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
        if st.enable_chunked_prefill is not None:
            flags["enable_chunked_prefill"] = st.enable_chunked_prefill
        flags["max_num_batched_tokens"] = t.token_budget
        flags["max_num_seqs"] = t.num_seqs
        flags["gpu_memory_utilization"] = t.utilization
        flags["max_model_len"] = t.max_model_len
        if t.kv_memory_bytes is not None:
            flags["kv_cache_memory_bytes"] = t.kv_memory_bytes
        return flags

    def _optional_tier(self, flags: dict, st: Structure, base) -> str:
        """What a CPU KV tier within the stated host RAM would add to a launch that fits without one."""
        workers = st.tensor_parallel_size * st.pipeline_parallel_size
        weights = self.model.checkpoint_bytes or int(sum(r.weights_bytes for r in base.ranks) * st.tensor_parallel_size)
        largest = cpu_tier.largest_offload(flags, weights_bytes=weights, world_size=workers, engine_workers=workers, env=self.env, version=self.req.version, host_ram_bytes=self.goal.host_ram_bytes)
        if not largest:
            return f"no CPU KV tier fits in {self.goal.host_ram_bytes / GiB:.0f} GiB of host RAM next to the rest of the server"
        tokens = int(largest / (base.kv_bytes_per_token * st.tensor_parallel_size))
        return (
            f"optional: --kv-offloading-size {largest // GiB} (GiB in all, {workers} × {largest / workers / GiB:.0f} GiB pinned) fits the "
            f"{self.goal.host_ram_bytes / GiB:.0f} GiB host and would keep ~{tokens:,} tokens of evicted prefixes for reuse (CPU tier); "
            "it does not enlarge the GPU pool"
        )

    def _ref_budget(self) -> tuple[int, str]:
        if self.ls is not None:
            return self.ls.max_num_batched_tokens, "the launch's"
        t, _ = default_batch_limits(self.v, self.gpu.total_bytes, self.gpu.name, usage=self.req.usage)
        return t, "vLLM's default"

    def candidate(self, t, perf: dict, changes: list, bases, steps: dict, offload: dict | None) -> Candidate | None:
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
        elif self.goal.host_ram_bytes and self.v >= (0, 15, 0):
            lines.append(self._optional_tier(flags, st, base))
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
        # `python -m vllm.entrypoints...` launches keep their entry point; docker and the rest print `vllm serve`
        program = getattr(self.launch, "program", None) or "vllm serve"
        if not program.startswith("python -m"):
            program = "vllm serve"
        shown_env = {k: v for k, v in env.items() if k in self._env_to_print(env)}
        command = cmd.render(self.model_name, flags, shown_env, version=self.v, program=program, launch_flags=self.lf if self.launch is not None else None)
        return Candidate(flags, env, command, plan, lines, estimates, summary, changes if self.launch is not None else None, offload)

    def _env_to_print(self, env: dict) -> set:
        # Only the variables that change vLLM's verdict belong on the command line.
        keep = {cmd.ENV_LONG_LEN, "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_USE_V1", "VLLM_PP_LAYER_PARTITION", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_USE_V2_MODEL_RUNNER", "PYTORCH_CUDA_ALLOC_CONF"}
        return {k for k in env if k in keep}

    def goal_candidate(self, option, rank: int = 1) -> Candidate:
        """A ranked goal-keeping edit (``oomguard.fit.goalfix``) as a shown candidate: the launch's
        flags with the option's edits, the option's own plan and trade-offs."""
        from oomguard.fit.goalfix import summary as option_summary

        flags = {k: v for k, v in {**self.lf, **dict(option.edits)}.items() if v is not None}
        env = {**self.launch_env, **getattr(self, "_first_env", {})}
        plan = option.plan
        sites = getattr(self.launch, "sites", None) or {}
        eff = self._effective()
        changes = []
        for dest, value in option.edits:
            old = self.lf.get(dest)
            if value == old:
                continue
            site = sites.get(dest)
            changes.append(cmd.Change(dest, old, value, eff.get(dest), getattr(site, "file", None), getattr(site, "line", None)))
        s = plan.settings
        lines = [("keeps the goal: " if option.keeps_goal else "changes the goal: ") + option_summary(option)]
        lines += [f"goal-keeping fix #{rank}: the edit `oomguard check --fix` applies to this launch (one ranking for both)"]
        program = getattr(self.launch, "program", None) or "vllm serve"
        if not program.startswith("python -m"):
            program = "vllm serve"
        shown_env = {k: v for k, v in env.items() if k in self._env_to_print(env)}
        command = cmd.render(self.model_name, flags, shown_env, version=self.v, program=program, launch_flags=self.lf if self.launch is not None else None)
        t = plan.tight_rank
        peak = plan.gpu.total_bytes - option.headroom_bytes - self.req.other_gpu_use_bytes
        summary = {
            "max_model_len": s.max_model_len,
            "kv_cache_tokens": plan.kv_cache_tokens,
            "capacity_at_input_len": max(1, int(plan.max_concurrency)) if plan.max_concurrency >= 1 else 0,
            "input_len": self.goal.input_len(s.max_model_len),
            "peak_gib": round(peak / GiB, 2),
            "margin_gib": round(option.headroom_bytes / GiB, 2),
            "spare_kv_gib": round(option.kv_spare_bytes / GiB, 2),
            "robust": option.robust,
            "kv_sizing": "pinned" if s.kv_cache_memory_bytes is not None else "profiled",
            "goal_fix": option.to_dict(),
            "kv_pool_gib": round(t.kv_bytes / GiB, 2),
        }
        return Candidate(flags, env, command, plan, lines, {}, summary, changes, None)

