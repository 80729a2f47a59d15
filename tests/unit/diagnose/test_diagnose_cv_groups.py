"""Leave-one-batch-out cross-validation (scripts/train_diagnose.py): which records form a batch, and that a held-out
batch's threads never reach the fit."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _trainer():  # noqa: ANN202 - the module
    if "train_diagnose" in sys.modules:
        return sys.modules["train_diagnose"]
    spec = importlib.util.spec_from_file_location("train_diagnose", ROOT / "scripts" / "train_diagnose.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_diagnose"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_a_record_belongs_to_its_batch_and_the_older_files_to_their_own_groups():
    t = _trainer()
    assert t.group_of({"batch": "C03", "_file": "C03.jsonl"}) == "C03"
    assert t.group_of({"_file": "failures.jsonl"}) == "failures"
    assert t.group_of({"batch": 2, "_file": "failures_public.jsonl"}) == "failures_public#2"
    assert t.group_of({"batch": None, "_file": "failures_public.jsonl"}) == "failures_public"


def test_every_corpus_batch_is_a_fold():
    t = _trainer()
    groups = {t.group_of(r) for r in t.load_corpus()}
    batches = {p.stem for p in (ROOT / "tests" / "data" / "diagnose" / "failures").glob("*.jsonl")}
    assert batches <= groups
    assert "failures" in groups


def _sample(t, thread: str, group: str):  # noqa: ANN001, ANN202
    return t.Sample({"class": "host-oom"}, False, None, frozenset(), True, thread, group)  # type: ignore[arg-type]


def test_a_held_out_batch_keeps_its_threads_out_of_the_fit():
    t = _trainer()
    samples = [_sample(t, "a", "C01"), _sample(t, "b", "C01"), _sample(t, "a", "B02"), _sample(t, "c", "B02")]
    held, rest = t.held_and_rest(samples, {"C01"}, "batch")
    assert [s.thread for s in held] == ["a", "b"]
    # thread "a" of batch B02 is the same thread as one held out: not in the fit either
    assert [s.thread for s in rest] == ["c"]
    held, rest = t.held_and_rest(samples, {"a"}, "thread")
    assert {s.group for s in held} == {"C01", "B02"} and [s.thread for s in rest] == ["b", "c"]
