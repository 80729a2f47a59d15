"""Evidence scoring (issue 16): cues through the prefilter, shipped weights fitted from the current priors,
the same verdict with and without the prefilter on every corpus record, fragments and paraphrases classed at
a capped confidence, a running server is healthy, --explain shows the scored cues, and fixes are checked by
the planner on a real V1 log (issue 17 item 6)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from oomguard.diagnose import prefilter, readers, scoring
from oomguard.diagnose.diagnosis import diagnose, diagnose_paths
from oomguard.diagnose.parsers.cues import TABLE

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests" / "fixtures" / "logs"


def _write(tmp_path: Path, text: str, name: str = "report.txt") -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def _corpus() -> list[dict]:
    files = [ROOT / "tests/data/calibration/failures.jsonl", ROOT / "tests/data/calibration/failures_public.jsonl"]
    files += sorted((ROOT / "tests/data/diagnose/failures").glob("*.jsonl"))
    out = []
    for f in files:
        out += [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    return out


@pytest.mark.parametrize("rule", TABLE, ids=lambda r: r.feature)
def test_every_cue_example_matches_and_passes_the_prefilter(rule):
    assert rule.pattern.search(rule.example), rule.feature
    matcher, _ = prefilter.compiled()
    line = rule.example + "\n"
    assert matcher.search(line.encode()), f"{rule.feature}: its example line would not reach the parsers"
    assert any(k.decode() in line for k in rule.keywords), f"{rule.feature}: no keyword in its example"


def test_shipped_weights_were_fitted_from_the_current_priors():
    weights = json.loads(scoring.WEIGHTS_FILE.read_text(encoding="utf-8"))
    priors = json.loads(scoring.PRIORS_FILE.read_text(encoding="utf-8"))
    digest = hashlib.sha256(scoring.PRIORS_FILE.read_bytes()).hexdigest()[:16]
    assert weights["meta"]["priors_sha256_16"] == digest, "priors changed: run scripts/train_diagnose.py"
    assert set(priors["features"]) <= set(weights["features"])
    assert weights["classes"] == priors["classes"]
    assert 0.2 <= weights["temperature"] <= 3.0


def test_every_feature_the_extractor_names_has_a_prior():
    """A new cue kind needs its prior (the trainer would fit it from 0): the extractor's literal names are listed."""
    source = (ROOT / "src/oomguard/diagnose/features.py").read_text(encoding="utf-8")
    priors = json.loads(scoring.PRIORS_FILE.read_text(encoding="utf-8"))["features"]
    literal = set(re.findall(r'"((?:kill|sigkill|engine|exc|ima|nccl|exit|oom|paste|ctx|size):[\w+-]+)"', source))
    literal |= {r.feature for r in TABLE} | {"comp:kernel"}
    assert literal - set(priors) == set()


def _verdict_key(d) -> list:  # noqa: ANN001
    # Class and phase of every verdict. Not the fixes' values: V0 is recognised from the prefix of any line
    # ("INFO 10-14 12:32:48 file.py:124] ..." without brackets), and a V0 line no keyword selects may change
    # a fix (chunked prefill) without changing the verdict.
    return [(v.cls.value, v.phase.label) for v in d.verdicts]


def test_the_prefilter_never_changes_a_verdict(tmp_path, monkeypatch):
    """Every corpus record: the verdicts with the keyword prefilter are those of parsing every line."""
    records = _corpus()
    fast = {}
    for r in records:
        fast[r["id"]] = _verdict_key(diagnose([_write(tmp_path, r.get("log_excerpt") or "", "a.log")]))
    every_line = re.compile(rb"[^\n]")  # every non-empty line is a hit: the parsers see all of them
    monkeypatch.setattr(readers, "compiled", lambda: (every_line, "every-line"))
    diffs = []
    for r in records:
        slow = _verdict_key(diagnose([_write(tmp_path, r.get("log_excerpt") or "", "a.log")]))
        if slow != fast[r["id"]]:
            diffs.append((r["id"], fast[r["id"]][:1], slow[:1]))
    assert diffs == []


@pytest.mark.parametrize("text,cls", [
    ("KV cache is needed, which is larger than the available KV cache memory", "kv-too-small"),
    ("显存不足，推理时崩溃", "runtime-oom"),
    ("kv cache不足，启动失败", "kv-too-small"),
    ("the pod got OOMKilled while loading the weights", "host-oom"),
])
def test_fragments_and_paraphrases_get_their_class(tmp_path, text, cls):
    d = diagnose([_write(tmp_path, text + "\n")])
    assert d.verdicts, f"no verdict for {text!r}"
    assert d.verdicts[0].cls.value == cls, [(v.cls.value, v.confidence, v.cues[:3]) for v in d.verdicts]


