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
from oomguard.diagnose.parsers.cues import TABLE, UNSCORED_PREFIXES
from oomguard.diagnose import scoring as _scoring

# The paraphrase tier's cap is fitted on leave-one-batch-out verdicts (scripts/train_diagnose.py fit_cap), not 0.5.
_CAP = _scoring.load().paraphrase_cap

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
    line = rule.example + "\n"
    data = line.encode()
    assert prefilter.engine().lines(data, 0, len(data)), f"{rule.feature}: its example line would not reach the parsers"
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
    source = "".join((ROOT / "src/oomguard/diagnose" / name).read_text(encoding="utf-8")
                     for name in ("features.py", "phase_facts.py"))
    priors = json.loads(scoring.PRIORS_FILE.read_text(encoding="utf-8"))["features"]
    literal = set(re.findall(r'"((?:kill|sigkill|engine|exc|ima|nccl|exit|oom|paste|ctx|size):[\w+-]+)"', source))
    # the suggest: and mention: cues are read by the fixes and the context, never scored
    literal |= {r.feature for r in TABLE if not r.feature.startswith(UNSCORED_PREFIXES)} | {"comp:kernel"}
    assert literal - set(priors) == set()


def _verdict_key(d) -> list:  # noqa: ANN001
    # Class and phase of every verdict. Not the fixes' values: V0 is recognised from the prefix of any line
    # ("INFO 10-14 12:32:48 file.py:124] ..." without brackets), and a V0 line no keyword selects may change
    # a fix (chunked prefill) without changing the verdict.
    return [(v.cls.value, v.phase.label) for v in d.verdicts]


def test_the_prefilter_never_changes_a_verdict(tmp_path):
    """Every corpus record: the verdicts with the keyword prefilter are those of parsing every line."""
    records = _corpus()
    fast = {}
    for r in records:
        fast[r["id"]] = _verdict_key(diagnose([_write(tmp_path, r.get("log_excerpt") or "", "a.log")]))
    diffs = []
    with readers.every_line():  # the parsers see every line
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
    assert d.verdicts[0].confidence <= _CAP and d.verdicts[0].tier == "paraphrase"


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


def test_a_quoted_traceback_without_its_error_line_is_placed_by_its_frames(tmp_path):
    text = ("> ERROR 03-13 09:07:24 [core.py:330]   File \"/x/vllm/v1/worker/gpu_worker.py\", line 157, in "
            "determine_available_memory\n"
            "> ERROR 03-13 09:07:24 [core.py:330]     self.model_runner.profile_run()\n"
            "> ERROR 03-13 09:07:24 [core.py:330]   File \"/x/vllm/v1/worker/gpu_model_runner.py\", line 1392, in profile_run\n")
    d = diagnose([_write(tmp_path, text)])
    assert d.verdicts, "a traceback is a failure cue"
    assert d.verdicts[0].cls.value == "profile-oom", [(v.cls.value, v.cues[:4]) for v in d.verdicts]


def test_vllms_ray_warning_that_tp_exceeds_the_gpus_is_a_placement_failure(tmp_path):
    text = ("(EngineCore_DP0 pid=34) WARNING 03-30 14:11:45 [ray_utils.py:352] Tensor parallel size (16) exceeds "
            "available GPUs (8). This may result in Ray placement group allocation failures\n")
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "ray-placement-timeout"
    assert ("--tensor-parallel-size", 8) in [(f.flag, f.value) for f in v.fix]


def test_a_config_errors_fix_is_the_setting_its_message_names(tmp_path):
    text = "ValueError: LoRA rank 64 is greater than max_lora_rank 16.\n"
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "config-error"
    assert v.fix and v.fix[0].flag == "--max-lora-rank"


def test_bf16_on_a_pre_ampere_card_is_fixed_with_dtype_half(tmp_path):
    text = ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
            "V100-SXM2-32GB GPU has compute capability 7.0.\n")
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "config-error" and (v.fix[0].flag, v.fix[0].value) == ("--dtype", "half")


def test_cue_keywords_select_no_ordinary_serving_line():
    """Throughput must not drop: a serving log's frequent lines hold no cue keyword (each hit is parsed)."""
    import random

    from oomguard.diagnose.parsers.cues import CASELESS_KEYWORDS, KEYWORDS

    rng = random.Random(7)
    lines = []
    for i in range(2000):
        rid = "".join(rng.choice("0123456789abcdef") for _ in range(24))
        lines += [
            f"(APIServer pid=1) INFO 05-01 13:45:{i % 60:02d} [loggers.py:236] Engine 000: Avg prompt throughput: "
            f"{i}.5 tokens/s, Avg generation throughput: 1941.5 tokens/s, Running: 20 reqs, Waiting: 16 reqs, "
            "GPU KV cache usage: 22.8%, Prefix cache hit rate: 42.4%",
            f'(APIServer pid=1) INFO:     10.202.101.2:{50000 + i} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
            f"(APIServer pid=1) INFO 05-03 03:46:54 [logger.py:71] Received request chatcmpl-{rid}: params: "
            "SamplingParams(n=1, temperature=0.7, top_p=1.0, max_tokens=4028, logprobs=None, prompt_logprobs=None), "
            "prompt_token_ids: None, lora_request: None.",
            f"(APIServer pid=1) INFO 05-03 08:35:11 [async_llm.py:328] Finished request chatcmpl-{rid}.",
            f"(APIServer pid=1) WARNING 05-02 09:03:24 [serving_chat.py:210] Request chatcmpl-{rid} has max_tokens "
            "larger than the remaining context; clamped to 3913",
        ]
    hits = [line for line in lines if any(k in line.encode() for k in KEYWORDS)
            or any(k in line.encode().lower() for k in CASELESS_KEYWORDS)]
    assert hits == [], hits[:3]
