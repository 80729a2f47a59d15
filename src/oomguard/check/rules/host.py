"""OG4xx: host RAM — the CPU KV tier, CPU weight offload, swap space.

A process killed while GPU memory was not full is the host's OOM killer (S1's
third failure). The host RAM of a launch comes from ``oomguard.host.ram_model``,
the one model ``oomguard host`` and ``oomguard fit`` use too, per release:

- the CPU KV tier (``cpu_bytes_to_use`` / ``--kv-offloading-size``, a total over
  the workers): from vLLM 0.27 one exact-size file in ``/dev/shm``; 0.11-0.26
  one pinned tensor per KV tensor per worker, each rounded to a power of two;
- ``--cpu-offload-gb``: GiB of weights per GPU, pinned per parameter (~1.9x measured);
- ``--swap-space``: V0 engines only (<= 0.10), GiB per GPU, 4 by default.
"""

from __future__ import annotations

from oomguard.check.finding import SHM_SIZE, Edit, Severity
from oomguard.check.rule import rule
from oomguard.check.rules.common import gib, set_json_key
from oomguard.model.failures import FailureClass as F
from oomguard.units import GiB

# The host-RAM policy (when tight, what a fix may propose) is ram_model's, shared with fit and host
# (re-exported here for the callers that read it from check, export/resources.py).
from oomguard.host.ram_model import FIX_SHARE, TIGHT_SHARE  # noqa: E402,F401


def host_need(ctx):
    """The launch's host RAM (``oomguard.host.ram_model``) on the checked release."""
    from oomguard.host.ram_model import host_ram_model, kv_tier_layout_for, world_size_of

    tp, pp, _ = world_size_of(ctx.flags)
    layout = kv_tier_layout_for(ctx.model, tp, pp) if ctx.version_tuple < (0, 27, 0) else None
    plan = ctx.plan if ctx.model is not None and ctx.gpu is not None else None
    # the engine the planner resolved (swap space is V0's): host, with no plan, derives it the same way
    return host_ram_model(ctx.flags, weights_bytes=None, version=ctx.version_tuple, env=ctx.env, kv_layout=layout,
                          engine=plan.settings.engine if plan is not None else None)


def host_ram_json(ctx) -> dict:
    """The ``host_ram`` object of ``check --format json``: the same as ``host --format json``'s."""
    return host_need(ctx).summary()


def _offload_dest(ctx) -> str | None:
    if ctx.flags.get("kv_offloading_size") and str(ctx.flags.get("kv_offloading_backend") or "native") != "lmcache":
        return "kv_offloading_size"
    ktc = ctx.flags.get("kv_transfer_config")
    if isinstance(ktc, dict) and (ktc.get("kv_connector_extra_config") or {}).get("cpu_bytes_to_use") is not None:
        return "kv_transfer_config"
    return None


def _summary(need) -> str:
    parts = sorted((c for c in need.components if c.kind.value != "page_cache"), key=lambda c: -c.expected_bytes)
    text = " + ".join(f"{c.name} {gib(c.expected_bytes)} ({c.formula})" for c in parts[:3])
    rest = sum(c.expected_bytes for c in parts[3:])
    if rest:
        text += f" + the rest {gib(rest)}"
    return f"{text} = {gib(need.expected_bytes)} (range {gib(need.low_bytes)}-{gib(need.high_bytes)})"


