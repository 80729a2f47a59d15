"""benchmarks/plan_everywhere.py (issue 18: every popular config gets a plan): the GPU choice and
one real CLI run per outcome. The full run over the catalog and tests/ lives in the benchmark."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("plan_everywhere", ROOT / "benchmarks" / "plan_everywhere.py")
pe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pe)


def test_gpu_choice_leaves_room_for_a_kv_cache():
    assert pe.gpu_for(1.1) == ("H100", 1)
    assert pe.gpu_for(130) == ("H100", 4)
    assert pe.gpu_for(900) == ("B200", 8)


def test_a_catalog_model_is_planned_and_a_refusal_says_why():
    ok = pe.plan_one("Qwen/Qwen3-0.6B", 1.1)
    assert ok["level"] == "native-exact" and ok["rc"] == 0
    refused = pe.plan_one("meta-llama/Llama-3.2-11B-Vision-Instruct", 20)
    assert refused["level"] == "refused" and refused["rc"] == 3 and "0.10.2" in refused["why"]


def test_every_config_under_tests_is_found():
    found = {p.name for p in pe.test_configs()}
    assert "transformers-internvl-defaults" in found and len(found) >= 15
