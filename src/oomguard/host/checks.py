"""The host checks: each a pure function of ``HostFacts`` (and a ``LaunchView``) returning findings.

No check reads a file or changes anything; the fix of every finding is a
command printed for the operator. ``run_checks`` runs them all and sorts the
findings by severity, then id.
"""

from __future__ import annotations

import math
from typing import Callable

from oomguard.host.cgroup import ContainerKind
from oomguard.host.facts import HostFacts
from oomguard.host.findings import Finding, Severity
from oomguard.host.launchview import LaunchView
from oomguard.host.requirements import (
    largest_cpu_offload_gb_that_fits,
    largest_kv_offload_that_fits,
    next_power_of_two,
)
from oomguard.inputs.topology import LinkKind
from oomguard.units import GiB, MiB

__all__ = ["run_checks", "CHECKS", "launch_gpus", "gpu_numa_node"]

MIN_MAX_MAP_COUNT = 262_144
RECOMMENDED_MAX_MAP_COUNT = 2_621_440
MIN_SHM_BYTES = 1 * GiB
VLLM_NOFILE_TARGET = 65_535  # vLLM raises its soft limit to this, within the hard limit
CUDA_CONTEXT_BYTES = 512 * MiB  # taken from free memory before vLLM measures it
GPU_IDLE_USED_BYTES = 1 * GiB  # below this a GPU with no listed process counts as idle

Check = Callable[[HostFacts, "LaunchView | None"], list[Finding]]


