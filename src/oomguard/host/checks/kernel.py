"""Kernel and process-limit checks: overcommit, max_map_count, swap, /dev/shm, open files."""

from __future__ import annotations

from oomguard.host.cgroup import ContainerKind
from oomguard.host.checks.common import gib_text as _g
from oomguard.host.facts import HostFacts
from oomguard.host.findings import Finding, Severity
from oomguard.host.launchview import LaunchView
from oomguard.units import GiB, MiB

MIN_MAX_MAP_COUNT = 262_144
RECOMMENDED_MAX_MAP_COUNT = 2_621_440
MIN_SHM_BYTES = 1 * GiB
VLLM_NOFILE_TARGET = 65_535  # vLLM raises its soft limit to this, within the hard limit


def _sysctl_where(facts: HostFacts) -> str:
    if facts.container is ContainerKind.NONE:
        return ""
    # vm.* sysctls are not namespaced: a container inherits the node's value.
    return " Set it on the host (node), not in the container; persist it in /etc/sysctl.d/."


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
            f"/dev/shm is {size / MiB:.0f} MiB"
            + (" (Docker's default)" if size == 64 * MiB else "")
            + f": {context}.",
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
