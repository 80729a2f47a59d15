"""Host RAM checks: cgroup limits, memory now, the launch's host RAM, KV offload rounding, the OOM killer."""

from __future__ import annotations

import math

from oomguard.host.cgroup import ContainerKind
from oomguard.host.checks.common import gib_text as _g
from oomguard.host.facts import HostFacts
from oomguard.host.findings import Finding, Severity
from oomguard.host.launchview import LaunchView
from oomguard.host.ram_model import (
    MemoryKind,
    kv_offload_bytes,
    largest_cpu_offload_gb_within_policy,
    largest_tier_within_policy,
    ram_status,
    ram_within_policy,
    with_kv_tier,
)
from oomguard.units import GiB, MiB


def _raise_limit_fix(facts: HostFacts, gib: int) -> str:
    if facts.container is ContainerKind.KUBERNETES:
        return f"set resources.limits.memory: {gib}Gi (and requests.memory) in the pod spec"
    if facts.container in (ContainerKind.DOCKER, ContainerKind.OTHER):
        return f"docker run --memory={gib}g --memory-swap={gib}g ...   # or: docker update --memory={gib}g --memory-swap={gib}g CONTAINER"
    return f"systemctl set-property UNIT MemoryMax={gib}G   # the unit that runs vLLM"


def check_memory_high(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    cg = facts.cgroup
    if cg is None or cg.high_bytes is None:
        return []
    if cg.limit_bytes is not None and cg.high_bytes >= cg.limit_bytes:
        return []
    limit = "no hard limit" if cg.limit_bytes is None else f"memory.max {_g(cg.limit_bytes)}"
    return [
        Finding(
            "HOST006",
            Severity.WARNING,
            f"cgroup memory.high is {_g(cg.high_bytes)} ({limit}): above it the kernel throttles the server "
            "and reclaims its page cache, so weight loading and KV offload slow to a crawl before any limit is hit.",
            f"echo max > /sys/fs/cgroup{cg.path.rstrip('/')}/memory.high   # or MemoryHigh=infinity on the unit",
        )
    ]


def check_memory_low(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    m = facts.meminfo
    out = []
    if m.mem_available_bytes < 0.10 * m.mem_total_bytes:
        out.append(
            f"MemAvailable is {_g(m.mem_available_bytes)} of {_g(m.mem_total_bytes)}"
        )
    cg = facts.cgroup
    if cg and cg.limit_bytes and cg.current_bytes is not None and cg.current_bytes > 0.9 * cg.limit_bytes:
        out.append(f"the cgroup uses {_g(cg.current_bytes)} of its {_g(cg.limit_bytes)} limit")
    if not out:
        return []
    return [
        Finding(
            "HOST007",
            Severity.WARNING,
            "; ".join(out) + ": a new server has little room, and the next large allocation invokes the OOM killer.",
            "ps -eo pid,rss,comm --sort=-rss | head   # find and stop what holds the RAM",
        )
    ]


def check_container_limit(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    cg = facts.cgroup
    if cg is None or cg.limit_bytes is None or cg.limit_bytes >= facts.meminfo.mem_total_bytes:
        return []
    need = launch.ram.expected_bytes if launch else None
    target = math.ceil(max(need or 0, cg.limit_bytes) * 1.1 / GiB)
    return [
        Finding(
            "HOST008",
            Severity.INFO,
            f"cgroup {cg.version.value} limit {_g(cg.limit_bytes)} (set at {cg.limit_from}) of {_g(facts.meminfo.mem_total_bytes)} "
            "RAM: the kernel kills the server at the limit ('Memory cgroup out of memory' in dmesg, exit 137), "
            "not when the machine runs out. /proc/meminfo inside the container does not show it.",
            _raise_limit_fix(facts, target),
        )
    ]


def _top_components(launch: LaunchView, n: int = 4) -> str:
    comps = sorted(
        (c for c in launch.ram.components if c.kind.value != "page_cache"),
        key=lambda c: -c.expected_bytes,
    )
    return ", ".join(f"{c.name} {_g(c.expected_bytes)}" for c in comps[:n])


def _budget_text(facts: HostFacts) -> str:
    if facts.host_ram_override_bytes is not None:
        return f"--host-ram-gib {facts.host_ram_override_bytes / GiB:g}, not this machine's MemAvailable"
    text = f"MemAvailable {_g(facts.meminfo.mem_available_bytes)}"
    if facts.cgroup and facts.cgroup.limit_bytes is not None:
        text += f", cgroup limit {_g(facts.cgroup.limit_bytes)}"
    return text


def _shrink_fix(facts: HostFacts, launch: LaunchView, budget: int) -> tuple[str, dict] | None:
    """(the flag edit that makes the launch ``fits`` on ``budget``, the flags after it), if one flag can:
    ram_model's policy, so neither this finding nor HOST011 follows (run_checks re-checks it)."""
    need = launch.ram
    flags = dict(launch.flags)
    if need.component("kv offload (CPU tier)"):
        fit = largest_tier_within_policy(need, budget, launch.engine_workers, launch.dp)
        edited = with_kv_tier(flags, fit) if fit is not None else None
        if fit is None or edited is None:
            return None
        if launch.flags.get("kv_offloading_size") is not None:
            return f"--kv-offloading-size {edited['kv_offloading_size']}   # GiB in total, {fit / launch.engine_workers / GiB:g} GiB per worker", edited
        return f'"cpu_bytes_to_use": {fit}   # in --kv-transfer-config: {fit / launch.engine_workers / GiB:g} GiB per worker', edited
    if need.component("cpu offload (--cpu-offload-gb)"):
        gb = largest_cpu_offload_gb_within_policy(need, budget)
        flags["cpu_offload_gb"] = gb or 0
        return (f"--cpu-offload-gb {gb}" if gb else "remove --cpu-offload-gb"), flags
    if need.component("swap space (--swap-space)"):
        flags["swap_space"] = 0
        return "--swap-space 0", flags
    if need.component("LMCache local CPU cache"):
        return "LMCACHE_MAX_LOCAL_CPU_SIZE=5   # GB per worker", None  # an environment edit: not re-planned here
    return None


def check_launch_ram(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    if launch is None:
        return []
    need = launch.ram
    budget = facts.ram_budget_bytes
    limit = (launch.deployment or {}).get("memory_limit_bytes")
    if limit is not None and limit < budget:  # the manifest's container limit binds before this machine's RAM
        budget = limit
    exp, low, high = need.expected_bytes, need.low_bytes, need.high_bytes
    summary = (
        f"the launch needs ~{_g(exp)} of resident host RAM (range {_g(low)}-{_g(high)}: {_top_components(launch)})"
        f" against {_g(budget)} allowed ({_budget_text(facts)}"
        + (f", {launch.deployment.get('kind')} memory limit {_g(limit)}" if limit is not None else "")
        + ")"
    )
    if need.page_cache_bytes:
        summary += f"; the {_g(need.page_cache_bytes)} checkpoint also passes through the page cache (reclaimable)"
    cg = facts.cgroup
    cgroup_binds = facts.host_ram_override_bytes is None and cg is not None and cg.limit_bytes is not None and cg.limit_bytes < facts.meminfo.mem_available_bytes
    machine_room = facts.meminfo.mem_available_bytes
    status = ram_status(need, budget)
    raised = math.ceil(ram_within_policy(need) / GiB)  # a limit on which the launch fits, not just squeezes in
    if status == "exceeds":
        edit = None
        if cgroup_binds and machine_room >= raised * GiB:
            fix = _raise_limit_fix(facts, raised)
        else:
            shrink = _shrink_fix(facts, launch, budget)
            fix, edit = shrink if shrink else ("run on a machine with more RAM, or lower the offload sizes of the launch", None)
        kv = need.component("kv offload (CPU tier)")
        caveat = ""
        if kv is not None and kv.kind is MemoryKind.PINNED and low <= budget:
            caveat = (
                f" vLLM 0.27 and later keep the CPU tier in one exact-size /dev/shm file (vllm#50094) and stay near "
                f"the low estimate, {_g(low)}."
            )
        return [
            Finding(
                "HOST010",
                Severity.ERROR,
                summary + ". The kernel's OOM killer will end the server (dmesg: 'Out of memory: Killed process'), "
                "typically while loading weights or filling the CPU tier, with GPU memory not full." + caveat,
                fix,
                edit=edit,
            )
        ]
    if status == "tight":
        shrink = _shrink_fix(facts, launch, budget)
        fix, edit = shrink if shrink else ((_raise_limit_fix(facts, raised) if cgroup_binds else "free RAM before starting"), None)
        return [
            Finding(
                "HOST011",
                Severity.WARNING,
                summary + ". Within the estimate's range the kernel may kill the server; leave margin.",
                fix,
                edit=edit,
            )
        ]
    return []


def check_kv_rounding(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    """HOST012: the pinned-tensor CPU tier (vLLM < 0.27) pins more than it was asked for."""
    if launch is None:
        return []
    comp = launch.ram.component("kv offload (CPU tier)")
    asked = kv_offload_bytes(launch.flags)[0]
    if comp is None or not asked or comp.kind is not MemoryKind.PINNED or comp.expected_bytes <= asked * launch.dp * 1.05:
        return []
    workers = launch.engine_workers
    pinned = comp.expected_bytes // launch.dp  # one engine, every tensor at its power of two
    others = launch.ram.expected_bytes - comp.expected_bytes
    use_up = others + pinned * launch.dp <= facts.ram_budget_bytes
    target = pinned if use_up else pinned // 2
    message = (
        f"KV offload of {_g(asked)} over {workers} workers is {_g(asked // workers)} each, which PyTorch's pinned "
        f"allocator rounds up tensor by tensor: {_g(pinned)} pinned per engine instead of {_g(asked)} ({comp.formula}; "
        "vllm#48436, vllm#53042). "
        + (
            f"You pay for {_g(pinned // workers)} per worker anyway: ask for it and get a larger CPU tier for the same RAM."
            if use_up
            else f"{_g(pinned // workers)} per worker does not fit; ask for {_g(target // workers)} per worker so nothing is rounded."
        )
        + " vLLM 0.27 and later pin the exact size (one /dev/shm file)."
    )
    if launch.flags.get("kv_offloading_size") is not None:
        fix = f"--kv-offloading-size {target // GiB}"
    else:
        fix = f'"cpu_bytes_to_use": {target}   # in --kv-transfer-config'
    return [Finding("HOST012", Severity.WARNING, message, fix)]


def _shm_size_fix(facts: HostFacts, need_bytes: int, deployment=None) -> str:
    gib = math.ceil(need_bytes / GiB)
    kind = str((deployment or {}).get("kind") or "")
    if kind == "compose service":
        return f"shm_size: {gib}gb   # in the compose service (or ipc: host)"
    if kind == "production-stack modelSpec":
        return f'shmSize: "{gib}Gi"   # in the modelSpec'
    if kind or facts.container is ContainerKind.KUBERNETES:
        return f"mount an emptyDir {{medium: Memory, sizeLimit: {gib}Gi}} at /dev/shm (and raise resources.limits.memory with it)"
    if facts.container in (ContainerKind.DOCKER, ContainerKind.OTHER):
        return f"docker run --shm-size={gib}g ...   # or --ipc=host; compose: shm_size: {gib}gb"
    return f"mount -o remount,size={gib}G /dev/shm"


def check_kv_tier_shm(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    """HOST013: from 0.27 the CPU KV tier is one file in /dev/shm, so /dev/shm must hold it."""
    if launch is None or not launch.ram.shm_bytes:
        return []
    room = facts.shm.free_bytes if facts.shm.free_bytes is not None else facts.shm.size_bytes
    source = facts.shm.source
    dep = launch.deployment or {}
    if dep.get("shm_bytes") is not None:  # the manifest's container, not this machine, runs the server
        room, source = dep["shm_bytes"], f"{dep.get('kind')} {dep.get('name')}: {dep.get('shm_source')}"
    need = launch.ram.shm_bytes
    # NCCL and vLLM's message queues use /dev/shm too; leave them 1 GiB (HOST004's floor).
    want = need + GiB
    if room is None:
        if facts.shm.source == "absent":
            return [
                Finding(
                    "HOST013",
                    Severity.ERROR,
                    f"the CPU KV tier is a {_g(need)} file in /dev/shm (vLLM >= 0.27) and no /dev/shm is mounted.",
                    _shm_size_fix(facts, want, launch.deployment),
                )
            ]
        return []
    if room >= want:
        return []
    what = "free" if facts.shm.free_bytes is not None and not dep.get("shm_bytes") else "in size"
    if launch.ram.shm_checked_by_vllm:
        consequence = (
            f"vLLM refuses to start: 'Insufficient space in /dev/shm: {need / MiB:.0f} MiB required, "
            f"{room / MiB:.0f} MiB free. Increase /dev/shm (e.g. --shm-size or --ipc=host).'"
        )
    else:
        consequence = "vLLM 0.27 does not check it first: the workers die with SIGBUS while they fill the file"
    severity = Severity.ERROR if room < need else Severity.WARNING
    return [
        Finding(
            "HOST013",
            severity,
            f"the CPU KV tier is one {_g(need)} file, /dev/shm/vllm_offload_<engine>.mmap, and /dev/shm has "
            f"{_g(room)} {what} ({source}): "
            + (consequence if room < need else "it fits with less than 1 GiB left for NCCL and vLLM's queues")
            + ". The file is RAM (Shmem), counted in the cgroup like the rest.",
            _shm_size_fix(facts, want, launch.deployment),
        )
    ]


def check_oom_score(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    from oomguard.host.ram_model import OOM_SCORE_ADJ

    exposed = [p for p in facts.vllm_processes if p.oom_score_adj is None or p.oom_score_adj > OOM_SCORE_ADJ]
    if not exposed:
        return []
    pids = ", ".join(f"{p.pid} (oom_score_adj {p.oom_score_adj})" for p in exposed)
    return [
        Finding(
            "HOST040",
            Severity.INFO,
            f"running vLLM processes {pids} are the largest RSS on the machine and the OOM killer's first "
            f"choice. Protecting them ({OOM_SCORE_ADJ}, as oomguard's exported units set OOMScoreAdjust=) makes the "
            "kernel kill something else instead, while a container limit can still stop them (at -1000 a cgroup "
            "OOM finds nothing to kill); fix the RAM budget first.",
            " && ".join(f"echo {OOM_SCORE_ADJ} > /proc/{p.pid}/oom_score_adj" for p in exposed),
        )
    ]
