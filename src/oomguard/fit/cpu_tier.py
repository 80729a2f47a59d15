"""The CPU KV tier: how much host RAM one full request's KV needs, and whether the host has it.

vLLM's KV offloading (``--kv-offloading-size``, or the OffloadingConnector's
``cpu_bytes_to_use`` in ``--kv-transfer-config``) is a total over the
engine's workers; its host cost per release (one exact-size /dev/shm file
from 0.27, pinned tensors rounded to powers of two before) is
``oomguard.host.ram_model``'s, the same model check and host use. One block offloaded from every worker costs
``bytes_per_block × world_size`` of host memory, so one token costs the
per-GPU KV bytes per token × TP (vllm-memory.md §3.1).

What the tier does and does not do (vLLM 0.33): it keeps copies of KV blocks
in host memory and loads them back on a prefix-cache hit. Attention reads GPU
blocks only, and at start-up vLLM refuses a max-model-len whose one request
does not fit the GPU pool (kv-too-small). So a request longer than the GPU pool
needs the CPU tier for its KV *and* cannot be served by this vLLM from it.
"""

from __future__ import annotations

from oomguard.units import GiB

def _g(n: float) -> str:
    return f"{n / GiB:.2f}"


def launch_offload_bytes(flags: dict) -> int | None:
    from oomguard.host.ram_model import kv_offload_bytes

    size, _ = kv_offload_bytes(flags)
    return size


def host_need(flags: dict, *, weights_bytes: int, world_size: int, env: dict, version: str | None, model=None, engine: str | None = None):
    """The launch's host RAM from ``oomguard.host.ram_model`` (the model's KV tensors for releases before 0.27)."""
    from oomguard.host.ram_model import SHARED_REGION_FROM, host_ram_model, kv_tier_layout_for, version_tuple, world_size_of

    v = version_tuple(version)
    layout = None
    if model is not None and v is not None and v < SHARED_REGION_FROM:
        tp, pp, _ = world_size_of(flags)
        layout = kv_tier_layout_for(model, tp, pp)
    return host_ram_model(flags, weights_bytes=weights_bytes, world_size=world_size, env=env, version=version, kv_layout=layout, engine=engine)


def largest_offload(flags: dict, *, weights_bytes: int, world_size: int, engine_workers: int, env: dict, version: str | None, host_ram_bytes: int, model=None, engine: str | None = None) -> int | None:
    """The largest CPU tier fit may propose: the host-RAM policy check and host use too (ram_model)."""
    from oomguard.host.ram_model import largest_tier_within_policy

    need = host_need(flags, weights_bytes=weights_bytes, world_size=world_size, env=env, version=version, model=model, engine=engine)
    return largest_tier_within_policy(need, host_ram_bytes, engine_workers)


