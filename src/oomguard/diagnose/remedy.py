"""Shared arithmetic for the fix builders: where numbers come from and how a setting is stepped.

A builder reads numbers from the merged signals of its verdict (``num``), the
memory facts of the same run (``fact``), and the arguments that ran (``int_arg``);
the step functions turn a current setting into a conservative new one.
"""

from __future__ import annotations

import math
from typing import Any

from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Fix
from oomguard.diagnose.facts import Collector

MAX_UTIL = 0.95


def num_of(members: list[Any], key: str) -> Any:
    for m in sorted(members, key=lambda c: -c.event.seq):
        if key in m.event.numbers:
            return m.event.numbers[key]
    return None


def fact_of(col: Collector, name: str, run: int | None = None) -> float | None:
    facts = col.memory.get(name) or []
    for fact in reversed(facts):
        if run is None or fact.run == run:
            return fact.value
    return None


def run_of(members: list[Any]) -> int | None:
    return max((m.event.run for m in members), default=None)


def util_of(ctx: Context, col: Collector, run: int | None) -> float | None:
    return fact_of(col, "gpu_memory_utilization", run) or ctx.gpu_memory_utilization


default_util = Context.default_util  # the fix code's name for it


def round_util(value: float) -> float:
    return math.floor(min(value, MAX_UTIL) * 100) / 100


def int_arg(ctx: Context, name: str) -> int | None:
    from oomguard.numbers import NumberError, as_int

    value = ctx.arg(name)
    try:  # "abc", nan, inf, 10**400 from a launch or a log: not a number to build a fix on
        return as_int(value, strings=True) if value is not None and not isinstance(value, bool) else None
    except NumberError:
        return None


def lower_tokens(ctx: Context) -> int:
    current = int_arg(ctx, "max_num_batched_tokens")
    if current:
        return max(2048, current // 2) if current > 2048 else max(512, current // 2)
    return 4096


def current_max_num_seqs(ctx: Context) -> int:
    """The launch's max_num_seqs, else the release's default for the GPU the report shows
    (model.engine.default_batch_limits: 0.8+ gives a large card 1024, a small one 256); with the GPU
    unknown, a large card's default, the larger one (so the lowered value is below either)."""
    from oomguard.model.engine import default_batch_limits

    explicit = int_arg(ctx, "max_num_seqs")
    if explicit:
        return explicit
    version = ctx.version_tuple()
    if version is None:
        # a V1 log without its version: 0.10's rule (A100s get the small-card default); else V0's
        version = (0, 10) if ctx.engine == "V1" else (0, 7)
    gib = ctx.gpu_total_gib or ctx.mentioned_gpu_gib or 80.0
    return default_batch_limits((*version, 0), int(gib * (1 << 30)), ctx.gpu_name or "")[1]


def lower_seqs(ctx: Context, hint: int | None = None) -> int:
    current = hint or current_max_num_seqs(ctx)
    return max(8, current // 4 if current >= 512 else current // 2)


def primary_reason(members: list[Any]) -> str:
    best = max(members, key=lambda m: m.confidence) if members else None
    return best.reason if best else ""


def cause_of(members: list[Any]) -> str | None:
    for m in sorted(members, key=lambda c: -c.confidence):
        if m.cause:
            return m.cause
    return None


def human_bytes(n: float) -> str:
    """Bytes as vLLM's human-readable ints read them (upper-case suffix = binary)."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{math.ceil(n / scale)}{suffix}"
    return str(math.ceil(n))


def more_tp(ctx: Context, why: str) -> Fix:
    """The next tensor-parallel size up: the smallest power of two above the current one that divides the model's
    attention heads when its config is read (vLLM refuses a size that does not: ModelConfig.verify_with_parallel_config),
    else twice the current one."""
    tp = ctx.tensor_parallel_size
    heads = ctx.config_heads
    if heads:
        bigger = next((d for d in (2, 4, 8, 16, 32, 64) if d > tp and heads % d == 0), None)
        if bigger is not None:
            return Fix("--tensor-parallel-size", bigger, why)
    return Fix("--tensor-parallel-size", tp * 2, why)


# --- builders ------------------------------------------------------------
