"""Advice that costs throughput or KV on a launch that starts is a note, not an alarm (issue 12:
0 warnings on launches that started); the same advice warns where the planned launch fails."""

from __future__ import annotations

import os

from oomguard.check.context import CheckOptions
from oomguard.check.report import check_target

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MM = "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 8192 --limit-mm-per-prompt '{\"image\":16,\"video\":4}'\n"


def _finding(tmp_path, text, gpu, rule, version=None):
    p = tmp_path / "start_api.sh"
    p.write_text(text)
    rep = check_target(CheckOptions(gpu=gpu, version=version), path=str(p))
    return rep, next((f for f in rep.findings if f.rule == rule), None)


def test_mm_budget_is_a_note_when_the_launch_starts(tmp_path):
    rep, f = _finding(tmp_path, MM, "A100-80GB", "OG803")
    assert rep.ctx.plan.starts and f.severity.value == "info" and "KV tokens" in f.message


def test_mm_budget_warns_when_the_launch_fails_for_memory(tmp_path):
    rep, f = _finding(tmp_path, MM, "T4", "OG803")
    assert not rep.ctx.plan.starts and f.severity.value == "warning" and "will not start" in f.message


def test_fp8_on_ampere_is_a_throughput_note(tmp_path):
    # runpod-workers/worker-vllm#213: the FP8 checkpoint served on an A100
    rep, f = _finding(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B-FP8 --kv-cache-dtype fp8 --max-model-len 8192\n", "A100-80GB", "OG804", "0.10.1")
    assert f.severity.value == "info" and not rep.warnings and not rep.errors
