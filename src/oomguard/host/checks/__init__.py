"""The host checks: each a pure function of ``HostFacts`` (and a ``LaunchView``) returning findings.

No check reads a file or changes anything; the fix of every finding is a
command printed for the operator. ``run_checks`` runs them all and sorts the
findings by severity, then id. The checks live in three families:
``kernel`` (sysctls, swap, /dev/shm, open files), ``memory`` (cgroup, the
launch's host RAM, the OOM killer) and ``placement`` (GPU memory, topology, NUMA).
"""

from __future__ import annotations

from collections.abc import Callable

from oomguard.host.checks.kernel import (
    check_max_map_count,
    check_nofile,
    check_overcommit,
    check_shm,
    check_swap,
)
from oomguard.host.checks.memory import (
    check_container_limit,
    check_kv_rounding,
    check_kv_tier_shm,
    check_launch_ram,
    check_memory_high,
    check_memory_low,
    check_oom_score,
)
from oomguard.host.checks.placement import (
    check_gpu_processes,
    check_numa_binding,
    check_tp_numa,
    gpu_numa_node,
    launch_gpus,
)
from oomguard.host.facts import HostFacts
from oomguard.host.findings import Finding
from oomguard.host.launchview import LaunchView

__all__ = ["CHECKS", "gpu_numa_node", "launch_gpus", "run_checks"]

Check = Callable[[HostFacts, "LaunchView | None"], list[Finding]]

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
    check_kv_tier_shm,
    check_gpu_processes,
    check_tp_numa,
    check_numa_binding,
    check_oom_score,
)


def _raw(facts: HostFacts, launch: LaunchView | None) -> list[Finding]:
    return [f for check in CHECKS for f in check(facts, launch)]


def _verify(facts: HostFacts, launch: LaunchView, finding: Finding, before: set[str]) -> Finding:
    """Re-run host's own checks on the launch with ``finding``'s fix applied, and say what they find."""
    after = _raw(facts, launch.with_flags(finding.edit))
    serious = {f.id for f in after if f.severity.order <= 1}
    if finding.id in serious:
        return finding.checked(f"re-checked: the edited launch still raises {finding.id}")
    new = sorted(serious - before)
    if new:
        return finding.checked(f"re-checked: the edit clears {finding.id} but raises {', '.join(new)}")
    return finding.checked(f"re-checked: the edited launch clears {finding.id} and raises no new finding")


def run_checks(facts: HostFacts, launch: LaunchView | None = None) -> list[Finding]:
    """Every check; a fix that edits the launch is re-checked against the other checks before it is printed."""
    findings = _raw(facts, launch)
    if launch is not None:
        before = {f.id for f in findings if f.severity.order <= 1}
        findings = [_verify(facts, launch, f, before) if f.edit is not None else f for f in findings]
    return sorted(findings, key=lambda f: (f.severity.order, f.id))
