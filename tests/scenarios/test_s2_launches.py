"""S2's launches (8 × RTX 3090, utilization 0.95) through the real CLI: check and fit give the same
utilization and the same first edit, every edit keeps the headroom floor, host RAM counts only what
the release's engine allocates, and a command line vLLM rejects is not "predicted to start"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
S2 = ROOT / "tests" / "scenarios" / "s2" / "start_api.sh"
ENV = {"HF_HUB_OFFLINE": "1"}
FLOOR_GIB = 0.5  # fit/goalfix.headroom_floor on a 23.58 GiB card: max(2 %, 0.5 GiB)


@pytest.fixture
def s2_95(tmp_path) -> Path:
    p = tmp_path / "start_api.sh"
    p.write_text(S2.read_text().replace("--gpu-memory-utilization 0.8", "--gpu-memory-utilization 0.95"))
    return p


def _check(script, *args) -> dict:
    p = run_cli("check", str(script), "--gpu", "RTX-3090", "--format", "json", *args, env=ENV)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def _fit(script, *args) -> dict:
    p = run_cli("fit", "--from", str(script), "--gpu", "RTX-3090", "--format", "json", *args, env=ENV)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def _edits(candidate: dict) -> dict:
    return {e["dest"]: e["new"] for e in candidate.get("edit") or []}


def _fix(check: dict, rule: str) -> dict:
    f = next(x for x in check["findings"] if x["rule"] == rule)
    return {e["flag"].lstrip("-").replace("-", "_"): e["value"] for e in f["fix"]}


def test_on_0_10_check_and_fit_give_one_utilization(s2_95):
    check, fit = _check(s2_95, "--vllm-version", "0.10.0"), _fit(s2_95, "--vllm-version", "0.10.0")
    u_check = _fix(check, "OG303")["gpu_memory_utilization"]
    first = fit["candidates"][0]
    assert _edits(first) == {"gpu_memory_utilization": u_check}
    assert first["summary"]["margin_gib"] >= FLOOR_GIB


def test_on_0_6_fits_first_answer_is_checks_and_keeps_the_floor(s2_95):
    check, fit = _check(s2_95, "--vllm-version", "0.6.6"), _fit(s2_95, "--vllm-version", "0.6.6")
    og103 = _fix(check, "OG103")
    first = fit["candidates"][0]
    assert _edits(first) == og103 and og103["max_num_batched_tokens"] == 1024
    assert first["summary"]["margin_gib"] >= FLOOR_GIB
    for c in fit["candidates"]:
        assert c["summary"]["margin_gib"] >= FLOOR_GIB, c["command"]


@pytest.mark.parametrize("version", ["0.8.5", "0.10.0"])
def test_v1_releases_count_no_swap_space_in_host_ram(s2_95, version):
    # 8 workers × 4 GiB default swap would be 32 GiB pinned on V0; V1 (the default from 0.8) allocates none
    check = _check(s2_95, "--vllm-version", version, "--host-ram-gib", "40")
    assert not [f for f in check["findings"] if f["rule"] == "OG401"]
    assert "swap_space" not in check["host_ram"]["parts"]
    host = json.loads(run_cli("host", "--root", str(ROOT / "tests/fixtures/host/roots/two_numa_4x4090"), "--launch", str(s2_95),
                              "--vllm-version", version, "--host-ram-gib", "40", "--format", "json", env=ENV).stdout)
    assert not [f for f in host["findings"] if f["id"] in ("HOST010", "HOST011")]
    old = _check(s2_95, "--vllm-version", "0.6.6", "--host-ram-gib", "40")
    assert old["host_ram"]["parts"]["swap_space"] == 32.0  # V0 pins it


def test_a_rejected_command_line_is_not_predicted_to_start(s2_95):
    s2_95.write_text(s2_95.read_text().replace("--max-model-len 8192", "--max-model-len 8192 --swap-space 16"))
    check = _check(s2_95, "--vllm-version", "0.33.0")
    assert check["plan"]["starts"] and check["starts"] is False and check["refused_by"] == ["OG602"]
    text = run_cli("check", str(s2_95), "--gpu", "RTX-3090", "--vllm-version", "0.33.0", env=ENV).stdout
    verdict = text.splitlines()[1]
    assert verdict.startswith("predicted NOT to start: vLLM 0.33.0 rejects the command line")
    assert text.rstrip().endswith("the corrected launch passes oomguard check and is predicted to start.")


def test_no_scenario_jargon_in_what_the_user_reads(s2_95):
    for args in (("check", str(s2_95)), ("fit", "--from", str(s2_95))):
        for v in ("0.6.6", "0.10.0"):
            out = run_cli(*args, "--gpu", "RTX-3090", "--vllm-version", v, env=ENV).stdout
            assert "S2" not in out and "S1" not in out and "S3" not in out
