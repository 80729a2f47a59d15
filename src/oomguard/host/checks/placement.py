"""GPU checks: memory held by other processes, TP groups across NUMA nodes, NUMA binding."""

from __future__ import annotations

import math

from oomguard.host.checks.common import gib_text as _g
from oomguard.host.facts import HostFacts
from oomguard.host.findings import Finding, Severity
from oomguard.host.launchview import LaunchView
from oomguard.inputs.topology import LinkKind
from oomguard.units import GiB

from oomguard.model.planner import CUDA_CONTEXT_BYTES  # noqa: E402  (taken from free memory before vLLM measures it)
GPU_IDLE_USED_BYTES = 1 * GiB  # below this a GPU with no listed process counts as idle


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


def _node_local_order(facts: HostFacts, order: list[int], tp: int) -> list[int] | None:
    """GPUs for ``len(order)`` ranks such that each TP group sits on one node, preferring the launch's own."""
    if facts.topology is None:
        return None
    pool = order + [g for g in facts.topology.gpus if g not in order]
    groups: list[list[int]] = []
    for _, gpus in sorted(_node_groups(facts, pool).items()):
        groups.extend(gpus[i : i + tp] for i in range(0, len(gpus) - tp + 1, tp))
    needed = len(order) // tp
    if len(groups) < needed:
        return None
    # Groups made only of the launch's GPUs first, so a pure reordering is preferred.
    groups.sort(key=lambda g: not all(x in order for x in g))
    return [g for group in groups[:needed] for g in group]


def check_tp_numa(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    topo = facts.topology
    if topo is None or launch is None or launch.tp < 2:
        return []
    order = launch_gpus(facts, launch)
    if not order or any(g not in topo.gpus for g in order):
        return []
    crossing = topo.tp_groups_crossing(LinkKind.SYS, launch.tp, order)
    if not crossing:
        return []
    described = []
    for group in crossing:
        a, b = next(
            (a, b) for i, a in enumerate(group) for b in group[i + 1 :] if topo.link(a, b).kind is LinkKind.SYS
        )
        nodes = sorted(_node_groups(facts, list(group)))
        span = f"NUMA nodes {' and '.join(map(str, nodes))}" if len(nodes) > 1 else "the CPU interconnect"
        described.append(f"{','.join(f'GPU{g}' for g in group)} spans {span} (GPU{a}-GPU{b}: SYS)")
    message = (
        f"TP group {'; '.join(described)}: every all-reduce crosses the CPU interconnect. "
        f"The symptoms: TP{launch.tp} giving less than {launch.tp - 1}x one card's throughput, GPU utilisation under 40%."
    )
    model = launch.model or "MODEL"
    by_node = _node_groups(facts, order)
    known = sum(len(v) for v in by_node.values()) == len(order)
    local = _node_local_order(facts, order, launch.tp) if known else None
    if local is not None:
        # Enough GPUs share a node for every TP group; only the choice or order of GPUs is wrong.
        message += f" GPUs {','.join(map(str, local))}, listed in this order, keep every TP group within one node."
        fix = f"CUDA_VISIBLE_DEVICES={','.join(map(str, local))} vllm serve {model} ..."
    elif known and len(by_node) > 1 and len({len(v) for v in by_node.values()}) == 1:
        size = len(next(iter(by_node.values())))
        message += (
            f" Consider {len(by_node)} x TP{size} instances, each bound with numactl to its own node; "
            f"check each fits with `oomguard plan --tensor-parallel-size {size}`"
            + (" and split the KV offload between them" if launch.ram.component("kv offload (CPU tier)") else "")
            + "."
        )
        fix = _numactl_lines(by_node, launch.model)
    else:
        fix = f"CUDA_VISIBLE_DEVICES=<the GPUs of one node> numactl --cpunodebind=N --membind=N vllm serve {model} ..."
    return [Finding("HOST030", Severity.WARNING, message, fix)]


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
