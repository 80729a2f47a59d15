"""What diagnose says must not contradict itself or end mid-sentence (found on fresh public batches C04-C06)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomguard.diagnose.diagnosis import diagnose

ROOT = Path(__file__).resolve().parents[3]
UNRECOGNISED = "no vLLM, kernel or nvidia-smi content recognised"


@pytest.mark.parametrize("line", [
    '172.17.0.1:45678 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    'INFO 08-01 10:00:00 logger.py:39] Received request chatcmpl-1: prompt: "hi", params: SamplingParams(n=1)',
])
def test_a_server_seen_answering_is_not_also_unrecognised(tmp_path, line):
    log = tmp_path / "access.log"
    log.write_text(line + "\n", encoding="utf-8")
    d = diagnose([str(log)])
    assert d.status == "running"
    assert not any(UNRECOGNISED in n for r in d.inputs for n in r.notes)


def test_text_with_nothing_recognisable_still_says_so(tmp_path):
    log = tmp_path / "notes.txt"
    log.write_text("we moved the office plants to the second floor\n", encoding="utf-8")
    d = diagnose([str(log)])
    assert any(UNRECOGNISED in n for r in d.inputs for n in r.notes)


def _records(batch: str):
    path = ROOT / "tests" / "data" / "diagnose" / "failures" / f"{batch}.jsonl"
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_no_summary_ends_on_a_colon(tmp_path):
    # Config-error verdicts read from words or frames (no error line to quote) printed
    # "vLLM rejected the configuration: " with nothing after it.
    bad = []
    for batch in ("C04", "C05", "C06"):
        for rec in _records(batch):
            log = tmp_path / f"{rec['id']}.log"
            log.write_text(rec["log_excerpt"], encoding="utf-8")
            for v in diagnose([str(log)]).verdicts:
                if v.summary.rstrip().endswith(":"):
                    bad.append((rec["id"], v.summary))
    assert bad == []


def test_a_named_setting_without_a_value_reads_as_a_change_and_paste_cues_name_no_line_zero(tmp_path):
    from tests.conftest import run_cli

    (rec,) = [r for r in _records("C06") if r["id"] == "C06-6"]  # a RayTaskError cut before its ValueError
    log = tmp_path / "report.log"
    log.write_text(rec["log_excerpt"], encoding="utf-8")
    out = run_cli("diagnose", str(log)).stdout
    assert "change --data-parallel-size (to a value the message allows)" in out
    assert "'<a value" not in out and f"{log}:0 " not in out
