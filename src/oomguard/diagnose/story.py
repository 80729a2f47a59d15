"""Several files, one story: the events of every input on one timeline, and whether the inputs agree.

Timestamps come in the forms the readers keep (vLLM's ``MM-DD HH:MM:SS``, ``dmesg -T``, journald /
syslog ``Mon DD HH:MM:SS``, ISO); they are reduced to (month, day, seconds of the day), which orders events
of one incident (vLLM prints no year). Entries without a usable time (``dmesg`` uptime seconds, pasted
lines) keep their place after the last timed entry before them in their own file.

Checks (each says ``agree`` true/false with the two sides):
- the GPU: its memory in the log (torch's OOM message, vLLM's profile lines, nvidia-smi) vs ``--gpu``;
- the arguments: vLLM's printed ``non-default args`` / ``Namespace(...)`` vs the ``--launch`` script;
- the kernel's OOM victim vs the processes the vLLM log names (``pid=N``).
"""

from __future__ import annotations

import re
from typing import Any
import oomguard.lazy_re as lazy_re

_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                        "Dec"), 1)}
_VLLM_TIME = lazy_re.compile(r"^(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)$")
_ISO_TIME = lazy_re.compile(r"^\d{4}-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)")
_SYSLOG_TIME = lazy_re.compile(r"^(?:[A-Z][a-z]{2}\s+)?([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d\d):(\d\d):(\d\d)")
# Totals within this share are the same card (marketing GB vs GiB, the driver's reserve).
_GPU_TOLERANCE = 0.06
_COMPARED = ("max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size",
             "max_num_seqs", "max_num_batched_tokens", "kv_cache_dtype", "quantization", "dtype", "enforce_eager",
             "block_size", "cpu_offload_gb", "swap_space", "model")


def time_key(text: str | None) -> tuple[int, int, int] | None:
    if not text:
        return None
    for rx, month_first in ((_VLLM_TIME, True), (_ISO_TIME, True)):
        m = rx.match(text)
        if m:
            mo, day, h, mi, s = (int(g) for g in m.groups())
            return mo, day, h * 3600 + mi * 60 + s
    m = _SYSLOG_TIME.match(text)
    if m and m.group(1) in _MONTHS:
        return _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)) * 3600 + int(m.group(4)) * 60 + int(m.group(5))
    return None


def merged_timeline(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """All inputs' entries in time order when they carry times; file order within a file otherwise."""
    keyed = []
    last: dict[str, tuple[int, int, int]] = {}
    for i, e in enumerate(entries):
        k = time_key(e.get("time"))
        if k is not None:
            last[e["file"]] = k
        else:
            k = last.get(e["file"], (0, 0, -1))
        keyed.append((k, i, e))
    if len({e["file"] for e in entries}) < 2:
        return entries
    return [e for _, _, e in sorted(keyed, key=lambda t: (t[0], t[1]))]


def checks(col: Any, ctx: Any, launch: Any, gpu_option: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if gpu_option:
        out += _gpu_check(col, gpu_option)
    if launch is not None and launch.found and col.cli_args:
        out += _args_check(col.cli_args, launch.args)
    out += _kill_check(col)
    return out


def _gpu_check(col: Any, gpu_option: str) -> list[dict[str, Any]]:
    from oomguard.diagnose.context import gpu_total_gib_from_name

    claimed = gpu_total_gib_from_name(gpu_option)
    seen = None
    source = None
    for info in col.gpus.values():
        if info.get("total_bytes"):
            seen, source = info["total_bytes"] / (1 << 30), info.get("name") or "the log"
            break
    fact = col.latest("total_gpu")
    if seen is None and fact is not None:
        seen, source = fact.value, f"{fact.file}:{fact.line}"
    if claimed is None or seen is None:
        return []
    agree = abs(claimed - seen) <= _GPU_TOLERANCE * max(claimed, seen)
    return [{"check": "gpu", "agree": agree,
             "detail": (f"--gpu {gpu_option} is {claimed:.1f} GiB; the log shows a {seen:.2f} GiB GPU ({source})"
                        + ("" if agree else ": the log comes from another GPU, and the log's figure is used"))}]


def _norm(value: Any) -> str:
    from oomguard.diagnose.parsers.identity import _coerce

    v = _coerce(value) if isinstance(value, str) else value
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v).strip().lower()


def _args_check(printed: dict[str, Any], launched: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key in _COMPARED:
        if key in launched and key in printed and _norm(launched[key]) != _norm(printed[key]):
            out.append({"check": f"arg {key}", "agree": False,
                        "detail": f"--launch sets {key}={launched[key]!s:.80} but vLLM printed {key}={printed[key]!s:.80}: "
                                  "the log is what ran (another launch, an override, or a config file)"})
        elif key in launched and key not in printed and key != "model" and _norm(launched[key]) not in ("none", ""):
            out.append({"check": f"arg {key}", "agree": False,
                        "detail": f"--launch sets {key}={launched[key]!s:.80} but vLLM's non-default args do not "
                                  "show it: the log may come from another launch (or the value is vLLM's default)"})
    if not out:
        out.append({"check": "args", "agree": True, "detail": "the launch and vLLM's printed arguments agree"})
    return out


def _kill_check(col: Any) -> list[dict[str, Any]]:
    if not col.kernel_kills or not col.vllm_pids:
        return []
    out = []
    for kill in col.kernel_kills[-3:]:
        if kill.pid is None:
            continue
        ours = kill.pid in col.vllm_pids
        out.append({"check": "oom-kill victim", "agree": ours,
                    "detail": (f"the kernel killed pid {kill.pid} ({kill.name}), "
                               + (f"a process of this vLLM log ({col.vllm_pids[kill.pid]})" if ours else
                                  "which the vLLM log does not name: another process, or another run"))})
    return out
