"""Compare what the live server does with what the plan predicted, and say when they drift.

Comparisons, each reported once when it first goes wrong:

- the KV pool: ``vllm:cache_config_info`` gives the pool the server actually
  allocated, one engine's: ``kv_cache_size_tokens`` from 0.24 (vLLM's "GPU KV
  cache size"), else blocks x block size; its ``num_gpu_blocks``; and from 0.24
  ``kv_cache_max_concurrency``. The plan predicted ``kv_cache_tokens``,
  ``num_gpu_blocks`` and ``max_concurrency``. More than ``POOL_TOLERANCE``
  apart means the launch, the GPU or its other tenants are not what the plan assumed;
- GPU memory per GPU against vLLM's budget (``gpu_memory_utilization`` x the
  card, the plan's ``requested_bytes``): memory beyond it is prefill
  activations outside the profile, fragmentation, or another process;
- KV usage in tokens (usage x pool) at its peak, against the pool, for the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oomguard.units import GiB
from oomguard.watch.events import Event, EventKind, Severity
from oomguard.watch.state import WatchState

POOL_TOLERANCE = 0.10
BUDGET_MARGIN_BYTES = 512 * 2**20


@dataclass
class PlanReference:
    kv_cache_tokens: int
    budget_bytes_per_gpu: list[int]
    gpu_name: str | None = None
    max_concurrency: float | None = None
    starts: bool = True
    notes: list[str] = field(default_factory=list)
    num_gpu_blocks: int | None = None
    block_size: int | None = None

    @classmethod
    def from_plan(cls, plan: Any) -> PlanReference:
        return cls(
            kv_cache_tokens=int(plan.kv_cache_tokens),
            budget_bytes_per_gpu=[int(r.requested_bytes) for r in plan.ranks],
            gpu_name=getattr(plan.gpu, "name", None),
            max_concurrency=float(plan.max_concurrency),
            starts=bool(plan.starts),
            num_gpu_blocks=int(plan.num_gpu_blocks) if getattr(plan, "num_gpu_blocks", None) is not None else None,
            block_size=int(plan.block_size) if getattr(plan, "block_size", None) else None,
        )


@dataclass
class DriftCheck:
    plan: PlanReference
    reported: set[str] = field(default_factory=set)
    checked: set[str] = field(default_factory=set)
    live_pool_tokens: int | None = None

    def check(self, t: float, state: WatchState) -> list[Event]:
        events: list[Event] = []
        live = state.kv_pool_tokens
        if live and "pool" not in self.reported:
            self.live_pool_tokens = live
            predicted = self.plan.kv_cache_tokens
            diff = (live - predicted) / predicted if predicted else 0.0
            if predicted and abs(diff) > POOL_TOLERANCE:
                self.reported.add("pool")
                events.append(
                    Event(
                        t,
                        EventKind.DRIFT,
                        Severity.WARNING,
                        f"KV pool drift: the server allocated {live:,} tokens, the plan predicted {predicted:,} "
                        f"({diff:+.0%}); the launch, the GPU or its other tenants differ from the plan",
                        {"live_tokens": live, "predicted_tokens": predicted},
                    )
                )
            else:
                self.reported.add("pool")  # checked once: it matches
        live_bs = state.kv_block_size
        if live_bs and self.plan.block_size and live_bs != self.plan.block_size and "block-size" not in self.checked:
            # Blocks of different sizes do not compare; the pool in tokens (above) still does.
            self.checked.update({"block-size", "blocks"})
            self.plan.notes.append(
                f"the server's KV blocks are {live_bs} tokens, the plan's {self.plan.block_size} (another attention backend "
                "or platform): blocks not compared, tokens are"
            )
        events += self._compare("blocks", t, state.kv_pool_blocks, self.plan.num_gpu_blocks, "KV blocks", "{:,.0f}")
        events += self._compare("concurrency", t, state.kv_max_concurrency, self.plan.max_concurrency, "maximum concurrency", "{:.2f}x")
        budgets = self.plan.budget_bytes_per_gpu
        for i, key in enumerate(state.gpu_keys()):
            if not budgets or f"budget-{key}" in self.reported:
                continue
            used = state.value(key, "used_bytes")
            budget = budgets[min(i, len(budgets) - 1)]
            if used is not None and used > budget + BUDGET_MARGIN_BYTES:
                self.reported.add(f"budget-{key}")
                events.append(
                    Event(
                        t,
                        EventKind.DRIFT,
                        Severity.WARNING,
                        f"{key}: {used / GiB:.1f} GiB in use, beyond vLLM's budget of {budget / GiB:.1f} GiB "
                        "(--gpu-memory-utilization x the card): prefill activations outside the profile, "
                        "or another process on the GPU",
                        {"gpu": key, "used_bytes": int(used), "budget_bytes": budget},
                    )
                )
        return events

    def _compare(self, name: str, t: float, live: float | None, predicted: float | None, what: str, fmt: str) -> list[Event]:
        """One drift event when the server's figure and the plan's differ by more than POOL_TOLERANCE."""
        if not live or not predicted or name in self.checked:
            return []
        self.checked.add(name)
        diff = (live - predicted) / predicted
        if abs(diff) <= POOL_TOLERANCE:
            return []
        self.reported.add(name)
        return [
            Event(
                t,
                EventKind.DRIFT,
                Severity.WARNING,
                f"{what} drift: the server reports {fmt.format(live)}, the plan predicted {fmt.format(predicted)} ({diff:+.0%})",
                {f"live_{name}": live, f"predicted_{name}": predicted},
            )
        ]

    def to_json(self, state: WatchState) -> dict[str, Any]:
        pool = self.live_pool_tokens or state.kv_pool_tokens
        kv = state.timelines.get("engine.kv_cache_usage")
        peak = kv.peak.value if kv and kv.peak else None
        basis = pool or self.plan.kv_cache_tokens
        return {
            "predicted_kv_cache_tokens": self.plan.kv_cache_tokens,
            "live_kv_cache_tokens": pool,
            "pool_difference": None
            if not pool
            else round((pool - self.plan.kv_cache_tokens) / max(1, self.plan.kv_cache_tokens), 4),
            "peak_kv_usage": peak,
            "peak_kv_tokens": None if peak is None else int(peak * basis),
            "predicted_max_concurrency": self.plan.max_concurrency,
            "live_max_concurrency": state.kv_max_concurrency,
            "predicted_num_gpu_blocks": self.plan.num_gpu_blocks,
            "live_num_gpu_blocks": state.kv_pool_blocks,
            "predicted_block_size": self.plan.block_size,
            "live_block_size": state.kv_block_size,
            "budget_bytes_per_gpu": self.plan.budget_bytes_per_gpu,
            "gpu": self.plan.gpu_name,
            "warnings": sorted(self.reported - {"pool"} | ({"pool"} if self._pool_drifted(pool) else set())),
            "notes": self.plan.notes,
        }

    def _pool_drifted(self, pool: int | None) -> bool:
        if not pool or not self.plan.kv_cache_tokens:
            return False
        return abs(pool - self.plan.kv_cache_tokens) / self.plan.kv_cache_tokens > POOL_TOLERANCE
