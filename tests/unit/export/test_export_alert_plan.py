"""Alert thresholds from the launch's plan (issue 17): GPU memory the launch is expected to hold,
the KV share of one full-length request, preemptions the plan does or does not expect; plus the
absent() and OOMKilled rules. Checked with promtool when it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oomguard.export.alert_plan import expected_gpu_fraction, settings_from_plan
from oomguard.export.alerts import AlertSettings, alert_rules, render_prometheus

ROOT = Path(__file__).resolve().parents[3]
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")


def _plan(util=0.9, total=80.0, kv_tokens=400_000, max_len=32_768, seqs=256, conc=12.2):
    stage = {"total_gib": total, "requested_gib": util * total, "weights_gib": 15.0, "activation_peak_gib": 1.0,
             "non_torch_gib": 0.5, "cuda_graph_gib": 0.5, "kv_cache_gib": util * total - 17.0, "reserved_gib": 0.0}
    return {"per_gpu": stage, "per_stage": [stage], "gpu_memory_utilization": util, "kv_cache_tokens": kv_tokens,
            "max_model_len": max_len,
            "max_num_seqs": seqs, "max_concurrency": conc}


@pytest.mark.parametrize("util, threshold", [(0.9, 0.95), (0.95, 0.975), (0.8, 0.9), (0.5, 0.75), (0.999, 0.995)])
def test_gpu_memory_threshold_sits_above_what_the_launch_holds(util, threshold):
    s = settings_from_plan(_plan(util=util), AlertSettings(), source="test")
    assert s.gpu_mem_threshold == threshold
    frac, _ = expected_gpu_fraction(_plan(util=util))
    if util < 0.99:
        assert s.gpu_mem_threshold > frac  # the old fixed 0.95 fired for ever at 0.95
    else:
        assert "fires while it runs" in s.gpu_mem_why


def test_a_fixed_kv_pool_counts_its_parts_not_the_utilization():
    plan = _plan(util=0.5)
    plan["per_stage"][0]["kv_cache_gib"] = 60.0  # --kv-cache-memory-bytes: more than util x total
    frac, why = expected_gpu_fraction(plan)
    assert frac == pytest.approx((15 + 1 + 0.5 + 0.5 + 60) / 80) and "77.00 GiB of 80.00" in why


def test_kv_threshold_leaves_one_full_length_request():
    s = settings_from_plan(_plan(kv_tokens=152_656, max_len=8192), AlertSettings(), source="test")
    assert s.kv_threshold == 0.94 and "8,192-token request" in s.kv_why
    s1 = settings_from_plan(_plan(kv_tokens=1_043_520, max_len=1_048_576, seqs=1, conc=0.99), AlertSettings(), source="t")
    assert s1.kv_threshold == 0.98 and "fills it" in s1.kv_why  # S1: one request is the whole pool
    small = settings_from_plan(_plan(kv_tokens=20_000, max_len=8192), AlertSettings(), source="t")
    assert small.kv_threshold == 0.59


def test_preemptions_the_plan_rules_out_alert_at_once():
    never = settings_from_plan(_plan(seqs=8, conc=12.0), AlertSettings(), source="t")
    assert never.preemption_for == "1m" and "memory is not what was planned" in never.preemption_why
    expected = settings_from_plan(_plan(seqs=256, conc=12.0), AlertSettings(), source="t")
    assert expected.preemption_for == "10m" and "expected" in expected.preemption_why


def test_explicit_thresholds_win_over_the_plan():
    s = settings_from_plan(_plan(util=0.95), AlertSettings(gpu_mem_threshold=0.97, kv_threshold=0.8), source="t",
                           explicit=frozenset({"gpu_mem_threshold", "kv_threshold"}))
    assert (s.gpu_mem_threshold, s.kv_threshold) == (0.97, 0.8)


def run(*a):
    return subprocess.run([sys.executable, "-m", "oomguard.cli.main", "export", "alerts", *a], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def test_cli_alerts_from_a_launch(tmp_path):
    p = run("--launch", str(ROOT / "tests/scenarios/s2/start_api.sh"), "--gpu", "RTX-3090", "-o", str(tmp_path / "r.yml"))
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "r.yml").read_text()
    assert "# Thresholds from the plan of" in text and "8x RTX-3090" in text
    rules = {r["alert"]: r for r in yaml.safe_load(text)["groups"][0]["rules"]}
    assert rules["VllmGpuMemoryNearLimit"]["expr"].endswith("> 0.9")  # S2 runs at utilization 0.8
    assert rules["VllmKvCacheNearlyFull"]["expr"].endswith("> 0.94")
    assert "Threshold: the launch holds" in rules["VllmGpuMemoryNearLimit"]["annotations"]["description"]
    p = run("--launch", str(ROOT / "tests/scenarios/s2/start_api.sh"))
    assert p.returncode == 2 and "--gpu" in p.stderr
    p = run("--gpu", "A100-80GB", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--gpu-memory-utilization", "0.95")
    assert p.returncode == 0, p.stderr
    rules = {r["alert"]: r for r in yaml.safe_load(p.stdout)["groups"][0]["rules"]}
    assert rules["VllmGpuMemoryNearLimit"]["expr"].endswith("> 0.975")


def _alert(rule, series, eval_time, labels, *, interval="1m"):
    """A promtool test case expecting ``rule`` to fire at ``eval_time`` with ``labels`` (annotations not compared)."""
    return {"interval": interval, "input_series": series,
            "alert_rule_test": [{"eval_time": eval_time, "alertname": rule,
                                 "exp_alerts": [{"exp_labels": labels}] if labels is not None else []}]}


@needs_promtool
def test_promtool_plan_thresholds_absent_and_oomkilled(tmp_path):
    """A launch at utilization 0.95 holding 95.5% of its card does not alert (the old fixed 0.95 did),
    99% does; vLLM's metrics missing fire absent(); an OOMKilled restart fires at once."""
    base = settings_from_plan(_plan(util=0.95), AlertSettings(vllm_version="0.32.0"), source="test")
    rules = {r.name: r for r in alert_rules(base)}
    text = render_prometheus(base)
    # annotations hold the descriptions; the test compares labels only, so drop them from the file
    doc = yaml.safe_load(text)
    for r in doc["groups"][0]["rules"]:
        r.pop("annotations")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(doc))
    sev = {n: {"severity": r.severity, "source": "oomguard"} for n, r in rules.items()}
    gpu = [{"series": 'DCGM_FI_DEV_FB_USED{instance="h:9400",gpu="0"}', "values": "9550x20"},
           {"series": 'DCGM_FI_DEV_FB_FREE{instance="h:9400",gpu="0"}', "values": "450x20"}]
    hot = [{"series": 'DCGM_FI_DEV_FB_USED{instance="h:9400",gpu="0"}', "values": "9900x20"},
           {"series": 'DCGM_FI_DEV_FB_FREE{instance="h:9400",gpu="0"}', "values": "100x20"}]
    ksm = [{"series": 'kube_pod_container_status_last_terminated_reason{namespace="ml",pod="v-1",container="vllm",'
                      'reason="OOMKilled"}', "values": "1x20"},
           {"series": 'kube_pod_container_status_restarts_total{namespace="ml",pod="v-1",container="vllm"}',
            "values": "0 0 0 0 0 1 1 1 1 1 1 1 1 1 1"}]
    up = [{"series": 'up{job="vllm",instance="h:8000"}', "values": "1x20"}]
    tests = [
        _alert("VllmGpuMemoryNearLimit", gpu, "10m", None),
        _alert("VllmGpuMemoryNearLimit", hot, "10m", {**sev["VllmGpuMemoryNearLimit"], "instance": "h:9400", "gpu": "0"}),
        _alert("VllmMetricsAbsent", up, "15m", {**sev["VllmMetricsAbsent"], "job": "vllm"}),
        _alert("VllmMetricsAbsent", up + [{"series": 'vllm:kv_cache_usage_perc{job="vllm",instance="h:8000",'
                                                     'model_name="m"}', "values": "0.1x20"}], "15m", None),
        _alert("VllmContainerOOMKilled", ksm, "8m", {**sev["VllmContainerOOMKilled"], "namespace": "ml", "pod": "v-1",
                                                      "container": "vllm"}),
        _alert("VllmContainerOOMKilled", ksm[:1], "8m", None),  # an old OOMKilled without a restart: quiet
    ]
    (tmp_path / "test.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m",
                                                       "tests": tests}))
    p = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    full = tmp_path / "full.yml"
    full.write_text(text)
    p = subprocess.run([PROMTOOL, "check", "rules", str(full)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and re.search(r"SUCCESS: 8 rules found", p.stdout), p.stdout + p.stderr
