"""S1, S2 and S3 (../shared/scenarios.md) end to end through the real CLI: plan → check → fit → host → export.

Each scenario's launch goes through every command a user would run on it; the
corrected launch of `check --fix` and the first edit of `fit --from` are the
same (issue 12, item 2), and the export of `--fix` carries it.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, SCENARIOS, run_cli

HOST_ROOT = ROOT / "tests" / "fixtures" / "host" / "roots" / "two_numa_4x4090"
ONE_M = 1_048_576


def _json(*args, rc=None):
    proc = run_cli(*args, env={"HF_HUB_OFFLINE": "1"}, timeout=120)
    if rc is not None:
        assert proc.returncode in ((rc,) if isinstance(rc, int) else rc), (proc.returncode, proc.stderr[-2000:])
    return proc.returncode, json.loads(proc.stdout)


def _text(*args):
    return run_cli(*args, env={"HF_HUB_OFFLINE": "1"}, timeout=120)


def _edit_of(option: dict) -> dict:
    return {e["dest"]: e["value"] for e in option["edits"]}


def _same_first_choice(check_json: dict, fit_json: dict) -> None:
    first = _edit_of(check_json["goal_fixes"][0])
    flags = fit_json["candidates"][0]["flags"]
    for dest, value in first.items():
        got = flags.get(dest)
        if dest == "kv_cache_memory_bytes" and isinstance(got, str):
            got = int(got.rstrip("M")) * 2**20 if got.endswith("M") else int(got.rstrip("G")) * 2**30
        assert got == value, (dest, got, value)


# --------------------------------------------------------------------------- S1

S1 = [str(SCENARIOS / "s1" / "start_api.sh"), "--model", str(SCENARIOS / "s1" / "model"), "--gpu", "A100-80GB"]


@pytest.fixture(scope="module")
def s1():
    return {
        "plan": _json("plan", *S1, "--json", rc=1)[1],
        "check": _json("check", *S1, "--format", "json", rc=1)[1],
        "fit": _json("fit", "--from", *S1, "--format", "json", rc=0)[1],
    }


def test_s1_plan_names_the_profile_run(s1):
    assert s1["plan"]["failure"] == "profile-oom" and s1["plan"]["max_num_batched_tokens"] == ONE_M


def test_s1_check_keeps_the_million_token_context(s1):
    d = s1["check"]
    assert d["findings"][0]["rule"] == "OG101"
    assert d["goal_kept"] is True and "--max-model-len 1048576" in d["fixed_command"]
    assert d["fixed_check"]["starts"] is True and d["fixed_check"]["errors"] == []
    first = d["goal_fixes"][0]
    assert first["kv_cache_tokens"] >= ONE_M and first["headroom_gib"] >= first["headroom_floor_gib"]
    # alternatives are ranked and each re-planned; the fp8 one says what it costs
    assert len(d["goal_fixes"]) >= 2
    assert any("fp8" in " ".join(o["tradeoffs"]) and "accuracy" in " ".join(o["tradeoffs"]) for o in d["goal_fixes"])


def test_s1_fit_from_gives_checks_first_choice(s1):
    assert s1["fit"]["candidates"][0]["plan"]["max_model_len"] == ONE_M
    _same_first_choice(s1["check"], s1["fit"])


def test_s1_corrected_launch_plans_to_start(s1, tmp_path):
    p = tmp_path / "fixed.sh"
    p.write_text(s1["check"]["fixed_command"] + "\n")
    rc, d = _json("plan", str(p), "--model", str(SCENARIOS / "s1" / "model"), "--gpu", "A100-80GB", "--json", rc=0)
    assert d["starts"] and d["max_model_len"] == ONE_M


def test_s1_host_and_export(tmp_path):
    rc, d = _json("host", "--root", str(HOST_ROOT), "--launch", S1[0], "--format", "json", rc=(0, 1))
    assert "findings" in d
    proc = _text("export", "launch", S1[0], "--to", "docker", "--fix", *S1[1:])
    assert proc.returncode == 0, proc.stderr
    assert "--max-model-len 1048576" in proc.stdout and "--max-num-batched-tokens 1048576" not in proc.stdout


def test_s1_without_the_model_config_is_never_clean():
    d = _json("check", S1[0], "--gpu", "A100-80GB", "--format", "json", rc=3)[1]
    assert d["complete"] is False and "OG001" in {f["rule"] for f in d["findings"]}
    proc = _text("export", "launch", S1[0], "--to", "docker", "--fix", "--gpu", "A100-80GB")
    assert proc.returncode == 2 and "--model" in proc.stderr and proc.stdout == ""
    proc = _text("fit", "--from", S1[0], "--gpu", "A100-80GB")
    assert proc.returncode == 2 and "pass --model" in proc.stderr


# --------------------------------------------------------------------------- S2

S2 = [str(SCENARIOS / "s2" / "start_api.sh"), "--gpu", "RTX-3090"]
V0 = ["--vllm-version", "0.6.6"]


def test_s2_on_its_release_the_unchunked_step_is_caught_and_fixed(tmp_path):
    rc, plan = _json("plan", *S2, *V0, "--json", rc=0)
    assert plan["engine"] == "V0" and plan["settings"]["enable_chunked_prefill"] is False
    assert plan["max_num_batched_tokens"] == 8192  # max(max_model_len, 2048): a whole prompt per step
    rc, d = _json("check", *S2, *V0, "--format", "json", rc=0)
    f = next(x for x in d["findings"] if x["rule"] == "OG103")
    assert f["severity"] == "warning" and f["numbers"]["suggested_max_num_batched_tokens"] == 1024
    assert "--enable-chunked-prefill" in d["fixed_command"] and "--max-num-batched-tokens 1024" in d["fixed_command"]
    assert run_cli("check", *S2, *V0, "--strict").returncode == 1
    # the fix, verified by plan on the same release
    p = tmp_path / "fixed.sh"
    p.write_text(d["fixed_command"] + "\n")
    rc, after = _json("plan", str(p), "--gpu", "RTX-3090", *V0, "--json", rc=0)
    assert after["starts"] and after["max_num_batched_tokens"] == 1024 and after["settings"]["enable_chunked_prefill"]
    # fit --from proposes the same edit first
    rc, fitd = _json("fit", "--from", *S2, *V0, "--format", "json", rc=0)
    first = fitd["candidates"][0]["flags"]
    assert first["max_num_batched_tokens"] == 1024 and first.get("enable_chunked_prefill") is True


def test_s2_on_the_newest_release_is_quiet():
    rc, d = _json("check", *S2, "--format", "json", rc=0)
    assert "OG103" not in {f["rule"] for f in d["findings"]} and d["complete"] is True
    rc, fitd = _json("fit", "--from", *S2, "--format", "json", rc=0)
    assert fitd["candidates"][0]["edit"] == []  # no edit needed


def test_s2_host_and_export():
    rc, d = _json("host", "--root", str(HOST_ROOT), "--launch", S2[0], "--vllm-version", "0.6.6", "--format", "json", rc=(0, 1))
    assert "findings" in d
    proc = _text("export", "launch", S2[0], "--to", "kubernetes", "--fix", "--gpu", "RTX-3090", *V0)
    assert proc.returncode == 0, proc.stderr
    assert "--max-num-batched-tokens" in proc.stdout and "1024" in proc.stdout and "--enable-chunked-prefill" in proc.stdout


# --------------------------------------------------------------------------- S3

S3 = [str(SCENARIOS / "s3" / "start_api.sh"), "--model", str(SCENARIOS / "s3" / "model"), "--gpu", "RTX-4090", "--num-gpus", "4"]
V25 = ["--vllm-version", "0.25"]


@pytest.fixture(scope="module")
def s3():
    return {
        "check": _json("check", *S3, *V25, "--format", "json", rc=1)[1],
        # exit 1: the shown edit keeps as much of 750,000 as fits, so the goal itself is not met
        "fit": _json("fit", "--from", *S3, *V25, "--lenient", "--format", "json", rc=1)[1],
    }


def test_s3_plan_reproduces_327680_tokens():
    rc, d = _json("plan", *S3, *V25, "--lenient", "--json", rc=1)
    assert d["kv_cache_tokens"] == 327680 and d["failure"] == "kv-too-small"


def test_s3_check_keeps_as_much_of_750k_as_fits(s3):
    d = s3["check"]
    assert d["goal_kept"] is False  # one 750,000-token request needs 22.9 GiB of KV per 24 GB card
    first = d["goal_fixes"][0]
    kept = first["max_model_len"]
    assert 400_000 < kept < 750_000  # more than the 326,656 the 10 GiB pool holds
    assert any("gives up" in t for t in first["tradeoffs"])
    assert f"--max-model-len {kept}" in d["fixed_command"] and d["fixed_check"]["starts"]


def test_s3_fit_from_gives_checks_first_choice(s3):
    _same_first_choice(s3["check"], s3["fit"])


def test_s3_host_and_export():
    rc, d = _json("host", "--root", str(HOST_ROOT), "--launch", S3[0], "--format", "json", rc=1)
    assert any(f["severity"] == "error" for f in d["findings"])  # the 200 GiB CPU tier vs this host
    proc = _text("export", "launch", S3[0], "--to", "compose", "--fix", *S3[1:], *V25)
    assert proc.returncode == 0, proc.stderr
    assert "--rope-scaling" not in proc.stdout and "hf-overrides" in proc.stdout