@rule(
    "OG401",
    "host-ram-exceeded",
    title="The CPU KV tier, CPU offload and swap exceed host RAM",
    severity=Severity.ERROR,
    needs=(),
    why="""The CPU KV tier, `--cpu-offload-gb` and swap space live in host memory the kernel cannot
    reclaim. When they add up to more than the host has, the kernel's OOM killer ends vLLM ("Out of
    memory: Killed process ... (python)" in `dmesg`) while the GPU still has room. `cpu_bytes_to_use` /
    `--kv-offloading-size` are totals over all workers. From vLLM 0.27 the tier is one exact-size file
    in `/dev/shm`; before, each worker pins its share tensor by tensor, each rounded up to a power of
    two (up to 2×; vllm#48436, vllm#53042). `--cpu-offload-gb` pins per parameter: ~1.9× (vllm#56410).
    The numbers come from `oomguard.host.ram_model`, the same as `oomguard host`.""",
    fix="""The largest CPU tier whose host cost fits in 85 % of the host RAM (`--host-ram-gib X`, or
    `auto` to read /proc/meminfo's MemAvailable) next to the workers and the API server: a whole GiB
    from 0.27, a power of two per pinned tensor before.""",
    example="""--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":214748364800}}'   # 200 GiB on a 128 GiB host""",
    use_instead="""--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":97710505984}}'""",
    predicts=(F.HOST_OOM,),
)
def host_ram(ctx):
    from oomguard.host.ram_model import largest_tier_within_policy, ram_status, world_size_of

    r = host_ram.rule
    need = host_need(ctx)
    kv = need.component("kv_cpu_tier")
    pinned = [c for c in need.components if c.key in ("kv_cpu_tier", "cpu_offload", "swap_space", "lmcache_cpu")]
    if not pinned:
        return
    tp, pp, dp = world_size_of(ctx.flags)
    numbers = {
        "host_demand_gib": round(need.expected_bytes / GiB, 1),
        "host_demand_range_gib": [round(need.low_bytes / GiB, 1), round(need.high_bytes / GiB, 1)],
        "offload_gib": round(sum(c.low_bytes for c in [kv] if c) / GiB / dp, 1) if kv else 0.0,
    }
    if need.shm_bytes:
        numbers["shm_gib"] = round(need.shm_bytes / GiB, 1)
    dest = _offload_dest(ctx)
    dests = [dest] if dest else [c for c in ("cpu_offload_gb", "swap_space") if ctx.flags.get(c) is not None] or ["cpu_offload_gb"]
    shm_note = (
        f" From vLLM 0.27 the tier is one {gib(need.shm_bytes)} file in /dev/shm: the container's /dev/shm must hold it "
        "(docker --shm-size, a memory emptyDir sizeLimit; `oomguard host` checks it)."
        if need.shm_bytes
        else ""
    )
    ram, ram_source = ctx.host_ram_bytes, ctx.host_ram_source
    deployment = getattr(ctx.launch, "deployment", None) or {}
    if ram is None and deployment.get("memory_limit_bytes"):
        ram, ram_source = deployment["memory_limit_bytes"], f"the {deployment.get('kind')}'s memory limit"
    if ram is None:
        if need.expected_bytes >= 32 * GiB:
            yield r.finding(
                ctx,
                f"host memory this launch holds: {_summary(need)}. Host RAM unknown: pass --host-ram-gib X (or auto) to check it."
                + shm_note,
                dests=dests,
                severity=Severity.INFO,
                numbers=numbers,
            )
        return
    numbers["host_ram_gib"] = round(ram / GiB, 1)
    status = ram_status(need, ram)
    if status == "fits":
        return
    sev = Severity.ERROR if status == "exceeds" else Severity.WARNING
    fix = []
    # A tight fit keeps the user's tier (the goal); the smaller size is only offered in words.
    if kv is not None and dest is not None:
        size = largest_tier_within_policy(need, ram, tp * pp, dp)
        if size:
            if dest == "kv_offloading_size":
                fix = [ctx.edit("kv_offloading_size", size // GiB if size % GiB == 0 else round(size / GiB, 3))]
            else:
                kvt = ctx.flags["kv_transfer_config"]
                extra = set_json_key(kvt.get("kv_connector_extra_config"), "cpu_bytes_to_use", int(size))
                fix = [ctx.edit("kv_transfer_config", set_json_key(kvt, "kv_connector_extra_config", extra))]
            numbers["suggested_offload_gib"] = round(size / GiB, 2)
    offered = bool(fix)
    if sev is not Severity.ERROR:
        fix = []
    yield r.finding(
        ctx,
        f"host memory this launch holds: {_summary(need)}, against {gib(ram)} of host RAM ({ram_source})"
        + (": the kernel's OOM killer will end vLLM." if sev is Severity.ERROR else ", within 10 % of it (or over it at the high estimate).")
        + (f" A CPU tier of {numbers['suggested_offload_gib']:g} GiB in total fits with margin." if offered else "")
        + shm_note,
        dests=dests,
        severity=sev,
        fix=fix,
        numbers=numbers,
    )


@rule(
    "OG402",
    "offload-size-is-total",
    title="cpu_bytes_to_use / --kv-offloading-size is the total over all workers",
    severity=Severity.INFO,
    needs=(),
    why="""The KV offloading store is sized for the whole engine: vLLM divides `cpu_bytes_to_use`
    (and `--kv-offloading-size`) across the tensor-parallel workers. A value computed "per GPU"
    gives each worker a fraction of what was intended (and a value multiplied by the GPU count
    takes that many times the host memory).""",
    fix="""None automatic; the message gives the per-worker share.""",
    example="""--tensor-parallel-size 4 --kv-offloading-size 200""",
)
def offload_total(ctx):
    from oomguard.host.ram_model import kv_offload_bytes, world_size_of

    r = offload_total.rule
    total, source = kv_offload_bytes(ctx.flags)
    tp, pp, _ = world_size_of(ctx.flags)
    workers = tp * pp
    if not total or workers < 2:
        return
    kv = host_need(ctx).component("kv_cpu_tier")
    held = f"{gib(kv.expected_bytes)} of host memory in all ({kv.formula})" if kv else "no host memory on this release"
    yield r.finding(
        ctx,
        f"{source}: {gib(total)} is the total over {workers} workers, {gib(total / workers)} each; {held}.",
        dests=[_offload_dest(ctx)],
        numbers={"per_worker_gib": round(total / workers / GiB, 1)},
    )


@rule(
    "OG405",
    "kv-tier-needs-dev-shm",
    title="From vLLM 0.27 the CPU KV tier is one file in /dev/shm",
    severity=Severity.ERROR,
    needs=(),
    why="""vLLM 0.27 and later keep the OffloadingConnector's CPU tier in one file,
    `/dev/shm/vllm_offload_<engine>.mmap`, of `cpu_bytes_to_use` bytes (vllm#50094). A container's
    `/dev/shm` is 64 MiB by default (Docker) or the `sizeLimit` of a memory `emptyDir` (Kubernetes): from
    0.28 vLLM refuses to start ("Insufficient space in /dev/shm: N MiB required"), 0.27 dies with SIGBUS
    while filling it. The file is RAM, charged to the container's memory limit like the rest.""",
    fix="""Size `/dev/shm` to the tier plus 1 GiB (`docker run --shm-size`, compose `shm_size`, an
    `emptyDir: {medium: Memory, sizeLimit: ...}` at /dev/shm) or use `--ipc=host`. An error when the launch
    is a manifest whose /dev/shm is smaller; `--fix` writes the size there (the Kubernetes pod's memory
    emptyDir and its mount, compose `shm_size`, production-stack `shmSize`); a script: by hand.""",
    example="""docker run --gpus all vllm/vllm-openai --kv-offloading-size 64   # /dev/shm 64 MiB""",
    predicts=(F.CONFIG_ERROR,),  # "Insufficient space in /dev/shm" at start-up (0.28+), SIGBUS on 0.27
)
def kv_tier_shm(ctx):
    r = kv_tier_shm.rule
    need = host_need(ctx)
    if not need.shm_bytes:
        return
    deployment = getattr(ctx.launch, "deployment", None) or {}
    shm = deployment.get("shm_bytes")
    want_gib = -(-(need.shm_bytes + GiB) // GiB)
    numbers = {"shm_needed_gib": round(need.shm_bytes / GiB, 2)}
    how = f"--shm-size={want_gib}g (compose shm_size: {want_gib}gb; Kubernetes: an emptyDir {{medium: Memory, sizeLimit: {want_gib}Gi}} at /dev/shm) or --ipc=host"
    if shm is not None:
        numbers["shm_gib"] = round(shm / GiB, 2)
        if shm >= need.shm_bytes + GiB:
            return
        # where the manifest sizes /dev/shm (None: a Helm modelSpec without tensorParallelSize mounts none)
        site = getattr(getattr(ctx.launch, "carrier", None), "shm", None)
        yield r.finding(
            ctx,
            f"the CPU KV tier is one {gib(need.shm_bytes)} file in /dev/shm and this {deployment.get('kind', 'container')} gives "
            f"/dev/shm {gib(shm)} ({deployment.get('shm_source', 'the manifest')}): "
            + ("vLLM will not start. " if shm < need.shm_bytes else "it fits with under 1 GiB left for NCCL. ")
            + f"Give /dev/shm {want_gib} GiB: {how}.",
            dests=[_offload_dest(ctx)],
            severity=Severity.ERROR if shm < need.shm_bytes else Severity.WARNING,
            fix=[Edit(SHM_SIZE, want_gib)] if site is not None else [],
            numbers=numbers,
        )
        return
    yield r.finding(
        ctx,
        f"the CPU KV tier is one {gib(need.shm_bytes)} file, /dev/shm/vllm_offload_<engine>.mmap (vLLM >= 0.27): in a container "
        f"/dev/shm must hold it ({how}); `oomguard host` checks the machine's.",
        dests=[_offload_dest(ctx)],
        severity=Severity.INFO,
        numbers=numbers,
    )


@rule(
    "OG406",
    "offload-size-unknown-to-release",
    title="vLLM 0.11-0.13 size the CPU KV tier by num_cpu_blocks only",
    severity=Severity.ERROR,
    needs=(),
    why="""The OffloadingConnector of vLLM 0.11-0.13 reads only `num_cpu_blocks` (per worker) from
    `kv_connector_extra_config` (`v1/kv_offload/cpu.py`) and raises "num_cpu_blocks must be specified in
    kv_connector_extra_config" without it. `cpu_bytes_to_use` arrived in 0.14; and 0.12-0.13 turn
    `--kv-offloading-size` (native backend) into `num_cpu_blocks: 0` (`config/vllm.py`), which raises the
    same error: the server stops at start-up.""",
    fix="""None automatic: give `num_cpu_blocks` (CPU tier bytes per worker / the KV bytes of one block on
    one worker) in `--kv-transfer-config`, or run vLLM 0.14 or later, where the size in bytes works.""",
    example="""vllm serve MODEL --kv-offloading-size 64   # on vLLM 0.13""",
    predicts=(F.CONFIG_ERROR,),
)
def offload_size_unknown(ctx):
    from oomguard.host.ram_model import CPU_BYTES_FROM, OFFLOADING_CONNECTOR_FROM, kv_offload_bytes

    r = offload_size_unknown.rule
    if not (OFFLOADING_CONNECTOR_FROM <= ctx.version_tuple < CPU_BYTES_FROM):
        return
    total, source = kv_offload_bytes(ctx.flags)
    if not total:
        return
    yield r.finding(
        ctx,
        f"{source.split(' (')[0]} on vLLM {ctx.version_label}: this release's OffloadingConnector reads only num_cpu_blocks "
        "(per worker) and stops at start-up with 'num_cpu_blocks must be specified in kv_connector_extra_config'. "
        "Give num_cpu_blocks in --kv-transfer-config, or use vLLM 0.14+ where the size in bytes works.",
        dests=[_offload_dest(ctx)],
    )


@rule(
    "OG403",
    "cpu-offload-weights",
    title="--cpu-offload-gb streams weights over PCIe every step",
    severity=Severity.WARNING,
    needs=(),
    why="""`--cpu-offload-gb` keeps that many GiB of weights per GPU in host memory and reads them
    through unified addressing on every forward step: each step moves them over PCIe, so decode
    slows by roughly their size divided by the PCIe bandwidth. It is a last resort; more GPUs or
    a quantized checkpoint serve the same model at full speed.""",
    fix="""None automatic.""",
    example="vllm serve MODEL --cpu-offload-gb 20",
)
def cpu_offload(ctx):
    r = cpu_offload.rule
    gb = ctx.flags.get("cpu_offload_gb")
    if not gb:
        return
    ms = float(gb) * GiB / 25e9 * 1000
    yield r.finding(
        ctx,
        f"--cpu-offload-gb {gb}: every forward step reads {gb} GiB per GPU from host memory (≈{ms:,.0f} ms at 25 GB/s PCIe), "
        "and pins that much host RAM per GPU.",
        dests=["cpu_offload_gb"],
        numbers={"ms_per_step_at_25GBps": round(ms)},
    )


@rule(
    "OG404",
    "lmcache-ignores-offloading-size",
    title="--kv-offloading-size is ignored by the lmcache backend (vLLM 0.24+)",
    severity=Severity.WARNING,
    needs=(),
    why="""From vLLM 0.24 `--kv-offloading-backend lmcache` configures `LMCacheMPConnector`: the KV
    store lives in the separate LMCache server process, sized by LMCache's own settings, and vLLM does
    not pass `--kv-offloading-size` on (`config/vllm.py::_post_init_kv_transfer_config`): the size given
    is not the size used. On 0.12-0.23 it was split over the workers as LMCache's `max_local_cpu_size`.""",
    fix="""Remove `--kv-offloading-size` and size the LMCache server through its own configuration.""",
    example="--kv-offloading-backend lmcache --kv-offloading-size 64",
    use_instead="vllm serve MODEL --kv-offloading-backend lmcache   # LMCache server sized by its own config",
)
def lmcache_size(ctx):
    r = lmcache_size.rule
    if str(ctx.flags.get("kv_offloading_backend") or "") != "lmcache" or not ctx.flags.get("kv_offloading_size"):
        return
    if ctx.version_tuple < (0, 24, 0):
        return  # 0.12-0.23 split it over the workers as lmcache.max_local_cpu_size (counted by OG401)
    yield r.finding(
        ctx,
        f"--kv-offloading-size {ctx.flags['kv_offloading_size']} has no effect with the lmcache backend on vLLM "
        f"{ctx.version_label}: the LMCache server process holds the store, sized by its own settings.",
        dests=["kv_offloading_size", "kv_offloading_backend"],
        fix=[ctx.edit("kv_offloading_size", None)],
    )

