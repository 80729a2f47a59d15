"""Which modules a checkpoint's ignore list keeps unquantized (model/quantization.py).

Meta's FP8 Llama-3.1-405B (fbgemm_fp8) keeps layers 0 and 125 whole, every self_attn and the LM
head in bf16; calibration record S078 logged 57.75 GiB per GPU at TP 8 (0.5.3)."""

import json
from pathlib import Path

from oomguard.inputs.model_config import load_model
from oomguard.model.planner import plan_launch
from oomguard.inputs.hardware import lookup_gpu
from oomguard.model.quantization import excluded_fraction, parse_quantization
from oomguard.units import GiB

FP8_405B = Path(__file__).resolve().parents[2] / "data" / "calibration" / "configs" / "meta-llama__Meta-Llama-3.1-405B-Instruct-FP8"


def test_fbgemm_fp8_is_channel_wise_fp8():
    q = parse_quantization({"quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}}, None, {})
    assert q.method == "fp8" and q.block_size is None and "fbgemm" in q.source


def test_ignore_lists_by_projection_and_by_whole_layer():
    attn = [f"model.layers.{i}.self_attn.{p}" for i in (1, 2) for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    assert excluded_fraction(attn, "attn", 4) == 0.5
    assert excluded_fraction(attn, "mlp", 4) == 0.0
    # one projection of a layer does not make the layer's attention unquantized
    assert excluded_fraction(["model.layers.3.self_attn.q_proj"], "attn", 4) == 0.0
    # a whole layer named: every category of it
    assert excluded_fraction(["model.layers.0", "model.layers.3"], "mlp", 4) == 0.5
    assert excluded_fraction(["model.layers.0"], "attn", 4) == 0.25
    # experts' projections are not the dense MLP's
    assert excluded_fraction(["model.layers.0.mlp.experts.0.gate_proj", "model.layers.0.mlp.experts.0.up_proj",
                              "model.layers.0.mlp.experts.0.down_proj"], "mlp", 4) == 0.0


def test_meta_405b_fp8_weights_per_gpu_at_tp8():
    m = load_model(str(FP8_405B))
    cfg = json.loads((FP8_405B / "config.json").read_text())
    assert len(cfg["quantization_config"]["modules_to_not_convert"]) == 2 * 7 + 124 * 4 + 1
    gpu = lookup_gpu("H100-SXM-80GB", None)
    plan = plan_launch(m, gpu, {"tensor_parallel_size": 8}, {"VLLM_USE_V1": "0"}, version="0.5.3", num_gpus=8)
    w = plan.tight_rank.weights.bytes / GiB
    # attention bf16 (126 × 71.3 M per rank × 2 B), MLPs fp8 except layers 0 and 125, bf16 embed and head
    assert abs(w - 56.72) < 0.05
    assert abs(w - 57.752) / 57.752 < 0.02  # S078, "Loading model weights took 57.7520 GB"


def test_mtp_layers_in_an_ignore_list_are_not_the_decoders():
    assert excluded_fraction(["mtp.layers.0*", "mtp*"], "attn", 40) == 0.0
    assert excluded_fraction(["mtp.layers.0.self_attn.q_proj", "mtp.layers.0.self_attn.k_proj",
                              "mtp.layers.0.self_attn.v_proj", "mtp.layers.0.self_attn.o_proj"], "attn", 40) == 0.0
