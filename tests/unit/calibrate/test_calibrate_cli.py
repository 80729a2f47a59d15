"""``oomguard calibrate`` end to end through the real CLI, on public start-up lines (tests/fixtures/calibrate)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT, run_cli

FIX = ROOT / "tests" / "fixtures" / "calibrate"
CONFIGS = str(ROOT / "tests" / "data" / "calibration" / "configs")


def _json(*args: str, **kw):
    out = run_cli("calibrate", *args, "--format", "json", **kw)
    return out, (json.loads(out.stdout) if out.stdout.strip() else None)


def test_restarts_in_one_pod_log_are_separated_and_matched(tmp_path):
    out, d = _json(str(FIX / "a100-restarts.log"), "--gpu", "A100-80GB", "--model-dir", CONFIGS)
    assert out.returncode == 0, out.stderr
    assert d["found"] == 5 and d["matched"] == 5 and len(d["startups"]) == 5
    assert [s["status"] for s in d["startups"]] == ["matched"] * 5
    groups = {g["gpu"] + " / " + g["release"] + " / " + g["model_family"]: g for g in d["groups"]}
    dense = groups["A100-SXM4-80GB / 0.8-0.10 / dense"]
    assert dense["startups"] == 4
    # the KV pool is compared for each start-up: predicted vs logged per GPU
    assert dense["terms"]["kv_pool"]["n"] == 4
    # four logs measured the activation offset (from their pools): applied; the MoE one alone is refused
    assert dense["offsets"]["activation"]["n"] == 4 and dense["offsets"]["activation"]["applied"] is True
    moe = groups["A100-SXM4-80GB / 0.8-0.10 / moe"]
    assert all(not o["applied"] for o in moe["offsets"].values())
    s0 = d["startups"][0]
    assert s0["release"] == "0.10.1" and s0["version_printed"] == "0.10.1" and s0["gpu"] == "A100-SXM4-80GB" and s0["gpu_source"] == "--gpu"
    assert s0["logged"]["kv_pool"]["line"].endswith("a100-restarts.log:6")


def test_write_then_plan_check_fit_say_what_they_adjust(tmp_path):
    prof = tmp_path / "fleet.yaml"
    out = run_cli("calibrate", str(FIX / "h100-loki.jsonl"), "--gpu", "H100", "--model-dir", CONFIGS, "--write", str(prof))
    assert out.returncode == 0, out.stderr
    assert "lines put back in time order" in out.stdout  # the export was newest first
    text = prof.read_text()
    assert "oomguard_calibration: 1" in text and "H100-SXM-80GB" in text
    args = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--vllm-version", "0.11.0", "--max-model-len", "16000")
    base = json.loads(run_cli("plan", *args, "--format", "json").stdout)
    cal = run_cli("plan", *args, "--format", "json", "--calibration", str(prof))
    assert cal.returncode == 0, cal.stderr
    d = json.loads(cal.stdout)
    act = next(t for t in d["per_gpu"]["terms"] if t["name"].startswith("activation"))
    base_act = next(t for t in base["per_gpu"]["terms"] if t["name"].startswith("activation"))
    m = re.match(r"calibrated: ([+−-])(\d+\.\d+) GiB from (\d+) start-ups on H100-SXM-80GB / 0\.11-0\.19 / dense", act["calibrated"])
    assert m, act["calibrated"]
    # the offset is what the fleet's logs measured against this planner (it shrank from +1.3 to about
    # -0.1 GiB when the sampler's CUDA sort temporaries were modelled): the term moves by exactly it
    offset = float(m[2]) * (1 if m[1] == "+" else -1)
    assert offset != 0 and int(m[3]) >= 3
    assert act["uncalibrated_gib"] == pytest.approx(base_act["gib"], abs=0.001)
    assert act["gib"] == pytest.approx(base_act["gib"] + offset, abs=0.006)
    # the pool follows the calibrated terms (each shows its uncalibrated figure), the other way
    moved = sum(t["gib"] - t["uncalibrated_gib"] for t in d["per_gpu"]["terms"] if t.get("calibrated"))
    assert d["per_gpu"]["kv_cache_gib"] == pytest.approx(base["per_gpu"]["kv_cache_gib"] - moved, abs=0.02)
    assert any("calibration" in m and "adjusts" in m for m in d["messages"])
    # the environment variable does the same, and says where the profile came from
    env = run_cli("plan", *args, "--format", "json", env={"OOMGUARD_CALIBRATION": str(prof)})
    assert json.loads(env.stdout)["per_gpu"]["kv_cache_gib"] == d["per_gpu"]["kv_cache_gib"]
    assert any("$OOMGUARD_CALIBRATION" in m for m in json.loads(env.stdout)["messages"])
    # text ledger: the calibrated term with its uncalibrated figure beside it
    txt = run_cli("plan", *args, "--calibration", str(prof))
    assert f"calibrated: {m[1]}{m[2]}" in txt.stdout and "uncalibrated" in txt.stdout
    # check and fit say it too
    chk = run_cli("check", "--gpu", "H100", "--vllm-version", "0.11.0", "--calibration", str(prof), "--",
                  "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "16000")
    assert chk.returncode == 0, chk.stderr
    assert "calibration" in chk.stdout and "adjusts" in chk.stdout
    fit = run_cli("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--vllm-version", "0.11.0",
                  "--context", "16000", "--calibration", str(prof), "--format", "json")
    assert fit.returncode == 0, fit.stderr
    f = json.loads(fit.stdout)
    assert any("adjusts" in n for n in f["notes"])
    assert any(t.get("calibrated") for t in f["candidates"][0]["plan"]["per_gpu"]["terms"])


def test_group_below_the_minimum_is_refused_not_applied(tmp_path):
    prof = tmp_path / "fleet.yaml"
    run_cli("calibrate", str(FIX / "h100-loki.jsonl"), "--gpu", "H100", "--model-dir", CONFIGS, "--write", str(prof))
    # gpt-oss (MoE) has two start-ups in the export: below the minimum of 3
    out = run_cli("plan", "--model", "openai/gpt-oss-20b", "--gpu", "H100", "--vllm-version", "0.11.0", "--max-model-len", "16000",
                  "--calibration", str(prof), "--format", "json")
    d = json.loads(out.stdout)
    assert not any(t.get("calibrated") for t in d["per_gpu"]["terms"])
    assert any("refused" in m and "minimum 3" in m for m in d["messages"])
    # another GPU: no group, and the plan says so
    out = run_cli("plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L40S", "--calibration", str(prof), "--format", "json")
    assert any("no group for L40S" in m for m in json.loads(out.stdout)["messages"])


def test_unmatched_startups_say_why_and_exit_1():
    out, d = _json(str(FIX / "rtx3090-v0.log.gz"))
    assert out.returncode == 1
    assert d["found"] == 2 and d["matched"] == 0
    # no version and no prefix, but V0-only ledger lines: planned as 0.6.6 and said so (docs/calibrate.md#matching)
    assert all(s["status"] == "unmatched" and "names no model" in s["reason"] for s in d["startups"])
    assert all(s["release"] == "0.6.6" and s["engine"].startswith("V0") and "planned as 0.6.6" in s["notes"][0] for s in d["startups"])
    out, d = _json(str(FIX / "rtx3090-v0.log.gz"), "--vllm-version", "0.6.4")
    assert all("names no model" in s["reason"] and s["release"] == "0.6.4" for s in d["startups"])
    out, d = _json(str(FIX / "rtx3090-v0.log.gz"), "--vllm-version", "0.6.4", "--model", "meta-llama/Llama-3.1-8B-Instruct")
    # a total of 23.58 GiB fits two cards: the GPU is not guessed
    assert all("pass --gpu" in s["reason"] for s in d["startups"])
    out, d = _json(str(FIX / "rtx3090-v0.log.gz"), "--vllm-version", "0.6.4", "--gpu", "RTX-3090",
                   "--model", "meta-llama/Llama-3.1-8B-Instruct")
    assert out.returncode == 0 and d["matched"] == 2
    # V0's one-line profile: the peak includes the weights; the activation is the difference
    assert d["startups"][0]["logged"]["activation"]["note"] == "peak_torch_memory − weights"


def test_stdin_directory_and_glob(tmp_path):
    import subprocess
    import sys

    text = (FIX / "a100-restarts.log").read_text()  # as `kubectl logs POD | oomguard calibrate -` gives it
    p = subprocess.run([sys.executable, "-m", "oomguard.cli.main", "calibrate", "-", "--gpu", "A100-80GB", "--model-dir", CONFIGS,
                        "--format", "json"], input=text, capture_output=True, text=True, cwd=str(ROOT), timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["matched"] == 5
    out, d = _json(str(FIX), "--gpu", "A100-80GB", "--model-dir", CONFIGS)
    assert d["found"] >= 5 + 9 + 2 and len(d["inputs"]) >= 3
    out, d = _json(str(FIX / "*.jsonl"), "--gpu", "H100", "--model-dir", CONFIGS)
    assert [i["form"] for i in d["inputs"]] == ["json-lines"] and d["inputs"][0]["message_field"] == "line"


@pytest.mark.parametrize("args, needle", [
    (["/no/such/file.log"], "no such file"),
    (["tests/fixtures/calibrate/*.nothing"], "no file matches"),
    (["tests/fixtures/calibrate/h100-loki.jsonl", "--message-field", "msg"], "--message-field msg: no such field"),
    (["tests/fixtures/calibrate/a100-restarts.log", "--message-field", "msg"], "not JSON lines"),
    (["tests/fixtures/calibrate/a100-restarts.log", "--gpu", "H1OO-banana"], "unknown GPU"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    out = run_cli("calibrate", *args)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert needle in out.stderr and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_broken_json_line_names_file_and_line(tmp_path):
    f = tmp_path / "export.jsonl"
    f.write_text('{"line": "INFO [gpu_worker.py:1] Available KV cache memory: 5.0 GiB"}\n{"line": "Model loading took 1 GiB"\n')
    out = run_cli("calibrate", str(f))
    assert out.returncode == 2
    assert f"{f}:2: invalid JSON" in out.stderr


def test_no_startup_at_all_is_could_not_complete(tmp_path):
    f = tmp_path / "other.log"
    f.write_text("hello\nnothing to see\n")
    out = run_cli("calibrate", str(f))
    assert out.returncode == 3
    assert "no vLLM start-up" in out.stderr


def test_bad_profile_is_bad_input(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("oomguard_calibration: 1\ngroups:\n  - gpu: H100\n    release: 0.11-0.19\n    model_family: dense\n"
                 "    terms:\n      activation: {offset_gib: 2.0, n: 3, spread_gib: [0.5, 1.0]}\n")
    out = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--calibration", str(p))
    assert out.returncode == 2
    assert f"{p}:7: groups[0].terms.activation: offset_gib 2 outside its spread_gib" in out.stderr
    p.write_text("oomguard_calibration: 1\nmin_records: 1\ngroups: []\n")
    out = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--calibration", str(p))
    assert out.returncode == 2 and "min_records" in out.stderr and ":2:" in out.stderr
