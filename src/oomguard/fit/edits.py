"""The --from edit: which searched flags a candidate changes, and by how much.

Mixed into ``oomguard.fit.runner._Search``. An unset flag counts as what vLLM
would pick next to the candidate's other flags (turning chunked prefill on
also changes the default token budget: that is not a second change).
"""

from __future__ import annotations

from oomguard.fit import command as cmd

_TRUE = ("1", "true", "True", "yes")


class EditsMixin:
    """Diffs a trial against the --from launch (needs .lf, .ls, .launch, .launch_env, .env, .derived)."""

    def _new_values(self, t, bases) -> dict:
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
            "enable_chunked_prefill": st.enable_chunked_prefill if st.enable_chunked_prefill is not None else self.ls.enable_chunked_prefill,
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
            "enable_chunked_prefill": ls.enable_chunked_prefill,
        }

    def _implied(self, chunked: bool, length: int) -> tuple[int, int]:
        """vLLM's own token budget and max-num-seqs for the launch when it leaves them unset (they depend on L and chunking)."""
        key = (chunked, length)
        v = self._implied_cache.get(key)
        if v is None:
            from oomguard.model.engine import resolve

            f = {k: val for k, val in self.lf.items() if k not in ("max_num_batched_tokens", "max_num_seqs")}
            f["enable_chunked_prefill"] = chunked
            f["max_model_len"] = length
            s = resolve(self.model, f, self.env, version=self.req.version, gpu=self.gpu, usage=self.req.usage)
            v = self._implied_cache[key] = (s.max_num_batched_tokens, s.max_num_seqs)
        return v

    def _old_values(self, t, new: dict, eff: dict) -> dict:
        """The launch's value of each searched flag; for unset T and S, what vLLM would pick next to the candidate's other flags."""
        old = dict(eff)
        unset_t, unset_s = "max_num_batched_tokens" not in self.lf, "max_num_seqs" not in self.lf
        if unset_t or unset_s:
            T, S = self._implied(bool(new["enable_chunked_prefill"]), t.max_model_len)
            if unset_t:
                old["max_num_batched_tokens"] = T
            if unset_s:
                old["max_num_seqs"] = S
        return old

    def _edit_size(self, t, bases, eff: dict) -> tuple[tuple, float]:
        """(changed flags, total magnitude) of the edit that turns the launch into ``t``; no objects built."""
        changed = []
        size = 0.0
        new = self._new_values(t, bases)
        old = self._old_values(t, new, eff)
        for dest, value in new.items():
            if value == old[dest]:
                continue
            changed.append(dest)
            size += cmd.magnitude(cmd.Change(dest, old[dest], value, old[dest]))
        if self._env_for(t):
            changed.append(cmd.ENV_LONG_LEN)
            size += 0.5
        return tuple(changed), size

    def _changes(self, t, bases) -> list[cmd.Change]:
        """The --from edit: each searched flag whose value differs from what the launch runs with."""
        new = self._new_values(t, bases)
        old = self._old_values(t, new, self._effective())
        sites = getattr(self.launch, "sites", None) or {}
        out = []
        for dest, value in new.items():
            if value == old[dest]:
                continue
            site = sites.get(dest)
            out.append(cmd.Change(dest, self.lf.get(dest), value, old[dest], getattr(site, "file", None), getattr(site, "line", None)))
        for dest, val in getattr(self, "added_flags", {}).items():
            launched = (self.launch.flags if self.launch is not None else {}).get(dest)
            if launched != val:
                out.append(cmd.Change(dest, launched, val, None))
        for k, val in self._env_for(t).items():
            out.append(cmd.Change(k, self.launch_env.get(k), val, None, is_env=True))
        return out

    def _env_for(self, t) -> dict:
        """Environment the candidate needs beyond the launch's own (only next to a RoPE recipe fit added)."""
        if cmd.ENV_LONG_LEN in self.env and str(self.launch_env.get(cmd.ENV_LONG_LEN, "0")) not in _TRUE:
            return {cmd.ENV_LONG_LEN: "1"}
        return {}