def test_a_words_only_report_is_capped(tmp_path):
    d = diagnose([_write(tmp_path, "显存不足，推理时崩溃\n")])
    assert d.verdicts[0].confidence <= 0.5 and d.verdicts[0].tier == "paraphrase"


def test_a_bare_oom_says_what_would_settle_its_phase(tmp_path):
    d = diagnose([_write(tmp_path, "torch.OutOfMemoryError: CUDA out of memory.\n")])
    v = d.verdicts[0]
    assert v.cls.value in ("weights-oom", "profile-oom", "cudagraph-oom", "runtime-oom")
    assert v.settle and "would settle" in v.settle
    assert "would settle" in v.summary


def test_ray_memory_monitor_is_host_memory(tmp_path):
    text = ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
            "Memory on the node (IP: 10.0.0.2) where the task was running was 60.12GB / 62.78GB (0.957); "
            "Ray killed this worker because memory usage exceeded the threshold.\n")
    assert diagnose([_write(tmp_path, text)]).verdicts[0].cls.value == "host-oom"


def test_cues_carry_their_lines_and_weights(tmp_path):
    d = diagnose([str(LOGS / "v1-cudagraph-oom.log")])
    cues = d.to_dict()["verdicts"][0]["cues"]
    assert cues and all({"feature", "weight", "why"} <= set(c) for c in cues)
    located = [c for c in cues if "file" in c]
    assert located and all(c["line"] > 0 for c in located)
    assert any(c["feature"].startswith(("frame:", "phase:")) and c["weight"] > 0 for c in cues)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oomguard.cli.main", *args], capture_output=True, text=True, timeout=120)


def test_explain_prints_the_scored_cues():
    r = _cli("diagnose", "--explain", str(LOGS / "v1-kv-too-small.log"))
    assert r.returncode == 1, r.stderr
    assert re.search(r"why: \+\d+\.\d\d\s+sig:kv-too-small\s+\S+v1-kv-too-small\.log:\d+", r.stdout), r.stdout


def test_a_serving_access_log_is_running_exit_0(tmp_path):
    path = _write(tmp_path, "".join(f'INFO:     127.0.0.1:5{i:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
                                    for i in range(5)), "access.log")
    r = _cli("diagnose", path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Running" in r.stdout and "no failure in this text" in r.stdout
    assert json.loads(_cli("diagnose", "--format", "json", path).stdout)["status"] == "running"


def test_a_start_that_stops_before_ready_is_still_incomplete(tmp_path):
    text = ("INFO 06-23 14:21:40 [__init__.py:244] Automatically detected platform cuda.\n"
            "(APIServer pid=1) INFO 06-23 14:21:42 [api_server.py:1395] vLLM API server version 0.11.0\n"
            "(EngineCore_DP0 pid=12) INFO 06-23 14:21:48 [gpu_model_runner.py:1770] Starting to load model Qwen/Qwen3-8B...\n")
    assert _cli("diagnose", _write(tmp_path, text, "start.log")).returncode == 3


def test_fixes_are_checked_by_the_planner_on_a_real_v1_log():
    """The V1 engine-config line says dtype=torch.bfloat16; the planner must still run (issue 17 item 6)."""
    log = LOGS / "v1-cudagraph-oom.log"
    assert "dtype=torch.bfloat16" in log.read_text(encoding="utf-8")
    d = diagnose_paths([str(log)], model="Qwen/Qwen3-32B", gpu="H100")
    checked = [f for v in d.verdicts for f in v.fix if f.flag.startswith("--")]
    assert checked and all(f.checked and not f.checked.startswith("not checked") for f in checked
                           if isinstance(f.value, (bool, int, float))), [(f.flag, f.checked) for f in checked]
    assert any(f.effect for f in checked)


def test_a_planner_that_cannot_run_says_why_on_the_fix(tmp_path):
    d = diagnose_paths([str(LOGS / "v1-cudagraph-oom.log")], model=str(tmp_path / "no-such-model"), gpu="H100")
    reasons = {f.checked for v in d.verdicts for f in v.fix if f.flag.startswith("--") and f.checked}
    assert reasons and all(r.startswith("not checked: ") and "no-such-model" in r for r in reasons), reasons
