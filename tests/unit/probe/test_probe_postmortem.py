"""probe meets diagnose (issue 11.9): the engine-crash wording and how a server log's verdict folds in."""

from __future__ import annotations

from pathlib import Path

from test_probe_verdict import gpu, make_run, rec

from oomguard.probe.classes import ProbeClass
from oomguard.probe.classify import classify_status, engine_crashed
from oomguard.probe.postmortem import diagnose_log, merge
from oomguard.probe.verdict import Limits, decide

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."


def test_engine_dead_messages_of_each_engine():
    assert engine_crashed(DEAD)
    assert engine_crashed("vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already.")
    assert not engine_crashed("CUDA out of memory") and not engine_crashed(None)
    failure = classify_status(500, {"error": {"message": DEAD, "type": "InternalServerError", "code": 500}})
    assert failure.cls is ProbeClass.SERVER_ERROR and "the engine crashed" in failure.detail
    assert failure.extra["engine_crashed"] is True


def test_dead_server_without_a_message_says_the_engine_crashed():
    v = decide(make_run(samples=[gpu(0, 10)], alive=False), Limits())
    assert v.cls is ProbeClass.UNKNOWN
    assert "engine crashed" in v.summary and "--server-log" in v.findings[0].fix
    assert any("engine crashed" in n for n in v.notes)


def test_engine_dead_500_while_the_api_server_still_answers():
    recs = [rec(0, False, "server-error", f"HTTP 500: the engine crashed ({DEAD})", 500)] + [rec(i) for i in range(1, 8)]
    v = decide(make_run(recs, samples=[gpu(0, 10)], alive=True), Limits())
    assert v.cls is ProbeClass.UNKNOWN and "engine crashed" in v.summary and "still answered" in v.summary


def test_log_class_replaces_an_unexplained_death():
    v = decide(make_run(samples=[gpu(0, 10)], alive=False), Limits())
    log = diagnose_log(str(LOGS / "v1-runtime-oom.log"))
    assert log["verdicts"][0]["class"] == "runtime-oom"
    merged = merge(v, log)
    assert merged.cls is ProbeClass.RUNTIME_OOM
    assert "server log says runtime-oom" in merged.summary and "died under load" in merged.summary
    assert merged.findings[0].evidence[0].startswith(str(LOGS / "v1-runtime-oom.log"))
    assert merged.findings[0].fix


def test_log_does_not_override_a_specific_probe_class():
    v = decide(make_run(samples=[gpu(0, 23.9)], alive=False), Limits())  # GPU full: runtime-oom already
    log = diagnose_log(str(LOGS / "v1-kv-too-small.log"))
    merged = merge(v, log)
    assert merged.cls is ProbeClass.RUNTIME_OOM
    assert any("server log says" in f.summary for f in merged.findings[1:])


def test_pass_stays_pass_with_a_note_when_the_log_shows_a_failure():
    v = decide(make_run(), Limits())
    merged = merge(v, diagnose_log(str(LOGS / "v1-runtime-oom.log")))
    assert merged.passed and any("the probe passed, but" in n for n in merged.notes)


def test_clean_log_adds_a_note_to_a_failure_only():
    log = diagnose_log(str(LOGS / "v1-clean-start.log"))
    assert log["verdicts"] == [] and "no failure" in log["summary"]
    v = merge(decide(make_run(samples=[gpu(0, 10)], alive=False), Limits()), log)
    assert v.cls is ProbeClass.UNKNOWN and any("--server-log" in n for n in v.notes)
