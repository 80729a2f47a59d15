"""Is memory climbing in steps? (Scenario S2: "nvidia-smi showed memory climbing in steps".)

PyTorch's caching allocator never gives memory back to the driver: each new
largest prefill (a longer prompt, a few more concurrent requests) grows the
reserved pool once, and it stays. Seen from ``nvidia-smi`` that is a staircase:
long flat plateaus joined by jumps, each jump closer to the card's limit.
A smooth ramp (a leak, host-side growth) or a flat line mean something else.

The detector splits the series into plateaus (runs of points within
``tolerance`` of the run's level), ignores one-point transients, and calls
the pattern ``steps`` when at least two upward jumps between plateaus explain
most of the rise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oomguard.textenum import TextEnum


class Pattern(TextEnum):
    TOO_SHORT = "too-short"
    FLAT = "flat"
    STEPS = "steps"  # two or more upward jumps between plateaus
    SINGLE_STEP = "single-step"
    RAMP = "ramp"  # climbing without plateaus
    FALLING = "falling"
    VARYING = "varying"  # up and down (KV usage under changing load)


@dataclass(frozen=True)
class Step:
    t: float  # when the new plateau started
    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before


@dataclass
class StepPattern:
    pattern: Pattern
    steps: list[Step] = field(default_factory=list)
    start: float | None = None
    end: float | None = None
    low: float | None = None
    high: float | None = None
    plateaus: int = 0

    @property
    def rise(self) -> float:
        if self.start is None or self.end is None:
            return 0.0
        return self.end - self.start

    def to_json(self, scale: float = 1.0) -> dict:
        def v(x: float | None) -> float | None:
            return None if x is None else round(x / scale, 4)

        return {
            "pattern": self.pattern.value,
            "start": v(self.start),
            "end": v(self.end),
            "low": v(self.low),
            "high": v(self.high),
            "plateaus": self.plateaus,
            "steps": [{"t": round(s.t, 3), "before": v(s.before), "after": v(s.after)} for s in self.steps],
        }


def _plateaus(points: list[tuple[float, float]], tol: float) -> list[tuple[float, float, int, bool]]:
    """(start time, level, number of points, level?) for each run within ``tol`` of its level.

    A run that climbs from its first half to its second (a slice of a ramp whose
    running mean kept up with it) is marked as not level.
    """
    runs: list[tuple[float, float, int, bool]] = []
    start = 0
    total = points[0][1]
    for i in range(1, len(points) + 1):
        if i < len(points):
            n = i - start
            if abs(points[i][1] - total / n) <= tol:
                total += points[i][1]
                continue
        seg = [v for _, v in points[start:i]]
        half = len(seg) // 2
        level = not half or abs(sum(seg[-half:]) / half - sum(seg[:half]) / half) <= tol / 2
        runs.append((points[start][0], total / len(seg), len(seg), level))
        if i < len(points):
            start, total = i, points[i][1]
    return runs


def detect_steps(points: list[tuple[float, float]], *, tolerance: float, min_plateau: int = 2) -> StepPattern:
    """Classify the shape of ``points`` (time, value); ``tolerance`` is the noise level."""
    if len(points) < 4:
        return StepPattern(Pattern.TOO_SHORT)
    values = [v for _, v in points]
    low, high = min(values), max(values)
    start, end = values[0], values[-1]
    base = StepPattern(Pattern.FLAT, start=start, end=end, low=low, high=high)
    if high - low <= tolerance:
        base.plateaus = 1
        return base
    runs = _plateaus(points, tolerance)
    kept = [r for r in runs if r[2] >= min_plateau and r[3]]
    base.plateaus = len(kept)
    steps = [Step(b[0], a[1], b[1]) for a, b in zip(kept, kept[1:], strict=False) if b[1] - a[1] > tolerance]
    drops = [1 for a, b in zip(kept, kept[1:], strict=False) if a[1] - b[1] > tolerance]
    in_plateaus = sum(r[2] for r in kept) / len(points)
    rise = end - start
    climbed = sum(s.delta for s in steps)
    if steps and not drops and in_plateaus >= 0.6 and climbed >= 0.6 * max(rise, tolerance):
        base.pattern = Pattern.STEPS if len(steps) >= 2 else Pattern.SINGLE_STEP
        base.steps = steps
        return base
    if drops and steps:
        base.pattern = Pattern.VARYING
    elif rise > tolerance:
        base.pattern = Pattern.RAMP
    elif rise < -tolerance:
        base.pattern = Pattern.FALLING
    else:
        base.pattern = Pattern.VARYING
    base.steps = steps
    return base
