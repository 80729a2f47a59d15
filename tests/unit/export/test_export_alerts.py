"""Exported alert rules and dashboards: valid for promtool and Grafana, with each version's metric names.

``promtool`` comes from Debian's ``prometheus`` package; the tests that run it
are skipped when it is absent (the structural checks always run).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oomguard.export.alerts import AlertSettings, alert_rules, render_prometheus
from oomguard.export.grafana import dashboard, render_grafana
from oomguard.export.names import GpuExporter, vllm_series

ROOT = Path(__file__).resolve().parents[3]
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
VERSIONS = ["0.7.3", "0.9.1", "0.9.2", "0.10.2", "0.11.0", "0.12.0", "0.32.0", None]


@pytest.mark.parametrize(
    "version, kv_names",
    [
        ("0.6.3", ["vllm:gpu_cache_usage_perc"]),
        ("0.9.1", ["vllm:gpu_cache_usage_perc"]),
        ("0.9.2", ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]),
        ("0.10.2", ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]),
        ("0.11.0", ["vllm:kv_cache_usage_perc"]),
        ("0.32.0", ["vllm:kv_cache_usage_perc"]),
    ],
)
def test_metric_names_per_version(version, kv_names):
    doc = yaml.safe_load(render_prometheus(AlertSettings(vllm_version=version)))
    (kv_rule,) = [r for r in doc["groups"][0]["rules"] if r["alert"] == "VllmKvCacheNearlyFull"]
    used = re.findall(r"vllm:\w+", kv_rule["expr"])
    assert used == kv_names
    assert kv_rule["for"] == "5m" and "> 0.9" in kv_rule["expr"]


def test_rule_file_structure():
    for version in VERSIONS:
        for exporter in GpuExporter:
            doc = yaml.safe_load(render_prometheus(AlertSettings(vllm_version=version, gpu_exporter=exporter)))
            (group,) = doc["groups"]
            names = [r["alert"] for r in group["rules"]]
            assert names == [
                "VllmKvCacheNearlyFull",
                "VllmGpuMemoryNearLimit",
                "VllmPreemptionsRising",
                "VllmWaitingQueueGrowing",
                "VllmServerDown",
                "VllmMetricsAbsent",
                "VllmContainerOOMKilled",
                "HostOomKill",
            ]
            for r in group["rules"]:
                assert set(r) == {"alert", "expr", "for", "labels", "annotations"}
                assert re.fullmatch(r"\d+[smh]", r["for"])
                assert r["labels"]["severity"] in ("warning", "critical")
                assert r["annotations"]["summary"] and r["annotations"]["description"]
            gpu = group["rules"][1]["expr"]
            assert ("DCGM_FI_DEV_FB_USED" in gpu) == (exporter is GpuExporter.DCGM)
            assert ("nvidia_smi_memory_used_bytes" in gpu) == (exporter is GpuExporter.NVIDIA_SMI)


def test_thresholds_and_job_are_honoured():
    s = AlertSettings(
        kv_threshold=0.8, kv_for="10m", gpu_mem_threshold=0.9, gpu_mem_for="2m", job="llm", host_oom=False
    )
    rules = {r.name: r for r in alert_rules(s)}
    assert "> 0.8" in rules["VllmKvCacheNearlyFull"].expr and rules["VllmKvCacheNearlyFull"].hold == "10m"
    assert "> 0.9" in rules["VllmGpuMemoryNearLimit"].expr and rules["VllmGpuMemoryNearLimit"].hold == "2m"
    assert rules["VllmServerDown"].expr == 'up{job="llm"} == 0'
    assert "HostOomKill" not in rules


@needs_promtool
@pytest.mark.parametrize("version", VERSIONS)
def test_promtool_check_rules(tmp_path, version):
    for exporter in GpuExporter:
        f = tmp_path / f"rules-{exporter.value}.yml"
        f.write_text(render_prometheus(AlertSettings(vllm_version=version, gpu_exporter=exporter)))
        p = subprocess.run([PROMTOOL, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "SUCCESS: 8 rules found" in p.stdout


def _annotations(rule, labels, value):
    def fill(text):
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
        return text.replace("{{ $value | humanizePercentage }}", value).replace("{{ $value | humanize }}", value)

    return {"summary": fill(rule.summary), "description": fill(rule.description)}


def _alert_test(rule, series, eval_time, labels, value, *, interval="1m"):
    return {
        "interval": interval,
        "input_series": series,
        "alert_rule_test": [
            {
                "eval_time": eval_time,
                "alertname": rule.name,
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": rule.severity, "source": "oomguard", **labels},
                        "exp_annotations": _annotations(rule, labels, value),
                    }
                ],
            },
            {"eval_time": "0m", "alertname": rule.name, "exp_alerts": []},  # pending, not firing, before its hold time
        ],
    }


@needs_promtool
@pytest.mark.parametrize(
    "version, metric",
    [
        ("0.9.1", "vllm:gpu_cache_usage_perc"),
        ("0.10.2", "vllm:gpu_cache_usage_perc"),
        ("0.10.2", "vllm:kv_cache_usage_perc"),
        ("0.32.0", "vllm:kv_cache_usage_perc"),
    ],
)
def test_promtool_alerts_fire_on_synthetic_series(tmp_path, version, metric):
    settings = AlertSettings(vllm_version=version)
    rules = {r.name: r for r in alert_rules(settings)}
    (tmp_path / "rules.yml").write_text(render_prometheus(settings))
    inst = {"instance": "gpu-box:8000", "model_name": "qwen"}
    tests = [
        _alert_test(
            rules["VllmKvCacheNearlyFull"],
            [{"series": f'{metric}{{instance="gpu-box:8000",model_name="qwen",engine="0"}}', "values": "0.95x15"}],
            "7m",
            inst,
            "95%",
        ),
        _alert_test(
            rules["VllmGpuMemoryNearLimit"],
            [
                {"series": 'DCGM_FI_DEV_FB_USED{instance="gpu-box:9400",gpu="3"}', "values": "23400x15"},
                {"series": 'DCGM_FI_DEV_FB_FREE{instance="gpu-box:9400",gpu="3"}', "values": "600x15"},
            ],
            "7m",
            {"instance": "gpu-box:9400", "gpu": "3"},
            "97.5%",
        ),
        _alert_test(
            rules["VllmPreemptionsRising"],
            [
                {
                    "series": 'vllm:num_preemptions_total{instance="gpu-box:8000",model_name="qwen",engine="0"}',
                    "values": "0+6x30",
                }
            ],
            "20m",
            inst,
            "100m",
        ),
        _alert_test(
            rules["VllmServerDown"],
            [{"series": 'up{job="vllm",instance="gpu-box:8000"}', "values": "0x10"}],
            "3m",
            {"instance": "gpu-box:8000", "job": "vllm"},
            "0",
        ),
    ]
    (tmp_path / "test.yml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests})
    )
    p = subprocess.run(
        [PROMTOOL, "test", "rules", "test.yml"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout + p.stderr


def test_grafana_dashboard_structure():
    for version in VERSIONS:
        d = json.loads(render_grafana(AlertSettings(vllm_version=version)))
        assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36
        assert d["uid"] and d["title"] and isinstance(d["panels"], list)
        assert [v["name"] for v in d["templating"]["list"]] == ["datasource"]
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)) >= 8
        for p in d["panels"]:
            assert p["type"] in ("timeseries", "stat")
            assert set(p["gridPos"]) == {"x", "y", "w", "h"} and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
            assert p["datasource"]["uid"] == "${datasource}"
            assert p["targets"] and all(t["expr"].strip() and t["refId"] for t in p["targets"])
        kv = next(p for p in d["panels"] if p["title"] == "KV cache usage")
        names = vllm_series(version).kv_usage
        assert all(n in kv["targets"][0]["expr"] for n in names)
        assert kv["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 0.9


@needs_promtool
def test_dashboard_queries_are_valid_promql(tmp_path):
    """promtool parses every panel query (as a recording rule); Grafana's $__rate_interval becomes 5m."""
    for version in VERSIONS:
        d = dashboard(AlertSettings(vllm_version=version))
        exprs = [t["expr"].replace("$__rate_interval", "5m") for p in d["panels"] for t in p["targets"]]
        rules = {
            "groups": [{"name": "dash", "rules": [{"record": f"dash:q{i}", "expr": e} for i, e in enumerate(exprs)]}]
        }
        f = tmp_path / "dash.yml"
        f.write_text(yaml.safe_dump(rules))
        p = subprocess.run([PROMTOOL, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, (version, p.stdout + p.stderr)


def test_cli_alerts(tmp_path):
    def run(*a):
        cmd = [sys.executable, "-m", "oomguard.cli.main", "export", "alerts", *a]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)

    p = run("--vllm-version", "0.10.2")
    assert p.returncode == 0 and "vllm:gpu_cache_usage_perc" in p.stdout and "vllm:kv_cache_usage_perc" in p.stdout
    p = run("--format", "grafana", "--gpu-exporter", "nvidia-smi", "-o", str(tmp_path / "d.json"))
    assert p.returncode == 0 and "nvidia_smi_memory_used_bytes" in (tmp_path / "d.json").read_text()
    p = run("--kv-threshold", "1.5")
    assert p.returncode == 2 and "fraction" in p.stderr
    p = run("--kv-for", "five minutes")
    assert p.returncode == 2
    p = run("--vllm-version", "banana")
    assert p.returncode == 2 and "not a vLLM version" in p.stderr
    # the shared validation of every command (issue 17): a release oomguard has no table for is refused
    p = run("--vllm-version", "9.9")
    assert p.returncode == 2 and "--vllm-version" in p.stderr and len(p.stderr.strip().splitlines()) == 1
