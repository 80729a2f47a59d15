"""OG4xx: host RAM — KV offloading buffers, CPU weight offload, swap space.

A process killed while GPU memory was not full is the host's OOM killer (S1's
third failure). The launch flags that take pinned host memory:

- the KV offloading tier: ``kv_connector_extra_config.cpu_bytes_to_use`` of the
  ``OffloadingConnector`` or ``--kv-offloading-size`` GiB — the total over all
  workers, not per GPU; measured to cost about 1.9× its size in host RSS
  (pinned staging buffers on top of the store);
- ``--cpu-offload-gb``: GiB of weights per GPU, so × the world size;
- ``--swap-space`` (vLLM ≤ 0.17): GiB per GPU, 4 by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from oomguard.check.finding import Severity
from oomguard.check.registry import rule
from oomguard.check.rules.common import gib, set_json_key
from oomguard.model.failures import FailureClass as F
from oomguard.units import GiB

OFFLOAD_OVERHEAD = 1.9  # host RSS / cpu_bytes_to_use measured for the OffloadingConnector
PROCESS_BASE_BYTES = 8 * GiB  # API server, tokenizer, CUDA host allocations of the engine
PER_WORKER_BYTES = 2 * GiB  # each GPU worker's own host footprint
SAFE_SHARE = 0.8  # of host RAM before a warning


@dataclass
class HostDemand:
    offload_bytes: int = 0  # the user-visible offload store (total)
    offload_source: str = ""
    offload_dest: str | None = None  # flag that sets it
    cpu_offload_bytes: int = 0  # weights, all workers
    swap_bytes: int = 0  # all workers
    world: int = 1

    @property
    def total(self) -> int:
        base = PROCESS_BASE_BYTES + PER_WORKER_BYTES * self.world
        return base + int(self.offload_bytes * OFFLOAD_OVERHEAD) + self.cpu_offload_bytes + self.swap_bytes


def host_demand(ctx) -> HostDemand:
    f = ctx.flags
    world = int(f.get("tensor_parallel_size") or 1) * int(f.get("pipeline_parallel_size") or 1) * int(f.get("data_parallel_size") or 1)
    d = HostDemand(world=world)
    kvt = f.get("kv_transfer_config")
    if isinstance(kvt, dict) and "Offloading" in str(kvt.get("kv_connector", "")):
        extra = kvt.get("kv_connector_extra_config") or {}
        if extra.get("cpu_bytes_to_use") is not None:
            d.offload_bytes = int(extra["cpu_bytes_to_use"])
            d.offload_source, d.offload_dest = "kv_connector_extra_config.cpu_bytes_to_use", "kv_transfer_config"
        elif extra.get("num_cpu_blocks") is not None:
            d.offload_source = "kv_connector_extra_config.num_cpu_blocks"
    if f.get("kv_offloading_size") and str(f.get("kv_offloading_backend") or "native") != "lmcache":
        d.offload_bytes = int(float(f["kv_offloading_size"]) * GiB)
        d.offload_source, d.offload_dest = "--kv-offloading-size", "kv_offloading_size"
    if f.get("cpu_offload_gb"):
        d.cpu_offload_bytes = int(float(f["cpu_offload_gb"]) * GiB) * world
    v0 = ctx.version_tuple < (0, 8, 0) or (ctx.version_tuple < (0, 11, 0) and str(ctx.env.get("VLLM_USE_V1", "1")) == "0")
    swap = f.get("swap_space")
    if swap is None:
        swap = 4.0  # the V0 default, per GPU
    if swap and v0:  # only the V0 engine allocates CPU swap blocks (pinned)
        d.swap_bytes = int(float(swap) * GiB) * world
    return d


@rule(
    "OG401",
    "host-ram-exceeded",
    title="Offload buffers, CPU offload and swap exceed host RAM",
    severity=Severity.ERROR,
    needs=(),
    why="""KV offloading, `--cpu-offload-gb` and swap space live in pinned host memory. When they
    add up to more than the host has, the kernel's OOM killer ends vLLM ("Out of memory: Killed
    process ... (python)" in `dmesg`) while the GPU still has room. The offload store costs about
    1.9× its nominal size in host memory (measured: pinned staging buffers on top of the store),
    and `cpu_bytes_to_use` / `--kv-offloading-size` are totals over all workers.""",
    fix="""The offload size that fits in 80 % of the host RAM (`--host-ram-gib X`, or `auto` to read
    /proc/meminfo's MemAvailable) after 8 GiB for the server and 2 GiB per worker, divided by the
    1.9 overhead, rounded down to a GiB.""",
    example="""--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":214748364800}}'   # 256 GiB host""",
    use_instead="""--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":91268055040}}'""",
    predicts=(F.HOST_OOM,),
)
def host_ram(ctx):
    r = host_ram.rule
    d = host_demand(ctx)
    if not (d.offload_bytes or d.cpu_offload_bytes or d.swap_bytes):
        return
    parts = []
    if d.offload_bytes:
        parts.append(f"KV offload {gib(d.offload_bytes)} × {OFFLOAD_OVERHEAD} = {gib(d.offload_bytes * OFFLOAD_OVERHEAD)} ({d.offload_source}, total over {d.world} worker(s))")
    if d.cpu_offload_bytes:
        parts.append(f"--cpu-offload-gb × {d.world} workers = {gib(d.cpu_offload_bytes)}")
    if d.swap_bytes:
        parts.append(f"swap space × {d.world} = {gib(d.swap_bytes)}")
    base = PROCESS_BASE_BYTES + PER_WORKER_BYTES * d.world
    summary = " + ".join(parts) + f" + server and workers ≈{gib(base)} = {gib(d.total)}"
    numbers = {"host_demand_gib": round(d.total / GiB, 1), "offload_gib": round(d.offload_bytes / GiB, 1), "overhead_factor": OFFLOAD_OVERHEAD}
    ram = ctx.host_ram_bytes
    if ram is None:
        if d.total >= 32 * GiB:
            yield r.finding(
                ctx,
                f"host memory this launch pins: {summary}. Host RAM unknown: pass --host-ram-gib X (or auto) to check it.",
                dests=[d.offload_dest or "cpu_offload_gb"],
                severity=Severity.INFO,
                numbers=numbers,
            )
        return
    numbers["host_ram_gib"] = round(ram / GiB, 1)
    if d.total <= SAFE_SHARE * ram:
        return
    fix = []
    room = SAFE_SHARE * ram - base - d.cpu_offload_bytes - d.swap_bytes
    if d.offload_bytes and room > 0:
        new_gib = int(room / OFFLOAD_OVERHEAD // GiB)
        if new_gib >= 1:
            if d.offload_dest == "kv_offloading_size":
                fix = [ctx.edit("kv_offloading_size", new_gib)]
            else:
                kvt = ctx.flags["kv_transfer_config"]
                extra = set_json_key(kvt.get("kv_connector_extra_config"), "cpu_bytes_to_use", new_gib * GiB)
                fix = [ctx.edit("kv_transfer_config", set_json_key(kvt, "kv_connector_extra_config", extra))]
            numbers["suggested_offload_gib"] = new_gib
    sev = Severity.ERROR if d.total > ram else Severity.WARNING
    yield r.finding(
        ctx,
        f"host memory this launch pins: {summary}, against {gib(ram)} of host RAM ({ctx.host_ram_source})"
        + (": the kernel's OOM killer will end vLLM." if sev is Severity.ERROR else ", more than 80 % of it.")
        + (f" Offload {numbers['suggested_offload_gib']} GiB in total instead." if fix else ""),
        dests=[d.offload_dest] if d.offload_dest else ["cpu_offload_gb", "swap_space"],
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
    r = offload_total.rule
    d = host_demand(ctx)
    if not d.offload_bytes or d.world < 2:
        return
    yield r.finding(
        ctx,
        f"{d.offload_source} = {gib(d.offload_bytes)} is the total over {d.world} workers: {gib(d.offload_bytes / d.world)} each, "
        f"and about {gib(d.offload_bytes * OFFLOAD_OVERHEAD)} of host memory in all.",
        dests=[d.offload_dest],
        numbers={"per_worker_gib": round(d.offload_bytes / d.world / GiB, 1)},
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
    title="--kv-offloading-size is ignored by the lmcache backend",
    severity=Severity.WARNING,
    needs=(),
    why="""With `--kv-offloading-backend lmcache` vLLM configures the LMCache connector, which reads
    its CPU budget from LMCache's own settings (`LMCACHE_MAX_LOCAL_CPU_SIZE`, in GB), not from
    `--kv-offloading-size`: the size given is not the size used.""",
    fix="""Remove `--kv-offloading-size` and size LMCache through its own configuration.""",
    example="--kv-offloading-backend lmcache --kv-offloading-size 64",
    use_instead="LMCACHE_MAX_LOCAL_CPU_SIZE=64 vllm serve MODEL --kv-offloading-backend lmcache",
)
def lmcache_size(ctx):
    r = lmcache_size.rule
    if str(ctx.flags.get("kv_offloading_backend") or "") != "lmcache" or not ctx.flags.get("kv_offloading_size"):
        return
    yield r.finding(
        ctx,
        f"--kv-offloading-size {ctx.flags['kv_offloading_size']} has no effect with the lmcache backend; LMCache uses LMCACHE_MAX_LOCAL_CPU_SIZE.",
        dests=["kv_offloading_size", "kv_offloading_backend"],
        fix=[ctx.edit("kv_offloading_size", None)],
    )