def _g(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


def _sysctl_where(facts: HostFacts) -> str:
    if facts.container is ContainerKind.NONE:
        return ""
    # vm.* sysctls are not namespaced: a container inherits the node's value.
    return " Set it on the host (node), not in the container; persist it in /etc/sysctl.d/."


# ---------------------------------------------------------------------------
# kernel settings


def check_overcommit(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    if facts.overcommit_memory != 2:
        return []
    commit = ""
    m = facts.meminfo
    if m.commit_limit_bytes is not None and m.committed_as_bytes is not None:
        commit = f" (CommitLimit {_g(m.commit_limit_bytes)}, already committed {_g(m.committed_as_bytes)})"
    return [
        Finding(
            "HOST001",
            Severity.ERROR,
            f"vm.overcommit_memory=2: strict commit accounting{commit}. CUDA, NCCL and vLLM's workers "
            "reserve large virtual ranges they never touch; strict accounting refuses them and the server "
            "fails with 'Cannot allocate memory' or is killed while loading, with RAM to spare."
            + _sysctl_where(facts),
            "sysctl -w vm.overcommit_memory=1",
        )
    ]


def check_max_map_count(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    if facts.max_map_count is None or facts.max_map_count >= MIN_MAX_MAP_COUNT:
        return []
    return [
        Finding(
            "HOST002",
            Severity.WARNING,
            f"vm.max_map_count={facts.max_map_count} (below {MIN_MAX_MAP_COUNT}): mmapped checkpoint shards, "
            "pinned buffers and CUDA's mappings can exhaust it, and mmap then fails with ENOMEM as if RAM "
            f"were out. Operators of large launches use {RECOMMENDED_MAX_MAP_COUNT}." + _sysctl_where(facts),
            f"sysctl -w vm.max_map_count={RECOMMENDED_MAX_MAP_COUNT}",
        )
    ]


def check_swap(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    total = facts.swap_total_bytes
    if total <= 0:
        return []
    if facts.cgroup and facts.cgroup.swap_limit_bytes == 0 and facts.cgroup.version.value == "v2":
        return []  # the container may not swap (memory.swap.max = 0)
    where = ", ".join(s.filename for s in facts.swaps) or "swap"
    return [
        Finding(
            "HOST003",
            Severity.WARNING,
            f"swap is on ({_g(total)} on {where}): pinned buffers (KV and weight offload) cannot be swapped, "
            "so under pressure the kernel swaps the rest of the server (API server, tokenizer, Python heaps); "
            "it stalls for minutes before the OOM killer acts, and requests time out instead of failing fast.",
            "swapoff -a",
        )
    ]


def _shm_fix(facts: HostFacts) -> str:
    if facts.container is ContainerKind.KUBERNETES:
        return "add a volume {emptyDir: {medium: Memory, sizeLimit: 16Gi}} mounted at /dev/shm to the pod spec"
    if facts.container in (ContainerKind.DOCKER, ContainerKind.OTHER):
        return "docker run --ipc=host ...   # or --shm-size=16g"
    return "mount -o remount,size=16G /dev/shm"


def check_shm(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    multi_gpu = launch is not None and launch.world_size > 1
    severity = Severity.ERROR if multi_gpu else (Severity.INFO if launch is not None else Severity.WARNING)
    size = facts.shm.size_bytes
    if size is None and facts.shm.source == "absent":
        return [
            Finding(
                "HOST004",
                severity,
                "no /dev/shm is mounted: NCCL's shared-memory transport and vLLM's multi-process "
                "message queues need it when more than one GPU works together.",
                _shm_fix(facts),
            )
        ]
    if size is None or size >= MIN_SHM_BYTES:
        return []
    context = (
        f"with {launch.world_size} GPUs NCCL fails ('unhandled system error', 'Bus error') or hangs"
        if multi_gpu
        else "a multi-GPU launch would fail in NCCL ('unhandled system error', 'Bus error')"
    )
    return [
        Finding(
            "HOST004",
            severity,
            f"/dev/shm is {size / MiB:.0f} MiB (Docker's default is 64 MiB): {context}.",
            _shm_fix(facts),
        )
    ]


def check_nofile(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    hard = facts.nofile_hard
    if hard is None or hard >= VLLM_NOFILE_TARGET:
        return []
    if facts.container in (ContainerKind.DOCKER, ContainerKind.OTHER):
        fix = f"docker run --ulimit nofile={VLLM_NOFILE_TARGET}:{VLLM_NOFILE_TARGET} ..."
    else:
        fix = f"ulimit -n {VLLM_NOFILE_TARGET}   # raise the hard limit first: LimitNOFILE= or /etc/security/limits.conf"
    return [
        Finding(
            "HOST005",
            Severity.WARNING,
            f"open-file limit is {facts.nofile_soft} soft / {hard} hard: vLLM raises its soft limit to "
            f"{VLLM_NOFILE_TARGET} but cannot pass the hard limit, so many concurrent connections fail with "
            "'OSError: [Errno 24] Too many open files'.",
            fix,
        )
    ]


# ---------------------------------------------------------------------------
# memory now


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


# ---------------------------------------------------------------------------
# the launch's host RAM


def _top_components(launch: LaunchView, n: int = 4) -> str:
    comps = sorted(
        (c for c in launch.ram.components if c.kind.value != "page_cache"),
        key=lambda c: -c.expected_bytes,
    )
    return ", ".join(f"{c.name} {_g(c.expected_bytes)}" for c in comps[:n])


def _budget_text(facts: HostFacts) -> str:
    text = f"MemAvailable {_g(facts.meminfo.mem_available_bytes)}"
    if facts.cgroup and facts.cgroup.limit_bytes is not None:
        text += f", cgroup limit {_g(facts.cgroup.limit_bytes)}"
    return text


def _shrink_fix(facts: HostFacts, launch: LaunchView, budget: int) -> str | None:
    """The flag edit that brings the launch within ``budget``, if one flag can."""
    need = launch.ram
    if need.component("kv offload (CPU tier)"):
        fit = largest_kv_offload_that_fits(need, budget, launch.engine_workers, launch.dp)
        if fit is None:
            return None
        if launch.flags.get("kv_offloading_size") is not None:
            return f"--kv-offloading-size {fit // GiB}   # GiB in total, {fit // launch.engine_workers // GiB} GiB per worker"
        return f'"cpu_bytes_to_use": {fit}   # in --kv-transfer-config: {fit // launch.engine_workers // GiB} GiB per worker'
    if need.component("cpu offload (--cpu-offload-gb)"):
        gb = largest_cpu_offload_gb_that_fits(need, budget)
        return f"--cpu-offload-gb {gb}" if gb else "remove --cpu-offload-gb"
    if need.component("swap space (--swap-space)"):
        return "--swap-space 0"
    if need.component("LMCache local CPU cache"):
        return "LMCACHE_MAX_LOCAL_CPU_SIZE=5   # GB per worker"
    return None


def check_launch_ram(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    if launch is None:
        return []
    need = launch.ram
    budget = facts.ram_budget_bytes
    exp, low, high = need.expected_bytes, need.low_bytes, need.high_bytes
    summary = (
        f"the launch needs ~{_g(exp)} of resident host RAM (range {_g(low)}-{_g(high)}: {_top_components(launch)})"
        f" against {_g(budget)} allowed ({_budget_text(facts)})"
    )
    if need.page_cache_bytes:
        summary += f"; the {_g(need.page_cache_bytes)} checkpoint also passes through the page cache (reclaimable)"
    cg = facts.cgroup
    cgroup_binds = cg is not None and cg.limit_bytes is not None and cg.limit_bytes < facts.meminfo.mem_available_bytes
    machine_room = facts.meminfo.mem_available_bytes
    if exp > budget:
        if cgroup_binds and machine_room >= exp * 1.1:
            fix = _raise_limit_fix(facts, math.ceil(exp * 1.1 / GiB))
        else:
            fix = _shrink_fix(facts, launch, budget) or (
                "run on a machine with more RAM, or lower the offload sizes of the launch"
            )
        return [
            Finding(
                "HOST010",
                Severity.ERROR,
                summary + ". The kernel's OOM killer will end the server (dmesg: 'Out of memory: Killed process'), "
                "typically while loading weights or filling the CPU tier, with GPU memory not full.",
                fix,
            )
        ]
    if high > budget or exp > 0.9 * budget:
        fix = _shrink_fix(facts, launch, int(budget * 0.85)) or (
            _raise_limit_fix(facts, math.ceil(high * 1.1 / GiB)) if cgroup_binds else "free RAM before starting"
        )
        return [
            Finding(
                "HOST011",
                Severity.WARNING,
                summary + ". Within the estimate's range the kernel may kill the server; leave margin.",
                fix,
            )
        ]
    return []


def check_kv_rounding(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    if launch is None:
        return []
    comp = launch.ram.component("kv offload (CPU tier)")
    if comp is None or comp.expected_bytes <= comp.low_bytes * 1.05:
        return []
    workers = launch.engine_workers
    per_worker = comp.low_bytes // launch.dp // workers
    up = next_power_of_two(per_worker)
    down = up // 2
    others = launch.ram.expected_bytes - comp.expected_bytes
    use_up = others + up * workers * launch.dp <= facts.ram_budget_bytes
    target = up if use_up else down
    message = (
        f"KV offload of {_g(comp.low_bytes // launch.dp)} over {workers} workers is {_g(per_worker)} each, "
        f"which PyTorch's pinned allocator rounds up to {_g(up)}: {_g(comp.expected_bytes)} pinned instead of "
        f"{_g(comp.low_bytes)} (vllm#48436). "
        + (
            f"You pay for {_g(up)} per worker anyway: ask for it and get a larger CPU tier for the same RAM."
            if use_up
            else f"{_g(up)} per worker does not fit; ask for {_g(down)} per worker so nothing is rounded."
        )
    )
    total = target * workers
    if launch.flags.get("kv_offloading_size") is not None:
        fix = f"--kv-offloading-size {total // GiB}"
    else:
        fix = f'"cpu_bytes_to_use": {total}   # in --kv-transfer-config'
    return [Finding("HOST012", Severity.WARNING, message, fix)]


# ---------------------------------------------------------------------------
# GPUs


def launch_gpus(facts: HostFacts, launch: LaunchView | None) -> list[int] | None:
    """Physical GPU indices a launch uses, in rank order, or None when they cannot be told."""
    known: list[int] = []
    if facts.gpus and facts.gpus.devices:
        known = sorted(d.index for d in facts.gpus.devices)
    elif facts.topology:
        known = list(facts.topology.gpus)
    if launch is None:
        return known or None
    if launch.visible_devices is not None:
        order: list[int] = []
        by_uuid = {d.uuid: d.index for d in facts.gpus.devices if d.uuid} if facts.gpus else {}
        for entry in launch.visible_devices:
            if entry.isdigit():
                order.append(int(entry))
            elif entry in by_uuid:
                order.append(by_uuid[entry])
            else:
                return None  # MIG or unknown UUIDs
        return order[: launch.world_size]
    if not known:
        return list(range(launch.world_size))
    return known[: launch.world_size]


def check_gpu_processes(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    snap = facts.gpus
    if snap is None or not snap.devices:
        return []
    gpus = launch_gpus(facts, launch) or []
    findings = []
    for dev in snap.devices:
        if launch is not None and dev.index not in gpus:
            continue
        procs = snap.processes_on(dev.index)
        if not procs and dev.used_bytes < GPU_IDLE_USED_BYTES:
            continue
        who = ", ".join(
            f"pid {p.pid} ({p.name}" + (f", {_g(p.used_bytes)})" if p.used_bytes is not None else ")") for p in procs
        ) or "processes not visible from here"
        max_util = math.floor((dev.free_bytes - CUDA_CONTEXT_BYTES) / dev.total_bytes * 100) / 100
        requested = math.ceil(dev.total_bytes * launch.gpu_memory_utilization) if launch else None
        if launch is not None and requested is not None and requested > dev.free_bytes - CUDA_CONTEXT_BYTES:
            severity, fid = Severity.ERROR, "HOST021"
            message = (
                f"GPU{dev.index}: {_g(dev.free_bytes)} free of {_g(dev.total_bytes)} ({who} hold {_g(dev.used_bytes)}), "
                f"but --gpu-memory-utilization {launch.gpu_memory_utilization:g}"
                + ("" if launch.utilization_explicit else " (vLLM's default)")
                + f" asks for {_g(requested)} of the whole card. vLLM stops at start: 'Free memory on device "
                f"cuda:{gpus.index(dev.index) if dev.index in gpus else dev.index} ... is less than desired GPU memory utilization'."
            )
        else:
            severity, fid = (Severity.INFO if launch is not None else Severity.WARNING), "HOST020"
            message = (
                f"GPU{dev.index}: {_g(dev.used_bytes)} of {_g(dev.total_bytes)} already in use ({who}). "
                "--gpu-memory-utilization is a fraction of the whole card and must fit in what is free"
                + (f": at most {max_util:.2f} here." if max_util > 0 else "; nothing is left for a server.")
            )
        pids = " ".join(str(p.pid) for p in procs)
        if max_util >= 0.05:
            fix = f"--gpu-memory-utilization {max_util:.2f}" + (f"   # or stop: kill {pids}" if pids else "")
        else:
            fix = f"kill {pids}   # free GPU{dev.index}" if pids else f"nvidia-smi --id={dev.index}   # find and stop what holds it"
        findings.append(Finding(fid, severity, message, fix))
    return findings


# ---------------------------------------------------------------------------
# NUMA and topology


def gpu_numa_node(facts: HostFacts, gpu: int) -> int | None:
    """The NUMA node of a GPU: from the topology, else from its CPU affinity and the node cpulists."""
    topo = facts.topology
    if topo is None or gpu not in topo.gpus:
        return None
    node = topo.numa_node(gpu)
    if node is not None:
        return node
    cpus = topo.cpus(gpu)
    if not cpus or len(facts.numa_nodes) < 2:
        return facts.numa_nodes[0].node if len(facts.numa_nodes) == 1 else None
    matches = [n.node for n in facts.numa_nodes if cpus & n.cpus]
    return matches[0] if len(matches) == 1 else None


def _node_groups(facts: HostFacts, gpus: list[int]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for g in gpus:
        node = gpu_numa_node(facts, g)
        if node is not None:
            groups.setdefault(node, []).append(g)
    return groups


def _numactl_lines(groups: dict[int, list[int]], model: str | None, base_port: int = 8000) -> str:
    lines = []
    for i, (node, gpus) in enumerate(sorted(groups.items())):
        lines.append(
            f"CUDA_VISIBLE_DEVICES={','.join(map(str, gpus))} numactl --cpunodebind={node} --membind={node} "
            f"vllm serve {model or 'MODEL'} --tensor-parallel-size {len(gpus)} --port {base_port + i}"
        )
    return "\n".join(lines)


def check_tp_numa(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    topo = facts.topology
    if topo is None or launch is None or launch.tp < 2:
        return []
    order = launch_gpus(facts, launch)
    if not order or any(g not in topo.gpus for g in order):
        return []
    findings = []
    for group in topo.tp_groups_crossing(LinkKind.SYS, launch.tp, order):
        groups = _node_groups(facts, list(group))
        pair = next(
            (a, b) for i, a in enumerate(group) for b in group[i + 1 :] if topo.link(a, b).kind is LinkKind.SYS
        )
        nodes = " and ".join(str(n) for n in sorted(groups)) or "several"
        split = len(groups) > 1 and len({len(v) for v in groups.values()}) == 1
        message = (
            f"TP group {','.join(f'GPU{g}' for g in group)} spans NUMA nodes {nodes} "
            f"(GPU{pair[0]}-GPU{pair[1]}: SYS): every all-reduce crosses the CPU interconnect. "
            f"Expect less than {launch.tp - 1}x one card's throughput and low GPU utilisation (under 40%)."
        )
        if split:
            n_inst = len(groups)
            size = len(next(iter(groups.values())))
            message += (
                f" Consider {n_inst} x TP{size} instances, each bound with numactl to its own node; "
                f"check each fits with `oomguard plan --tensor-parallel-size {size}`"
                + (" and split the KV offload between them" if launch.ram.component("kv offload (CPU tier)") else "")
                + "."
            )
            fix = _numactl_lines(groups, launch.model)
        else:
            fix = f"CUDA_VISIBLE_DEVICES=<GPUs of one node> numactl --cpunodebind=N --membind=N vllm serve {launch.model or 'MODEL'} ..."
        findings.append(Finding("HOST030", Severity.WARNING, message, fix))
    return findings


def check_numa_binding(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    if facts.topology is None:
        return []
    gpus = launch_gpus(facts, launch) or []
    if launch is None:
        groups = _node_groups(facts, list(facts.topology.gpus))
        if len(groups) < 2:
            return []
        where = "; ".join(f"node {n}: {','.join(f'GPU{g}' for g in gs)}" for n, gs in sorted(groups.items()))
        return [
            Finding(
                "HOST031",
                Severity.INFO,
                f"the GPUs sit on {len(groups)} NUMA nodes ({where}). Keep each tensor-parallel group within one "
                "node and bind each server to that node's CPUs and memory, so pinned buffers and CPU threads stay local.",
                _numactl_lines(groups, None),
            )
        ]
    if launch.numa_bound or len(facts.numa_nodes) < 2:
        return []
    groups = _node_groups(facts, gpus)
    if len(groups) != 1:
        return []  # spanning nodes is HOST030's business
    node = next(iter(groups))
    info = next((n for n in facts.numa_nodes if n.node == node), None)
    need = launch.ram.expected_bytes
    policy = f"--membind={node}"
    extra = ""
    if info and info.mem_total_bytes is not None and need > info.mem_total_bytes * 0.9:
        policy = f"--preferred={node}"
        extra = (
            f" Node {node} has {_g(info.mem_total_bytes)}, less than the launch's ~{_g(need)}, "
            "so prefer it rather than bind to it."
        )
    visible = ",".join(map(str, gpus))
    return [
        Finding(
            "HOST031",
            Severity.INFO,
            f"the launch's GPUs ({visible}) are all on NUMA node {node} of {len(facts.numa_nodes)}; "
            "unbound, its CPU threads and pinned host buffers may land on another node and every "
            f"host-device copy crosses the CPU interconnect.{extra}",
            f"CUDA_VISIBLE_DEVICES={visible} numactl --cpunodebind={node} {policy} vllm serve {launch.model or 'MODEL'} ...",
        )
    ]


# ---------------------------------------------------------------------------
# the OOM killer


def check_oom_score(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    exposed = [p for p in facts.vllm_processes if p.oom_score_adj is None or p.oom_score_adj > -1000]
    if not exposed:
        return []
    pids = ", ".join(f"{p.pid} (oom_score_adj {p.oom_score_adj})" for p in exposed)
    return [
        Finding(
            "HOST040",
            Severity.INFO,
            f"running vLLM processes {pids} are the largest RSS on the machine and the OOM killer's first "
            "choice. Protecting them makes the kernel kill something else instead; fix the RAM budget first.",
            " && ".join(f"echo -1000 > /proc/{p.pid}/oom_score_adj" for p in exposed),
        )
    ]


CHECKS: tuple[Check, ...] = (
    check_overcommit,
    check_max_map_count,
    check_swap,
    check_shm,
    check_nofile,
    check_memory_high,
    check_memory_low,
    check_container_limit,
    check_launch_ram,
    check_kv_rounding,
    check_gpu_processes,
    check_tp_numa,
    check_numa_binding,
    check_oom_score,
)


def run_checks(facts: HostFacts, launch: LaunchView | None = None) -> list[Finding]:
    findings = [f for check in CHECKS for f in check(facts, launch)]
    return sorted(findings, key=lambda f: (f.severity.order, f.id))
