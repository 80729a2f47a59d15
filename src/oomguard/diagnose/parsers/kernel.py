"""Kernel OOM-killer records (dmesg, journalctl -k, syslog), cgroup limits and init-system notices.

Recognised lines (any kernel since 3.x):
- ``Out of memory: Killed process 4242 (python3) total-vm:..kB, anon-rss:..kB, ...``
  (older: ``Out of memory: Kill process 4242 (python) score 900 or sacrifice child`` then
  ``Killed process 4242 (python) total-vm:...``);
- ``Memory cgroup out of memory: Killed process ...``;
- ``python3 invoked oom-killer: gfp_mask=..., order=0, oom_score_adj=0``;
- ``oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/kubepods/...,task=python3,pid=4242,uid=0``;
- ``memory: usage 31457280kB, limit 31457280kB, failcnt 123`` (cgroup usage at the kill);
- ``oom_reaper: reaped process 4242 (python3), now anon-rss:0kB, ...``;
- systemd ``A process of this unit has been killed by the OOM killer`` / ``Failed with result 'oom-kill'``.
"""

from __future__ import annotations

import re

from oomguard.diagnose.events import LogLine, Signal
from oomguard.diagnose.facts import Collector, KernelKill
from oomguard.diagnose.parsers.numbers import integer
import oomguard.lazy_re as lazy_re

_KILLED = lazy_re.compile(
    r"(?:(Memory cgroup) out of memory: |Out of memory(?: \(oom_kill_allocating_task\))?: )?"
    r"Kill(?:ed)? process (\d+) \(([^)]*)\)(.*)"
)
_RSS = lazy_re.compile(r"(total-vm|anon-rss|file-rss|shmem-rss):\s*(\d+)kB")
_INVOKED = lazy_re.compile(r"(\S{1,64}) invoked oom-killer:")
_OOM_KILL = lazy_re.compile(r"oom-kill:constraint=(\w+)(?:.*?oom_memcg=([^,\s]+))?(?:.*?task=([^,\s]+))?(?:.*?pid=(\d+))?")
_USAGE = lazy_re.compile(r"memory: usage (\d+)kB, limit (\d+)kB, failcnt (\d+)")
_SYSTEMD = ("killed by the OOM killer", "Failed with result 'oom-kill'", "OOMKilled", "oom_kill")
# Process names a vLLM server runs under (comm is cut to 15 characters).
VLLM_PROCESS = lazy_re.compile(r"^(?:python[\d.]*|vllm|pt_main_thread|ray::\S*|VLLM::\S*|uvicorn|torchrun|pt_elastic)$")
_SYSTEMD_RX = lazy_re.compile("|".join(map(re.escape, _SYSTEMD)))


def parse_kernel(line: LogLine, col: Collector) -> bool:
    """Handle kernel-ish lines; True when the line was one."""
    msg = line.message
    if "process" in msg and "Kill" in msg:
        m = _KILLED.search(msg)
        if m and ("total-vm" in msg or "score" in msg or m.group(1) or "Out of memory" in msg or line.kernel):
            cgroup_kill = bool(m.group(1))
            pid, name = integer(m.group(2)), m.group(3)
            rss = {k: integer(v) * 1024 for k, v in _RSS.findall(m.group(4))}
            if "score" in m.group(4) and "total-vm" not in msg:
                # Older two-line form: the second line ("Killed process ...") carries the sizes.
                return True
            if _already_recorded(col, pid, rss):
                return True
            kill = KernelKill(pid, name, rss.get("anon-rss"), rss.get("total-vm"),
                              "CONSTRAINT_MEMCG" if cgroup_kill else None, None, line.file, line.line, line.raw.strip()[:500])
            _merge_context(col, kill)
            col.kernel_kills.append(kill)
            _bound(col.kernel_kills)
            col.signal(Signal.KERNEL_OOM_KILL, line, numbers={
                "pid": pid, "name": name, "cgroup": cgroup_kill,
                **({"anon_rss_gib": kill.anon_rss_bytes / (1 << 30)} if kill.anon_rss_bytes else {}),
                "vllm_process": bool(VLLM_PROCESS.match(name)),
            })
            return True
    if "invoked oom-killer" in msg:
        m = _INVOKED.search(msg)
        _bound(col.kernel_memory)
        col.kernel_memory.append({"event": "oom-killer invoked", "by": m.group(1) if m else None,
                                  "file": line.file, "line": line.line})
        return True
    if "oom-kill:" in msg:
        m = _OOM_KILL.search(msg)
        if m:
            _bound(col.kernel_memory)
            col.kernel_memory.append({"event": "oom-kill", "constraint": m.group(1), "cgroup": m.group(2),
                                      "task": m.group(3), "pid": integer(m.group(4)) if m.group(4) else None,
                                      "file": line.file, "line": line.line})
            for kill in col.kernel_kills:
                if m.group(4) and kill.pid == integer(m.group(4)):
                    kill.constraint, kill.cgroup = m.group(1), m.group(2)
        return True
    if "memory: usage" in msg:
        m = _USAGE.search(msg)
        if m:
            _bound(col.kernel_memory)
            col.kernel_memory.append({"event": "cgroup usage", "usage_bytes": integer(m.group(1)) * 1024,
                                      "limit_bytes": integer(m.group(2)) * 1024, "failcnt": integer(m.group(3)),
                                      "file": line.file, "line": line.line})
            return True
    if "oom_reaper" in msg:
        return True
    if _SYSTEMD_RX.search(msg):
        col.signal(Signal.KERNEL_OOM_KILL, line, numbers={"vllm_process": "vllm" in msg.lower(), "systemd": True})
        return True
    return False


def _bound(records: list, limit: int = 100) -> None:
    """Keep the most recent records only: a kernel log can hold thousands of kills."""
    if len(records) >= limit:
        del records[: len(records) - limit + 1]


def _already_recorded(col: Collector, pid: int, rss: dict[str, int]) -> bool:
    """Old kernels print the kill twice ("Kill process" then "Killed process"): keep one."""
    for kill in col.kernel_kills:
        if kill.pid == pid and kill.file == col.last_file:
            if rss and kill.anon_rss_bytes is None:
                kill.anon_rss_bytes = rss.get("anon-rss")
                kill.total_vm_bytes = rss.get("total-vm")
            return True
    return False


def _merge_context(col: Collector, kill: KernelKill) -> None:
    for event in reversed(col.kernel_memory[-5:]):
        if event.get("event") == "oom-kill" and (event.get("pid") in (None, kill.pid)):
            kill.constraint = kill.constraint or event.get("constraint")
            kill.cgroup = kill.cgroup or event.get("cgroup")
            break


# For diagnose's byte scan (parsers/scanset.py: every module-level pattern here is scanned, but NOT_SCANNED; SCAN
# adds the literals where a substring test alone decides).
# Kernel lines as such (the comp:kernel cue) are found by their prefixes: diagnose/lines.py's KERNEL_SCAN.
SCAN = ("invoked oom-killer",)
# A process name, matched on a kill line's process field.
NOT_SCANNED = (VLLM_PROCESS,)
