"""Llama-3.2-Vision (mllama) on the releases that serve it (up to 0.10.2, V0 only), checked against
calibration record S005 (vllm PR #12126: H100 79.22 GiB, util 0.9, max_model_len 65,536, 128
sequences, eager; weights 19.86 GiB, activation 36.63 GiB, KV pool 14.65 GiB = 6001 blocks); after
0.10.2, vLLM's own refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomguard.errors import UnsupportedModelError
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.kv_spec import layer_kv_specs, per_token_bytes
from oomguard.model.planner import plan_launch
from oomguard.units import GiB
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[3]
CFG = ROOT / "src" / "oomguard" / "data" / "models" / "meta-llama__Llama-3.2-11B-Vision-Instruct"
S005 = next(json.loads(line) for line in (ROOT / "tests" / "data" / "calibration" / "startup.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line)["id"] == "S005")
FLAGS = {"max_model_len": 65536, "max_num_seqs": 128, "enforce_eager": True, "gpu_memory_utilization": 0.9}


@pytest.fixture(scope="module")
def model():
    return load_model(str(CFG))


def _plan(model, version="0.7.0", **flags):
    gpu = lookup_gpu(None, memory_gib=S005["gpu_total_mem_gib"])
    return plan_launch(model, gpu, dict(FLAGS, **flags), version=version)


def test_weights_and_the_uniform_v0_cache_match_s005(model):
    assert model.family == "mllama" and model.v0_only
    plan = _plan(model)
    r = plan.tight_rank
    assert abs(r.weights.bytes / GiB - S005["weights_gib"]) / S005["weights_gib"] < 0.002  # 19.875 vs 19.86 logged
    # V0: all 40 layers (8 of them cross-attention) in one per-token cache: 40 × 2 × 8 × 128 × 2 B
    assert per_token_bytes(layer_kv_specs(model, tp=1, kv_cache_dtype="auto", dtype_bytes=2)) == 163_840


def test_the_profile_and_the_pool_match_s005(model):
    plan = _plan(model)
    r = plan.tight_rank
    assert plan.settings.engine == "V0"
    assert abs(r.activation.bytes / GiB - S005["activation_peak_gib"]) < 0.05  # the estimate is fitted on this record
    assert r.activation.low < r.activation.bytes < r.activation.high
    assert abs(plan.num_gpu_blocks - S005["num_gpu_blocks"]) / S005["num_gpu_blocks"] < 0.01  # 6019 vs 6001 logged
    assert plan.starts


def test_the_image_peak_grows_with_the_sequences_and_the_default_256_does_not_fit(model):
    a16 = _plan(model, max_num_seqs=16).tight_rank.activation.bytes
    a128 = _plan(model).tight_rank.activation.bytes
    assert a128 == pytest.approx(8 * a16, rel=0.01)
    plan = _plan(model, max_num_seqs=256, max_model_len=1024)  # 73 GiB of profile on an 80 GB card
    assert not plan.starts


def test_releases_before_07_say_the_profile_over_counted(model):
    r = _plan(model, version="0.6.6").tight_rank.activation
    assert "over-counted" in r.formula and r.high >= 2 * r.bytes


def test_v1_releases_before_011_plan_it_on_v0(model):
    plan = _plan(model, version="0.9.2")
    assert plan.settings.engine == "V0" and any("V0 encoder-decoder runner" in n for n in plan.settings.notes)


def test_after_0102_it_is_vllms_own_refusal(model):
    with pytest.raises(UnsupportedModelError, match="last served by 0.10.2"):
        _plan(model, version="0.11.0")
    out = run_cli("plan", "--model", str(CFG), "--gpu", "H100", "--vllm-version", "0.32.0")
    assert out.returncode == 3 and "Traceback" not in out.stderr
    line = out.stderr.strip()
    assert "\n" not in line and "0.10.2" in line and "--vllm-version" in line
    out = run_cli("plan", "--model", str(CFG), "--gpu", "H100", "--vllm-version", "0.10.2")
    assert out.returncode in (0, 1), out.stderr  # planned (it may or may not fit at the defaults)


def test_the_fitted_image_peak_and_its_range_against_the_live_tensor_count():
    from oomguard.model.architectures import mllama

    vis = json.loads((CFG / "config.json").read_text())["vision_config"]
    assert mllama.image_tokens_per_seq(vis) == 4 * 1608
    local, glob = mllama.image_live_tensor_bytes(vis)
    assert 0.30 < local / GiB < 0.32 and 0.37 < glob / GiB < 0.39
    lo, hi = (mllama.IMAGE_PEAK_PER_SEQ * r for r in mllama.RANGE)
    assert lo < mllama.IMAGE_PEAK_PER_SEQ < local < glob < hi
