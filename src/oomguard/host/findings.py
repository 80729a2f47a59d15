"""Findings of ``oomguard host`` and the registry of their stable ids.

Each id names a problem (not a fix) and stays the same across releases; the
docs page ``docs/host.md`` lists every id in ``RULES`` (a test keeps them in
step). A finding always carries ``fix_command``: the command that fixes it,
printed for the operator to run. oomguard never runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

__all__ = ["Severity", "Finding", "Rule", "RULES"]


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def order(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
class Rule:
    id: str
    name: str  # kebab-case name of the problem
    summary: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("HOST001", "overcommit-strict", "vm.overcommit_memory=2 refuses the large virtual reservations of CUDA and vLLM"),
        Rule("HOST002", "max-map-count-low", "vm.max_map_count is too low for mmapped checkpoints and CUDA mappings"),
        Rule("HOST003", "swap-enabled", "swap is on: the server thrashes before it is killed"),
        Rule("HOST004", "shm-too-small", "/dev/shm is too small for NCCL and vLLM's shared-memory queues"),
        Rule("HOST005", "open-files-limit-low", "the open-file limit is below what vLLM raises it to (65535)"),
        Rule("HOST006", "cgroup-memory-high", "cgroup memory.high throttles the server below its hard limit"),
        Rule("HOST007", "host-memory-low", "little RAM is available now"),
        Rule("HOST008", "container-memory-limit", "a cgroup limit, not the machine's RAM, bounds the server"),
        Rule("HOST010", "host-ram-exceeded", "the launch needs more host RAM than the machine or cgroup allows"),
        Rule("HOST011", "host-ram-tight", "the launch's host RAM is close to the limit, or over it at the high estimate"),
        Rule("HOST012", "kv-offload-rounding", "each worker's KV offload buffer is pinned at the next power of two"),
        Rule("HOST013", "shm-below-kv-tier", "/dev/shm is smaller than the CPU KV tier's file (vLLM >= 0.27 keeps it there)"),
        Rule("HOST020", "gpu-memory-in-use", "other processes hold GPU memory"),
        Rule("HOST021", "gpu-free-below-utilization", "free GPU memory is below what --gpu-memory-utilization asks for"),
        Rule("HOST030", "tp-group-crosses-numa", "a tensor-parallel group spans NUMA nodes (SYS links)"),
        Rule("HOST031", "numa-binding", "GPUs sit on several NUMA nodes; bind the server to its GPUs' node"),
        Rule("HOST040", "oom-score-unprotected", "a running vLLM process is a candidate for the kernel's OOM killer"),
    )
}


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    message: str
    fix_command: str
    # A fix that edits the launch: its flags after the edit, so ``run_checks`` re-runs host's own
    # checks on them before the fix is printed (``fix_checked`` says what that found).
    edit: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    fix_checked: str | None = None

    def checked(self, note: str) -> "Finding":
        return replace(self, fix_checked=note)

    def __post_init__(self) -> None:
        if self.id not in RULES:  # a typo here would silently break the stable-id promise
            raise ValueError(f"unregistered finding id {self.id}")

    @property
    def name(self) -> str:
        return RULES[self.id].name

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "severity": self.severity.value,
            "message": self.message,
            "fix_command": self.fix_command,
            **({"fix_checked": self.fix_checked} if self.fix_checked else {}),
        }
