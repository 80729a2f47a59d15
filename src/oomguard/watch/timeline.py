"""A bounded time series that keeps its peak exactly and its shape approximately.

``watch`` may run for days at one sample a second. Each series keeps at most
``capacity`` points: when full, neighbouring pairs are merged into the larger
of the two and later points are merged in groups of the same width, so the
timeline keeps covering the whole run at a coarser step. Taking the larger
value (not the mean) keeps steps and spikes visible, which is what the step
detector and the peaks need. The most recent points are also kept at full
resolution for the sparklines.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    value: float
    t: float


class Timeline:
    def __init__(self, capacity: int = 2048, recent: int = 60):
        if capacity < 4:
            raise ValueError("capacity must be at least 4")
        self.capacity = capacity
        self._points: list[tuple[float, float]] = []
        self._recent: deque[float] = deque(maxlen=recent)
        self._stride = 1
        self._pending: tuple[float, float] | None = None
        self._pending_n = 0
        self.count = 0
        self.peak: Peak | None = None
        self.low: Peak | None = None
        self.first: tuple[float, float] | None = None
        self.last: tuple[float, float] | None = None

    def add(self, t: float, value: float) -> None:
        self.count += 1
        self._recent.append(value)
        if self.first is None:
            self.first = (t, value)
        self.last = (t, value)
        if self.peak is None or value > self.peak.value:
            self.peak = Peak(value, t)
        if self.low is None or value < self.low.value:
            self.low = Peak(value, t)
        if self._pending is None or value > self._pending[1]:
            self._pending = (t, value)
        self._pending_n += 1
        if self._pending_n >= self._stride:
            self._points.append(self._pending)
            self._pending, self._pending_n = None, 0
            if len(self._points) >= self.capacity:
                self._halve()

    def _halve(self) -> None:
        pts = self._points
        self._points = [max(pts[i : i + 2], key=lambda p: p[1]) for i in range(0, len(pts), 2)]
        self._stride *= 2

    @property
    def points(self) -> list[tuple[float, float]]:
        """All kept points in time order (a partly filled merge group included)."""
        return self._points + ([self._pending] if self._pending is not None else [])

    def recent(self) -> list[float]:
        return list(self._recent)

    @property
    def latest(self) -> float | None:
        return self.last[1] if self.last else None
