"""The fix ranker (diagnose/fixes_rank.py): which candidate fix goes first, and why it says so.

Pure functions on built verdicts, the shipped data file's own record of why it ships, and one real CLI run."""

from __future__ import annotations

import json
from pathlib import Path

from oomguard.diagnose import fixes_rank
from oomguard.diagnose.classes import FailureClass as FC
from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Fix, Verdict
from oomguard.diagnose.facts import Collector
from tests.conftest import run_cli


def _verdict(flags: list[str], confidence: float = 0.5) -> Verdict:
    v = Verdict(cls=FC.RUNTIME_OOM, confidence=confidence, summary="")
    v.fix = [Fix(f, 1, "x") for f in flags]
    return v


def test_the_shipped_ranker_beat_the_hand_order_under_leave_one_batch_out():
    data = json.loads(fixes_rank.RANKER_FILE.read_text(encoding="utf-8"))
    lobo = data["meta"]["lobo_with_context"]
    assert lobo["first_fix"][1] > lobo["first_fix"][0]  # [hand order, ranker]
    assert lobo["first_two"][1] >= lobo["first_two"][0]
    assert set(data["weights"]) == set(fixes_rank.FEATURES)


def test_a_suggested_flag_can_move_first_and_says_why():
    ranker = fixes_rank.Ranker({"place:1st": 0.5, "report-suggests": 1.0})
    col = Collector()
    col.cues["suggest:max-num-seqs"] = None  # type: ignore[assignment] - only the key is read
    v = _verdict(["--gpu-memory-utilization", "--max-num-seqs", "--max-num-batched-tokens"])
    out = fixes_rank.rank_first(v, col, Context(), {}, ranker)
    assert [f.flag for f in out] == ["--max-num-seqs", "--gpu-memory-utilization", "--max-num-batched-tokens"]
    assert "first by the fix ranker" in out[0].chosen and "the report suggests it" in out[0].chosen
    assert "put --max-num-seqs first" in out[1].chosen


def test_the_hand_order_stands_without_a_reason_to_move():
    ranker = fixes_rank.Ranker({"place:1st": 0.5, "report-suggests": 1.0})
    v = _verdict(["--gpu-memory-utilization", "--max-num-seqs"])
    out = fixes_rank.rank_first(v, Collector(), Context(), {}, ranker)
    assert [f.flag for f in out] == ["--gpu-memory-utilization", "--max-num-seqs"] and out[0].chosen is None


def test_a_diagnostic_step_gives_way_to_a_flag():
    ranker = fixes_rank.load()
    assert ranker is not None and ranker.weights["diagnostic"] < 0
    rows = fixes_rank.candidate_rows(_verdict(["NCCL_DEBUG", "--disable-custom-all-reduce"]), Collector(), Context(), {})
    assert rows[0]["diagnostic"] == 1.0 and rows[1]["diagnostic"] == 0.0


def test_hand_order_switches_the_ranker_off_inside_only():
    assert fixes_rank.shipped() is not None
    with fixes_rank.hand_order():
        assert fixes_rank.shipped() is None
    assert fixes_rank.shipped() is not None


def test_the_cli_explains_the_fix_order(tmp_path: Path):
    log = tmp_path / "report.txt"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
                   "of 79.15 GiB of which 1.10 GiB is free.\nIt happens under load while serving; lowering "
                   "--max-num-seqs fixed it for me.\n", encoding="utf-8")
    out = run_cli("diagnose", str(log), "--format", "json", timeout=120)
    assert out.returncode == 1, out.stderr
    fixes = json.loads(out.stdout)["verdicts"][0]["fix"]
    assert all(f.get("chosen") for f in fixes)  # every fix says why it is where it is
    assert "--max-num-seqs" in [f["flag"] for f in fixes[:2]]


def test_the_cue_lift_counts_a_cue_only_where_enough_records_carried_it():
    table = fixes_rank.cue_table([(frozenset({"req:multimodal"}), frozenset({"--limit-mm-per-prompt"}))] * 3
                                 + [(frozenset({"fail:words"}), frozenset({"--max-num-seqs"}))] * 5
                                 + [(frozenset({"req:lora"}), frozenset({"--max-lora-rank"}))] * 2
                                 + [(frozenset({"mention:gpu", "req:multimodal"}), frozenset({"--max-num-seqs"}))])
    # 4 of the 11 records carry req:multimodal, 3 of them fixed with --limit-mm-per-prompt (3 of 11 overall): a lift
    assert table.lift({"req:multimodal"}, "--limit-mm-per-prompt", 3) > 0.5
    assert table.lift({"req:multimodal"}, "--max-lora-rank", 2) == 0.0  # never fixed so with the cue: no lift
    assert table.lift({"req:lora"}, "--max-lora-rank", 2) == 0.0  # two records carry it: too few to say anything
    assert "mention:gpu" not in table.cue_records  # the words naming a GPU say nothing about the fix


def test_a_suggestion_in_the_reporters_words_is_told_from_vllms_own_message(tmp_path: Path):
    from oomguard.diagnose.diagnosis import diagnose

    log = tmp_path / "report.txt"
    log.write_text("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                   "initializing the engine.\nThe server hung with tp=2 until I tried --disable-custom-all-reduce, then "
                   "it started.\n", encoding="utf-8")
    col = diagnose([str(log)]).collector
    assert {"--gpu-memory-utilization", "--disable-custom-all-reduce"} <= fixes_rank.suggested_flags(col)
    # vLLM prints its "Try increasing" with every such error; the reporter's words are this thread's
    assert fixes_rank.suggested_in_words(col) == {"--disable-custom-all-reduce"}
    rows = fixes_rank.candidate_rows(_verdict(["--gpu-memory-utilization", "--disable-custom-all-reduce"]), col,
                                     Context(), {})
    assert [r["words-suggest"] for r in rows] == [0.0, 1.0] and [r["report-suggests"] for r in rows] == [1.0, 1.0]
