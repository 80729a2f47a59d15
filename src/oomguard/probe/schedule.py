"""Stage 2's plan: which requests, how long, how many at once, within which bounds.

The operators' loop from S2: one request at max-model-len (minus the output
budget), then concurrency steps up to the claimed concurrency with long
prompts. ``--find-limit`` keeps stepping past the claim until something
fails. The schedule is pure data; the runner enforces the time bound, and the
request bound is applied here so a schedule never asks for more than
``--max-requests``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from oomguard.textenum import TextEnum


class StageKind(TextEnum):
    LONG_PROMPT = "long-prompt"
    CONCURRENCY = "concurrency"
    FIND_LIMIT = "find-limit"


@dataclass(frozen=True)
class Stage:
    name: str
    kind: StageKind
    prompt_tokens: int
    max_tokens: int
    concurrency: int
    num_requests: int

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "prompt_tokens": self.prompt_tokens,
            "max_tokens": self.max_tokens,
            "concurrency": self.concurrency,
            "num_requests": self.num_requests,
        }


@dataclass(frozen=True)
class Bounds:
    """Hard limits on the whole run. Every wait is bounded by one of these."""

    duration_s: float = 600.0
    max_requests: int = 200
    request_timeout_s: float = 600.0
    sample_interval_s: float = 1.0


def concurrency_steps(claimed: int) -> list[int]:
    """1, 2, 4, ... below the claim, then the claim itself."""
    steps, c = [], 1
    while c < claimed:
        steps.append(c)
        c *= 2
    steps.append(claimed)
    return steps


def limit_steps(claimed: int) -> Iterator[int]:
    """Past the claim, grow by half each step (at least one more)."""
    c = claimed
    while True:
        c = max(c + 1, (c * 3 + 1) // 2)
        yield c


def build_schedule(
    *,
    max_model_len: int,
    concurrency: int,
    output_tokens: int,
    prompt_tokens: int | None = None,
    waves: int = 1,
    max_requests: int = 200,
    find_limit: bool = False,
) -> tuple[list[Stage], list[str]]:
    """The stages to run and notes on what the request bound cut off."""
    if max_model_len <= output_tokens:
        raise ValueError(f"max-model-len {max_model_len} leaves no room for {output_tokens} output tokens")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    long_len = max_model_len - output_tokens
    conc_len = min(prompt_tokens or long_len, long_len)
    stages = [Stage("long-prompt", StageKind.LONG_PROMPT, long_len, output_tokens, 1, 1)]
    for c in concurrency_steps(concurrency):
        if c == 1 and conc_len == long_len and waves == 1:
            continue  # the long-prompt stage already is this step
        stages.append(Stage(f"concurrency-{c}", StageKind.CONCURRENCY, conc_len, output_tokens, c, c * waves))
    if find_limit:
        for c in limit_steps(concurrency):
            if sum(s.num_requests for s in stages) + c * waves > max_requests:
                break
            stages.append(Stage(f"limit-{c}", StageKind.FIND_LIMIT, conc_len, output_tokens, c, c * waves))
    notes: list[str] = []
    kept: list[Stage] = []
    used = 0
    for s in stages:
        if used + s.num_requests > max_requests:
            notes.append(f"stage {s.name} ({s.num_requests} requests) skipped: --max-requests {max_requests}")
            continue
        kept.append(s)
        used += s.num_requests
    if find_limit and kept and kept[-1].kind is StageKind.FIND_LIMIT:
        notes.append(f"--find-limit stops at concurrency {kept[-1].concurrency}: --max-requests {max_requests}")
    return kept, notes
