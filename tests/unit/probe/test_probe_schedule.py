"""Prompt building and the stage schedule with its bounds."""

from __future__ import annotations

import asyncio

import pytest
from probe_fakes import FakeVllm

from oomguard.probe.client import ProbeClient, normalize_base_url
from oomguard.probe.prompts import WORDS, PromptBuilder, make_builder
from oomguard.probe.schedule import StageKind, build_schedule, concurrency_steps, limit_steps


def test_exact_prompts_have_the_count_and_differ_from_the_first_block():
    b = PromptBuilder(exact=True, method="tokenize", pool=tuple(range(100, 400)))
    p1, p2 = b.build(1000, seed=1), b.build(1000, seed=2)
    assert len(p1) == 1000 and len(p2) == 1000
    assert p1[:16] != p2[:16]  # the first block differs, so no block is shared (hashes chain)
    assert b.build(1000, seed=1) == p1  # reproducible
    assert "exact" in b.describe()


def test_approximate_prompts_are_words_and_say_so():
    b = PromptBuilder(exact=False, method="approximate")
    text = b.build(50, seed=3)
    assert isinstance(text, str) and len(text.split()) == 49  # room for a BOS
    assert set(text.split()) <= set(WORDS)
    assert "approximate" in b.describe()
    with pytest.raises(ValueError):
        b.build(0, seed=1)


def _builder(fake: FakeVllm, tokenize_ok: bool):
    async def go():
        async with ProbeClient(normalize_base_url("http://h"), transport=fake.transport()) as c:
            return await make_builder(c, "tiny", tokenize_ok)

    return asyncio.run(go())


def test_make_builder_uses_tokenize_else_falls_back():
    fake = FakeVllm()
    b = _builder(fake, True)
    assert b.exact and b.pool
    assert fake.seen[-1].url.path == "/tokenize"
    assert not _builder(FakeVllm(tokenize=False), True).exact
    assert not _builder(FakeVllm(), False).exact


def test_concurrency_steps():
    assert concurrency_steps(1) == [1]
    assert concurrency_steps(8) == [1, 2, 4, 8]
    assert concurrency_steps(6) == [1, 2, 4, 6]
    it = limit_steps(8)
    assert [next(it) for _ in range(3)] == [12, 18, 27]
    it = limit_steps(1)
    assert next(it) == 2


def test_schedule_long_prompt_then_steps():
    stages, notes = build_schedule(max_model_len=8192, concurrency=8, output_tokens=64)
    assert [s.name for s in stages] == ["long-prompt", "concurrency-2", "concurrency-4", "concurrency-8"]
    assert stages[0].prompt_tokens == 8192 - 64 and stages[0].concurrency == 1
    assert all(s.prompt_tokens + s.max_tokens == 8192 for s in stages)
    assert notes == []


def test_schedule_shorter_concurrent_prompts_keep_step_one():
    stages, _ = build_schedule(max_model_len=8192, concurrency=2, output_tokens=64, prompt_tokens=2000)
    assert [(s.name, s.prompt_tokens) for s in stages] == [("long-prompt", 8128), ("concurrency-1", 2000), ("concurrency-2", 2000)]


def test_schedule_respects_max_requests():
    stages, notes = build_schedule(max_model_len=1024, concurrency=8, output_tokens=8, max_requests=5)
    assert sum(s.num_requests for s in stages) <= 5
    assert any("concurrency-8" in n for n in notes)


def test_find_limit_stays_within_max_requests():
    stages, notes = build_schedule(max_model_len=1024, concurrency=4, output_tokens=8, find_limit=True, max_requests=40)
    limit = [s for s in stages if s.kind is StageKind.FIND_LIMIT]
    assert [s.concurrency for s in limit] == [6, 9, 14]
    assert sum(s.num_requests for s in stages) <= 40
    assert any("--find-limit stops" in n for n in notes)


@pytest.mark.parametrize("kw", [dict(max_model_len=16, output_tokens=16, concurrency=1), dict(max_model_len=100, output_tokens=1, concurrency=0)])
def test_schedule_rejects_impossible(kw):
    with pytest.raises(ValueError):
        build_schedule(**kw)