def set_offload(flags: dict, size_bytes: int, version: tuple[int, int, int]) -> dict:
    """Flags with the CPU tier resized (the launch's own spelling kept), or added as --kv-offloading-size."""
    out = dict(flags)
    ktc = out.get("kv_transfer_config")
    if isinstance(ktc, dict) and ("Offloading" in str(ktc.get("kv_connector")) or "CPUOffload" in str(ktc.get("kv_connector"))):
        ktc = dict(ktc)
        extra = dict(ktc.get("kv_connector_extra_config") or {})
        extra["cpu_bytes_to_use"] = int(size_bytes)
        ktc["kv_connector_extra_config"] = extra
        out["kv_transfer_config"] = ktc
        return out
    # --kv-offloading-size is in GiB (may be fractional); keep whole GiB for readability.
    out["kv_offloading_size"] = max(1, int(size_bytes // GiB))
    if version < (0, 15, 0):
        out.pop("kv_offloading_size")
        out["kv_transfer_config"] = {
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"cpu_bytes_to_use": int(size_bytes)},
        }
    return out


def analyse(
    *,
    length: int,
    cpu_bytes_per_token: float,
    gpu_max_len: int,
    gpu_max_desc: str,
    per_gpu_bytes_per_token: float,
    world_size: int,
    launch_bytes: int | None,
    host_ram_bytes: int | None,
    host_need_bytes: int | None,
    host_need_pinned_bytes: int | None,
    largest_fit_bytes: int | None,
    sized_bytes: int | None = None,
    prefill: tuple[int, int, float] | None = None,
    host_status: str | None = None,
) -> dict:
    """One full ``length``-token request against the GPU pool and host RAM: numbers and sentences."""
    one = int(length * cpu_bytes_per_token)
    per_gpu = int(length * per_gpu_bytes_per_token)
    shortfall = max(0, int((length - gpu_max_len) * cpu_bytes_per_token))
    lines = [
        f"one full {length:,}-token request needs {_g(one)} GiB of KV ({cpu_bytes_per_token:,.0f} B/token over {world_size} GPU(s)), "
        f"{_g(per_gpu)} GiB per GPU; the GPUs' KV pool holds one request of at most {gpu_max_len:,} tokens ({gpu_max_desc})",
    ]
    if length > gpu_max_len:
        lines.append(
            f"it does not fit on the GPUs: its KV needs the CPU tier, {_g(shortfall)} GiB beyond the GPU pool and {_g(one)} GiB to keep the "
            "whole request there (--kv-offloading-size / cpu_bytes_to_use are totals over all workers, not per GPU)"
        )
        lines.append(
            "vLLM reads attention from GPU blocks only and checks at start-up that one max-model-len request fits the GPU pool, "
            f"so max-model-len {length:,} is predicted not to start (kv-too-small) even with offloading; the CPU tier keeps "
            "evicted prefixes for reuse (a prefix hit skips their prefill). Beyond the GPU pool: more GPUs, a model with less KV "
            "per token (fewer KV heads, hybrid attention), or a lower max-model-len"
        )
    if prefill is not None:
        budget, steps, seconds = prefill
        lines.append(
            f"a full {length:,}-token prompt at {budget:,} tokens per step is {steps:,} forward steps "
            f"(TTFT ≈ {seconds:,.0f} s with no prefix hit; estimate, roofline, ±50%)"
        )
    if launch_bytes is not None:
        lines.append(f"the launch asks for a CPU tier of {_g(launch_bytes)} GiB in all")
    if host_ram_bytes is None:
        lines.append("host RAM unknown: pass --host-ram-gib (or run `oomguard host`) to size the CPU tier against it")
    elif host_need_bytes is not None:
        status = host_status or ("fits" if host_need_bytes <= host_ram_bytes else "exceeds")
        what = f"with a {_g(sized_bytes)} GiB CPU tier" if sized_bytes else "this launch"
        verdict = {
            "fits": "fits",
            "tight": "tight: within 10 % of it, or over it at the high estimate (the kernel may kill the server)",
            "exceeds": "does NOT fit (the kernel OOM killer ends such servers)",
        }[status]
        lines.append(
            f"host RAM: {what} the server needs ≈ {_g(host_need_bytes)} GiB resident"
            + (f" (the CPU tier takes {_g(host_need_pinned_bytes)} GiB of it)" if host_need_pinned_bytes else "")
            + f" of {_g(host_ram_bytes)} GiB: " + verdict
        )
        if largest_fit_bytes is not None:
            lines.append(f"the largest CPU tier that fits with margin next to the rest is {_g(largest_fit_bytes)} GiB in all "
                         "(the server's expected need within 85 % of host RAM, its high estimate within all of it: as check and host)")
        else:
            lines.append("no CPU tier fits next to the rest of the server's host memory")
    return {
        "length": length,
        "one_request_bytes": one,
        "one_request_bytes_per_gpu": per_gpu,
        "bytes_per_token": cpu_bytes_per_token,
        "gpu_max_len": gpu_max_len,
        "needs_cpu_tier": length > gpu_max_len,
        "shortfall_bytes": shortfall,
        "launch_cpu_bytes": launch_bytes,
        "host_ram_bytes": host_ram_bytes,
        "host_need_bytes": host_need_bytes,
        "host_status": (host_status or ("fits" if host_need_bytes <= host_ram_bytes else "exceeds")) if host_need_bytes is not None and host_ram_bytes is not None else None,
        "largest_fit_bytes": largest_fit_bytes,
        "lines": lines,
    }
