"""Acceptance scenarios S1-S3 (../shared/scenarios.md) through ``oomguard check``.

Inputs are the lead's tests/scenarios/ files (s1/start_api.sh + s1/model, s2/start_api.sh,
s3/start_api.sh + s3/model).
"""

from __future__ import annotations

import json

import pytest

from tests.unit.check.conftest import ROOT, TOPO, check, finding, rules_of

SCEN = ROOT / "tests" / "scenarios"
pytestmark = pytest.mark.skipif(not (SCEN / "s1" / "start_api.sh").exists(), reason="tests/scenarios not present")


def _recheck_text(report, **options):
    from oomguard.check.context import CheckOptions
    from oomguard.check.report import check_read, reread

    return check_read(reread(report.ctx.launch, report.fix.text, None), CheckOptions(**options))


def test_s1_findings_and_corrected_script():
    opts = dict(model=str(SCEN / "s1" / "model"), gpu="A100-80GB", other_gpu_use_gib=4)
    rep = check(path=SCEN / "s1" / "start_api.sh", **opts)
    # 1. dies at start-up: the profile run of a 1M-token step
    assert rep.ctx.plan.failure.value == "profile-oom"
    f = finding(rep, "OG101")
    assert f.severity.value == "error" and f.line == 6
    assert f.numbers["activation_peak_gib_before"] > 79 and f.numbers["activation_peak_gib_after"] < 3
    assert f.fix[0].to_dict() == {"flag": "--max-num-batched-tokens", "value": 8192}
    # 0.9 on a shared card, prefix caching on a first request, enforce-eager while debugging
    assert finding(rep, "OG302").severity.value == "warning"
    assert finding(rep, "OG901").severity.value == "info"
    assert finding(rep, "OG902").severity.value == "info"
    # the corrected script keeps the goal: chunked, a utilization that leaves the neighbours room,
    # and (at 0.85 the bf16 pool is too small for 1M) an fp8 KV cache rather than a shorter length
    text = rep.fix.text
    assert text.startswith("#!/bin/bash\n# Scenario S1")
    assert "MODEL=/models/qwen-1m\n" in text and "--max-num-batched-tokens 8192 \\\n" in text
    assert "--gpu-memory-utilization 0.85 \\\n" in text
    assert "--max-model-len 1048576 \\\n" in text and "--kv-cache-dtype fp8" in text
    assert rep.goal_fixes[0].keeps_goal and rep.fix.followups == []
    assert rep.fix.remaining == [] and rep.fix.starts is True
    again = _recheck_text(rep, **opts)
    assert again.errors == [] and again.ctx.plan.starts
    # S1's success criterion: the server stays under 75 GB on the card
    plan = again.ctx.plan
    assert plan.tight_rank.requested_bytes + 512 * 2**20 < 75e9


def test_s1_not_shared_keeps_utilization():
    rep = check(path=SCEN / "s1" / "start_api.sh", model=str(SCEN / "s1" / "model"), gpu="A100-80GB")
    assert "OG302" not in rules_of(rep)
    assert "--gpu-memory-utilization 0.9 \\\n" in rep.fix.text
    assert "--max-model-len 1048576 \\\n" in rep.fix.text  # the goal is kept
    assert rep.fix.remaining == [] and rep.fix.starts


