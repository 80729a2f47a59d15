"""The sampling loop: every sampler, at a fixed interval, beside the load.

A sampler still busy from the previous tick (a hung ``nvidia-smi``) is skipped
rather than queued, so a slow source can neither pile up threads nor delay
the others. The loop also records the load generator's own count of requests
in flight, which puts the client's view on the same time axis as memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from oomguard.probe.classes import Source
from oomguard.probe.samplers import MemorySampler, Sample


@dataclass
class SamplerStatus:
    name: str
    source: str
    note: str
    active: bool
    samples: int = 0
    errors: int = 0
    skipped_busy: int = 0
    last_error: str | None = None

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class SamplingLoop:
    samplers: list[MemorySampler]
    interval_s: float
    clock_zero: float
    in_flight: Callable[[], int] = lambda: 0
    samples: list[Sample] = field(default_factory=list)
    status: dict[str, SamplerStatus] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stop = asyncio.Event()
        self._pending: dict[str, asyncio.Task] = {}
        self._collected: set[int] = set()
        for s in self.samplers:
            self.status.setdefault(s.name, SamplerStatus(s.name, s.source.value, "", True))

    def now(self) -> float:
        return time.perf_counter() - self.clock_zero

    async def tick(self, settle_s: float = 0.0) -> None:
        """One reading from every sampler.

        ``settle_s > 0`` is a reading a decision waits for (find-limit's "after the stage"): a sampler still busy
        from an earlier tick is waited for, and this tick's readings are waited for, up to ``settle_s`` each, so
        the decision does not depend on how loaded the machine running the probe is.
        """
        if settle_s > 0:
            busy = [p for p in self._pending.values() if not p.done()]
            if busy:
                await asyncio.wait(busy, timeout=settle_s)
        t = self.now()
        self.samples.append(Sample(t, Source.CLIENT, "load", {"in_flight": float(self.in_flight())}))
        started = []
        for s in self.samplers:
            prev = self._pending.get(s.name)
            if prev is not None and not prev.done():
                self.status[s.name].skipped_busy += 1
                continue
            if prev is not None and id(prev) not in self._collected:
                self._collect(s, prev)  # finished after its tick's wait: keep its reading
            task = asyncio.ensure_future(s.sample(t))
            self._pending[s.name] = task
            started.append((s, task))
        if not started:
            return
        # Wait at most one interval; a slower sampler finishes (or not) in the background.
        await asyncio.wait([t for _, t in started], timeout=max(self.interval_s, 0.05, settle_s))
        for s, task in started:
            if task.done():
                self._collect(s, task)

    def _collect(self, sampler: MemorySampler, task: asyncio.Task) -> None:
        st = self.status[sampler.name]
        self._collected.add(id(task))
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            st.errors += 1
            st.last_error = f"{type(exc).__name__}: {exc}"[:200]
            return
        got = task.result()
        st.samples += len(got)
        self.samples.extend(got)

    async def run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            await self.tick()
            left = self.interval_s - (time.perf_counter() - start)
            if left > 0:
                try:
                    await asyncio.wait_for(self._stop.wait(), timeout=left)
                except asyncio.TimeoutError:
                    pass

    def start(self) -> None:
        self._task = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        """Stop ticking, take one last reading (the state after the load), close samplers."""
        self._stop.set()
        task = getattr(self, "_task", None)
        if task is not None:
            try:
                await asyncio.wait_for(task, timeout=self.interval_s * 2 + 5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        await self.tick()
        for name, task in self._pending.items():
            if not task.done():
                task.cancel()
                self.status[name].errors += 1
                self.status[name].last_error = "still busy at the end of the run"
        for s in self.samplers:
            try:
                await asyncio.wait_for(s.close(), timeout=5)
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
