"""What ``oomguard fit`` returns: ranked candidate launches, and the JSON contract.

The JSON keys ``candidates`` (each with ``command``, ``flags``, ``plan`` — the
plan JSON object — and ``tradeoffs``) and ``searched`` are a contract; the
other keys are additions.
"""

from __future__ import annotations


from oomguard.records import field, record

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "value") and not isinstance(value, (int, float, str, bool)):
        return value.value  # enums
    return value


@record
class Candidate:
    """One launch that fits, with its plan and the reasons to pick it or not."""

    flags: dict
    env: dict
    command: str
    plan: Any  # oomguard.model.planner.Plan
    tradeoffs: list[str]
    estimates: dict
    summary: dict  # the numbers fit ranked on
    edit: list = field(default_factory=list)  # oomguard.fit.command.Change, for --from
    cpu_tier: dict | None = None

    def to_dict(self) -> dict:
        from oomguard.redact import is_secret

        d = {
            "command": self.command,
            # credentials never leave: the launch's --api-key and friends are shown as *** (the one
            # redactor decides, by name and by value, as for check, bundle and export)
            "flags": _jsonable({k: ("***" if is_secret(k, v) else v) for k, v in self.flags.items()}),
            "env": {k: ("***" if is_secret(k, v) else v) for k, v in self.env.items()},
            "plan": self.plan.to_dict(),
            "tradeoffs": list(self.tradeoffs),
            "estimates": self.estimates,
            "summary": _jsonable(self.summary),
        }
        if self.edit is not None:
            d["edit"] = [c.to_dict() for c in self.edit]
        if self.cpu_tier is not None:
            d["cpu_tier"] = self.cpu_tier
        return d


@record
class FitResult:
    candidates: list[Candidate]
    searched: int
    goal: dict
    notes: list[str] = field(default_factory=list)
    rejected: dict = field(default_factory=dict)  # reason -> count of launches that failed it
    cpu_tier: dict | None = None  # one full request vs the GPU pool and host RAM
    closest: list[Candidate] = field(default_factory=list)  # when nothing meets the goal: what fits if it is relaxed
    launch_plan: Any = None  # the --from launch as written
    elapsed_s: float = 0.0
    from_launch: bool = False
    checkpoints: list[Candidate] = field(default_factory=list)  # the best launch of each quantized checkpoint of the model
    goal_lowered: bool = False  # the shown launches meet the goal only with a lower max-model-len
    rejected_flags: list[str] = field(default_factory=list)  # --lenient: flags this release refuses, left out

    @property
    def found(self) -> bool:
        return bool(self.candidates)

    @property
    def goal_met(self) -> bool:
        """The first launch shown meets the goal as stated: what the exit code says, the same for
        ``--from`` (whose edit may lower the length) and ``--model`` (whose closest launches do)."""
        return bool(self.candidates) and not self.goal_lowered

    def to_dict(self) -> dict:
        d = {
            "candidates": [c.to_dict() for c in self.candidates],
            "searched": self.searched,
            "goal": _jsonable(self.goal),
            "goal_met": self.goal_met,
            "notes": list(self.notes),
            "rejected": dict(self.rejected),
            "elapsed_s": round(self.elapsed_s, 3),
        }
        if self.cpu_tier is not None:
            d["cpu_tier"] = self.cpu_tier
        if self.closest:
            d["closest"] = [c.to_dict() for c in self.closest]
        if self.checkpoints:
            d["checkpoints"] = [c.to_dict() for c in self.checkpoints]
        if self.launch_plan is not None:
            p = self.launch_plan
            d["launch"] = {"starts": p.starts and not self.rejected_flags, "failure": p.failure.value if p.failure else None,
                           "error": p.error, "memory_plan_starts": p.starts,
                           # the numbers plan and check print for the same launch (one launch, one answer)
                           "kv_cache_tokens": p.kv_cache_tokens, "max_concurrency": round(p.max_concurrency, 2)}
            if self.rejected_flags:
                d["launch"]["refused_flags"] = list(self.rejected_flags)
        return d