def test_s1_json(capsys):
    from oomguard.cli.main import main

    rc = main(["check", str(SCEN / "s1" / "start_api.sh"), "--model", str(SCEN / "s1" / "model"), "--gpu", "A100-80GB", "--format", "json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert d["findings"][0]["rule"] == "OG101" and d["plan"]["failure"] == "profile-oom"
    assert "--max-model-len 1048576" in d["fixed_command"] and d["goal_kept"] is True
    first = d["goal_fixes"][0]
    assert first["applied_by_fix"] and first["keeps_goal"] and first["kv_cache_tokens"] >= 1048576
    assert first["flags"].split()[0] in d["fixed_command"]


def test_s2_runs_clean_on_the_newest_release():
    rep = check(path=SCEN / "s2" / "start_api.sh", gpu="RTX-3090")
    assert rep.errors == [] and rep.ctx.plan.starts and rep.warnings == []
    assert rep.ctx.plan.settings.tensor_parallel_size == 8


def test_s2_unchunked_prefill_on_v0():
    rep = check(path=SCEN / "s2" / "start_api.sh", gpu="RTX-3090", version="0.6.6")
    f = finding(rep, "OG103")
    assert f.severity.value == "warning" and rep.ctx.plan.starts
    n = f.numbers
    assert n["tokens_per_step"] == 8192 and n["suggested_max_num_batched_tokens"] == 1024 and n["starts_after"]
    assert n["prompt_step_activation_gib_after"] < n["prompt_step_activation_gib_before"] / 4
    assert "--enable-chunked-prefill" in rep.fix.text and "--max-num-batched-tokens 1024" in rep.fix.text
    assert rep.fix.remaining == [] and rep.fix.starts


S3_OPTS = dict(model=str(SCEN / "s3" / "model"), gpu="RTX-4090", num_gpus=4, host_ram_gib=256, avg_input_len=32768)


def test_s3_host_ram_and_concurrency_findings():
    rep = check(path=SCEN / "s3" / "start_api.sh", **S3_OPTS)
    plan = rep.ctx.plan
    assert plan.kv_cache_tokens == 327680 and plan.kv_bytes_per_token == 32768
    # host RAM (oomguard.host.ram_model, the same as `oomguard host`): on the newest release the 200 GiB
    # tier is one exact-size /dev/shm file, so 216 GiB of 256 fits; /dev/shm must hold the file.
    assert [f for f in rep.findings if f.rule == "OG401"] == []
    assert rep.to_dict()["host_ram"]["needed_gib"] == 216.07 and rep.to_dict()["host_ram"]["parts"]["kv_cpu_tier"] == 200.0
    shm = finding(rep, "OG405")
    assert shm.numbers["shm_needed_gib"] == 200.0 and "--shm-size=201g" in shm.message
    total = finding(rep, "OG402")
    assert total.numbers["per_worker_gib"] == 50.0
    # On 0.26 each worker pins 50 GiB as 128 tensors (64 layers, K and V apart) rounded to 0.5 GiB: exact here.
    old = check(path=SCEN / "s3" / "start_api.sh", **S3_OPTS, version="0.26.0")
    assert old.to_dict()["host_ram"]["parts"]["kv_cpu_tier"] == 256.0
    # average ISL × concurrency ≤ capacity: ~10 sequences of 32K, not 96
    conc = finding(rep, "OG203")
    assert conc.numbers["sequences_that_fit"] == 10.0 and conc.fix[0].to_dict() == {"flag": "--max-num-seqs", "value": 10}
    # one 750,000-token request does not fit the 10 GiB GPU pool (nor the whole card)
    assert finding(rep, "OG201").numbers["max_fitting_len"] < 750000
    assert rep.goal_fixes and not rep.goal_fixes[0].keeps_goal
    # --kv-cache-memory is an abbreviation; --rope-scaling is gone; the long length needs the env var
    assert finding(rep, "OG604").fix[-1].flag == "--kv-cache-memory-bytes"
    assert [e.flag for e in finding(rep, "OG602").fix] == ["--rope-scaling", "--hf-overrides"]
    assert finding(rep, "OG501").fix[0].to_dict() == {"flag": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "value": "1"}
    assert "786,432" in finding(rep, "OG501").message  # 262,144 × 3.0 covers 750,000
    assert finding(rep, "OG204").severity.value == "info"  # utilization no longer sizes the pool
    assert finding(rep, "OG903").numbers["prefill_steps"] == 92
    assert finding(rep, "OG503").severity.value == "warning"  # static YaRN on 32K traffic


def test_s3_corrected_launch_passes():
    rep = check(path=SCEN / "s3" / "start_api.sh", **S3_OPTS)
    text = rep.fix.text
    assert "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\nvllm serve" in text
    assert "--rope-scaling" not in text and "--hf-overrides '{\"rope_scaling\":" in text
    # nothing keeps 750,000 on four 24 GB cards: the fix pins the largest safe pool and keeps as
    # much of the length as it holds (more than the 326,656 the 10 GiB pool holds)
    assert "--kv-cache-memory-bytes 10737418240" not in text and "--kv-cache-memory-bytes " in text
    assert "--max-num-seqs 10" in text
    kept = rep.goal_fixes[0].plan.settings.max_model_len
    assert 400_000 < kept < 750_000 and f"--max-model-len {kept} " in text
    assert "--served-model-name qwen3-27b \\\n" in text and text.rstrip().endswith("--disable-custom-all-reduce")
    assert rep.fix.remaining == [] and rep.fix.starts
    again = _recheck_text(rep, **S3_OPTS)
    assert again.errors == [] and again.ctx.plan.starts


def test_s3_corrected_launch_keeps_the_cpu_tier():
    # 216 GiB of host RAM on a 256 GiB host (ram_model, newest release): the 200 GiB CPU tier is kept.
    text = check(path=SCEN / "s3" / "start_api.sh", **S3_OPTS).fix.text
    assert '"cpu_bytes_to_use":214748364800' in text


def test_s3_topology_suggests_two_tp2_instances():
    rep = check(path=SCEN / "s3" / "start_api.sh", topo=str(TOPO / "rtx4090_4x_two_sockets.txt"), **S3_OPTS)
    f = finding(rep, "OG704")
    assert "2 × TP2" in f.message and "numactl --cpunodebind=1 --membind=1" in f.message
