"""Bounded timelines keep peaks exactly; the step detector tells a staircase from a ramp."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from oomguard.watch.steps import Pattern, detect_steps
from oomguard.watch.timeline import Timeline

GiB = 1 << 30


def test_timeline_is_bounded_and_keeps_the_exact_peak():
    tl = Timeline(capacity=64, recent=10)
    rng = random.Random(7)
    values = [rng.random() for _ in range(10_000)]
    values[6543] = 5.0
    for i, v in enumerate(values):
        tl.add(float(i), v)
    assert len(tl.points) <= 64
    assert tl.peak.value == 5.0 and tl.peak.t == 6543.0
    assert tl.low.value == min(values)
    assert tl.recent() == values[-10:]
    ts = [t for t, _ in tl.points]
    assert ts == sorted(ts) and ts[0] < 512 and ts[-1] >= 9000  # covers the whole run
    assert 5.0 in [v for _, v in tl.points]  # merging keeps the larger value


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=600))
def test_timeline_peak_matches_max(values):
    tl = Timeline(capacity=8)
    for i, v in enumerate(values):
        tl.add(i * 0.5, v)
    assert tl.peak.value == max(values)
    assert len(tl.points) <= 8
    assert max(v for _, v in tl.points) == max(values)


def staircase(levels, plateau=10, noise=0.0, seed=0):
    rng = random.Random(seed)
    pts, t = [], 0.0
    for level in levels:
        for _ in range(plateau):
            pts.append((t, level + rng.uniform(-noise, noise)))
            t += 1.0
    return pts


def test_s2_staircase_is_steps():
    # 24 GiB RTX 3090s: 17.5 GiB after start-up, then jumps as longer prefills arrive
    levels = [17.5 * GiB, 18.6 * GiB, 20.1 * GiB, 22.9 * GiB]
    pat = detect_steps(staircase(levels, plateau=30, noise=8 << 20), tolerance=128 << 20)
    assert pat.pattern is Pattern.STEPS
    assert len(pat.steps) == 3
    assert [s.t for s in pat.steps] == [30.0, 60.0, 90.0]
    assert abs(pat.steps[-1].after - 22.9 * GiB) < (16 << 20)


def test_ramp_flat_single_step_varying_and_short():
    ramp = [(float(i), i * (50 << 20)) for i in range(100)]
    assert detect_steps(ramp, tolerance=128 << 20).pattern is Pattern.RAMP
    flat = staircase([20 * GiB], plateau=50, noise=10 << 20)
    assert detect_steps(flat, tolerance=128 << 20).pattern is Pattern.FLAT
    one = staircase([10 * GiB, 12 * GiB], plateau=20)
    assert detect_steps(one, tolerance=128 << 20).pattern is Pattern.SINGLE_STEP
    kv = staircase([0.1, 0.6, 0.2, 0.8, 0.3], plateau=5)
    assert detect_steps(kv, tolerance=0.02).pattern is Pattern.VARYING
    falling = [(float(i), 1.0 - i * 0.05) for i in range(20)]
    assert detect_steps(falling, tolerance=0.02).pattern is Pattern.FALLING
    assert detect_steps([(0.0, 1.0), (1.0, 2.0)], tolerance=0.1).pattern is Pattern.TOO_SHORT


@settings(max_examples=60, deadline=None)
@given(
    jumps=st.lists(st.floats(min_value=0.5, max_value=4.0), min_size=2, max_size=6),
    plateau=st.integers(min_value=3, max_value=25),
    seed=st.integers(0, 1000),
)
def test_any_clean_staircase_is_found(jumps, plateau, seed):
    levels = [10.0]
    for j in jumps:
        levels.append(levels[-1] + j)
    pat = detect_steps(staircase(levels, plateau=plateau, noise=0.02, seed=seed), tolerance=0.1)
    assert pat.pattern is Pattern.STEPS
    assert len(pat.steps) == len(jumps)
