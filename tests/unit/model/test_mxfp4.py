"""MXFP4 MoE weights: backend by GPU and release, padding by backend (fused_moe/oracle/mxfp4.py)."""

import pytest

from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.mxfp4 import mxfp4_backend, mxfp4_padded_sizes
from oomguard.model.planner import plan_launch
from oomguard.units import GiB


@pytest.mark.parametrize(
    "version, cc, kw, want",
    [
        ((0, 14, 1), (9, 0), {}, "triton"),
        ((0, 14, 1), (8, 0), {}, "marlin"),
        ((0, 33, 0), (10, 0), {}, "flashinfer_trtllm"),
        ((0, 31, 0), (12, 0), {}, "triton"),
        ((0, 32, 0), (12, 0), {}, "marlin"),
        ((0, 33, 0), (9, 0), {"moe_backend": "flashinfer_cutlass"}, "flashinfer_cutlass"),
        ((0, 14, 1), (9, 0), {"env": {"VLLM_MXFP4_USE_MARLIN": "1"}}, "marlin"),
        ((0, 33, 0), (9, 4), {"vendor": "amd"}, "rocm"),
        # triton_kernels is not in the wheel before 0.12 (vllm#27370 / #28788): Hopper takes Marlin
        ((0, 11, 0), (9, 0), {}, "marlin"),
        ((0, 10, 1), (9, 0), {}, "marlin"),
        ((0, 11, 0), (12, 0), {}, "marlin"),
        ((0, 11, 0), (9, 0), {"triton_kernels": True}, "triton"),
        ((0, 12, 0), (9, 0), {}, "triton"),
        ((0, 14, 1), (9, 0), {"triton_kernels": False}, "marlin"),
        ((0, 11, 0), (10, 0), {}, "flashinfer_trtllm"),
    ],
)
def test_backend_choice(version, cc, kw, want):
    assert mxfp4_backend(version, cc, **kw)[0] == want


def test_padding_rules_from_the_code():
    assert mxfp4_padded_sizes("marlin", 2880, 2880) == (3072, 2944)
    assert mxfp4_padded_sizes("flashinfer_trtllm", 2880, 2880) == (3072, 2944)
    assert mxfp4_padded_sizes("flashinfer_cutlass", 2880, 2880) == (2944, 2944)
    assert mxfp4_padded_sizes("rocm", 2880, 1440) == (3072, 1536)
    assert mxfp4_padded_sizes("triton", 2880, 720) == (2880, 768)


def test_logged_gpt_oss_120b_loads():
    """F021 (Triton, 0.14.1, H100): 64.38 GiB; F020 (Marlin, ~0.10.1, H100): 65.97 GiB."""
    m = load_model("openai/gpt-oss-120b")
    triton = plan_launch(m, lookup_gpu("H100"), {"max_model_len": 8192}, version="0.14.1").tight_rank.weights
    marlin = plan_launch(m, lookup_gpu("H100"), {"max_model_len": 8192}, version="0.10.1").tight_rank.weights
    assert triton.bytes / GiB == pytest.approx(64.38, rel=0.005)
    assert marlin.bytes / GiB == pytest.approx(65.97, rel=0.005)
    assert "triton" in triton.formula and "marlin" in marlin.formula


def test_matches_vllms_padding_rule():
    """Oracle: vLLM 0.32's mxfp4_round_up_hidden_size_and_intermediate_size (regenerate with
    tests/unit/model/gen_mxfp4_oracle.py); the Triton path's extra post-load padding is fitted."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "data" / "mxfp4_oracle_vllm-0.32.0.json").read_text())
    assert {c["backend"] for c in data["cases"]} >= {"marlin", "flashinfer_trtllm", "flashinfer_cutlass", "triton"}
    for c in data["cases"]:
        got = mxfp4_padded_sizes(c["backend"], c["hidden"], c["inter"], effective=False)
        assert got == (c["hidden_padded"], c["inter_padded"]), c
