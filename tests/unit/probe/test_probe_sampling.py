"""The sampling loop's settled tick: a reading a decision waits for does not depend on the machine's load."""

from __future__ import annotations

import asyncio
import time

from oomguard.probe.classes import Source
from oomguard.probe.samplers import Sample
from oomguard.probe.sampling import SamplingLoop


class SlowMetrics:
    """A metrics source slower than the loop's interval (a scrape on a loaded machine): a real MemorySampler."""

    source = Source.METRICS
    name = "metrics"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0

    async def sample(self, t: float) -> list[Sample]:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return [Sample(t, Source.METRICS, "engine", {"preemptions_total": float(self.calls)})]

    async def close(self) -> None:
        return None


def _readings(loop: SamplingLoop) -> list[Sample]:
    return [s for s in loop.samples if s.source is Source.METRICS]


def test_a_plain_tick_leaves_a_slow_reading_for_later():
    async def go():
        loop = SamplingLoop([SlowMetrics(0.3)], 0.05, time.perf_counter())
        await loop.tick()
        return loop
    assert _readings(asyncio.run(go())) == []


def test_a_settled_tick_waits_for_the_busy_reading_and_its_own():
    async def go():
        sampler = SlowMetrics(0.2)
        loop = SamplingLoop([sampler], 0.05, time.perf_counter())
        await loop.tick()  # still busy when the stage ends
        await loop.tick(settle_s=5.0)
        return loop, sampler
    loop, sampler = asyncio.run(go())
    values = [s.values["preemptions_total"] for s in _readings(loop)]
    assert values == [1.0, 2.0]  # the earlier reading kept, and one taken after the stage
    assert sampler.calls == 2 and loop.status["metrics"].skipped_busy == 0
