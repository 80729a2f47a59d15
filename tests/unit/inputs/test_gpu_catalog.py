"""The GPU catalog as data: every row complete and sourced, the names users type, and the capabilities
the memory model reads from it (bf16 on ROCm, FP8 per target, interconnect defaults), through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oomguard.inputs.hardware import _norm, catalog_rows, lookup_gpu
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[3]
DTYPES = {"bfloat16", "float16", "float32"}


def test_every_row_is_complete_and_names_its_source():
    rows = catalog_rows()
    assert len(rows) >= 85
    for r in rows:
        assert r["total_source"] in ("log", "derived"), r["name"]
        assert r["source"] and r["source"].split(":")[0] in ("log", "derived", "search"), r["name"]
        assert 4 <= r["total_gib"] <= 300 and set(r["dtypes"]) <= DTYPES and r["dtypes"], r["name"]
        assert r["fp8"] in ("native", "weight-only", "none") and r["fp4"] in ("nvfp4", "mxfp4", "none"), r["name"]
        assert r["interconnect"] in ("nvswitch", "mnnvl", "nvlink-pairs", "xgmi", "c2c", "pcie", "roce", "xe-link", "none"), r["name"]
        assert r["platform"] in ("cuda", "rocm", "hpu", "xpu")


def test_no_two_cards_answer_to_the_same_name():
    seen: dict[str, str] = {}
    for r in catalog_rows():
        for n in [r["name"], *r.get("aliases", [])]:
            assert seen.setdefault(_norm(n), r["name"]) == r["name"], (n, seen[_norm(n)], r["name"])


@pytest.mark.parametrize("name,card", [
    ("MI210", "MI210"), ("mi250x", "MI250X"), ("AMD Instinct MI300X", "MI300X"), ("MI325X", "MI325X"), ("MI355X", "MI355X"),
    ("MI300A", "MI300A"), ("W7900", "Radeon-Pro-W7900"), ("AMD Radeon PRO W7900", "Radeon-Pro-W7900"),
    ("4090", "RTX-4090"), ("RTX4090", "RTX-4090"), ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("H100-SXM", "H100-SXM-80GB"),
    ("a100 80g", "A100-SXM4-80GB"), ("A100 80GB PCIe", "A100-PCIE-80GB"), ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB"),
    ("H100 PCIe", "H100-PCIE-80GB"), ("H100 NVL", "H100-NVL-94GB"), ("H200", "H200-141GB"), ("H200 NVL", "H200-NVL-141GB"),
    ("H20", "H20"), ("H800", "H800-SXM-80GB"), ("A800", "A800-SXM4-80GB"), ("B200", "B200-180GB"), ("GB200", "GB200"),
    ("B300", "B300-288GB"), ("GB300", "GB300"), ("GB10", "GB10"), ("DGX Spark", "GB10"), ("Jetson AGX Orin", "Jetson-AGX-Orin-32GB"),
    ("RTX PRO 6000", "RTX-PRO-6000-Blackwell"), ("RTX 5090", "RTX-5090"), ("5080", "RTX-5080"), ("3060", "RTX-3060"),
    ("2080 Ti", "RTX-2080-Ti"), ("A10G", "A10G"), ("A16", "A16"), ("L20", "L20"), ("L40S", "L40S"), ("T4", "T4"),
    ("Gaudi 2", "Gaudi2"), ("Gaudi3", "Gaudi3"), ("Intel Data Center GPU Max 1550", "Max-1550"),
    ("H20-3e", "H20-141GB"), ("H20 141G", "H20-141GB"), ("RTX 5060", "RTX-5060"), ("RX 9070 XT", "RX-9070-XT"),
    ("Arc B580", "Arc-B580"),
])
def test_the_names_users_type(name, card):
    assert lookup_gpu(name).name == card


def test_amd_targets_run_bf16_and_their_fp8_is_per_target():
    for name in ("MI210", "MI250X", "MI300X", "MI325X", "MI355X", "W7900"):
        g = lookup_gpu(name)
        assert g.platform == "rocm" and g.dtypes[0] == "bfloat16" and not g.no_bf16, name
    assert lookup_gpu("MI300X").fp8 == "native" and lookup_gpu("MI355X").fp4 == "mxfp4"
    assert lookup_gpu("MI250X").fp8 == "none" and lookup_gpu("W7900").fp8 == "none"
    # vLLM's capability for AMD targets comes from the gfx name (platforms/rocm.py::_capability_from_gcn_arch)
    assert [lookup_gpu(n).cc_major_minor for n in ("MI210", "MI300X", "MI355X", "W7900")] == [(9, 0), (9, 4), (9, 5), (11, 0)]


def test_interconnect_defaults():
    assert lookup_gpu("H100").nvlink and lookup_gpu("H100").nvls
    assert not lookup_gpu("H100 NVL").nvlink  # bridged pairs: not fully connected beyond two GPUs
    assert not lookup_gpu("A100 80GB PCIe").nvlink and lookup_gpu("A100 80GB PCIe").p2p
    assert not lookup_gpu("RTX 4090").p2p and lookup_gpu("RTX PRO 6000").p2p
    assert lookup_gpu("MI300X").nvlink and not lookup_gpu("MI300X").nvls
    assert lookup_gpu("MI300X").custom_all_reduce and not lookup_gpu("MI250X").custom_all_reduce


def test_docs_gpus_md_is_generated_from_the_table():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_gpus_doc.py"), "--check"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def _plan(*args) -> dict:
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--max-model-len", "8192", "--json", *args, env={"HF_HUB_OFFLINE": "1"})
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def test_qwen3_8b_weighs_the_same_on_an_mi300x_as_on_an_h100_through_the_cli():
    amd, nv = _plan("--gpu", "MI300X"), _plan("--gpu", "H100")
    assert amd["per_gpu"]["weights_gib"] == nv["per_gpu"]["weights_gib"] < 16
    assert amd["starts"]
    explicit = _plan("--gpu", "MI300X", "--dtype", "bfloat16")
    assert explicit["starts"] and explicit["per_gpu"]["weights_gib"] == nv["per_gpu"]["weights_gib"]


def test_bf16_is_still_refused_on_a_t4_through_the_cli():
    d = _plan("--gpu", "T4", "--max-model-len", "4096", "--dtype", "bfloat16")
    assert not d["starts"] and "Bfloat16 is only supported" in d["error"] and "T4" in d["error"]


def test_rocm_ledger_differences():
    from oomguard.inputs.model_config import load_model
    from oomguard.model.planner import plan_launch

    m = load_model("Qwen/Qwen3-8B")
    mi250 = plan_launch(m, lookup_gpu("MI250X"), {"max_model_len": 8192, "tensor_parallel_size": 2}, num_gpus=2)
    mi300 = plan_launch(m, lookup_gpu("MI300X"), {"max_model_len": 8192, "tensor_parallel_size": 2}, num_gpus=2)
    assert "custom all-reduce off (not on this target" in mi250.tight_rank.non_torch.formula
    assert "custom all-reduce " in mi300.tight_rank.non_torch.formula and "off" not in mi300.tight_rank.non_torch.formula.split("custom all-reduce")[1][:5]
    assert any("ROCm (gfx90a)" in n for n in mi250.messages)
    # MLA with an fp8 KV cache: FlashMLA's 64-token block on Hopper, Triton MLA's 16 on ROCm
    ds = load_model("deepseek-ai/DeepSeek-V3")
    kw = {"max_model_len": 8192, "kv_cache_dtype": "fp8", "tensor_parallel_size": 8}
    h = plan_launch(ds, lookup_gpu("H200"), kw, num_gpus=8)
    a = plan_launch(ds, lookup_gpu("MI300X"), kw, num_gpus=8)
    assert h.layout.block_size == 64 and a.layout.block_size == 16


def test_gaudi_plans_say_they_are_estimates():
    d = _plan("--gpu", "Gaudi2")
    assert any("estimate" in n for n in d.get("messages", d.get("notes", [])))


# Issue 18, item 6: every card family vLLM users report. Each name resolves to one card whose
# memory, compute capability and interconnect come from the table (none falls through to the
# custom Ampere stand-in that --gpu-memory-gib alone gets).
ISSUE_18_NAMES = (
    "V100-16GB", "V100-32GB", "T4", "A100-40GB", "A100-80GB", "A800", "H100", "H100 PCIe", "H100 NVL", "H800", "H20", "H200",
    "GH200", "B200", "B300", "GB200", "GB300",
    "RTX 2060", "RTX 2060 Super", "RTX 2070", "RTX 2080", "RTX 2080 Ti", "RTX 3050", "RTX 3060", "RTX 3060 Ti", "RTX 3070",
    "RTX 3080", "RTX 3090", "RTX 3090 Ti", "RTX 4060", "RTX 4060 Ti 8GB", "RTX 4060 Ti 16GB", "RTX 4070", "RTX 4070 Ti Super",
    "RTX 4080", "RTX 4090", "RTX 5050", "RTX 5060", "RTX 5060 Ti 8GB", "RTX 5060 Ti 16GB", "RTX 5070", "RTX 5070 Ti",
    "RTX 5080", "RTX 5090",
    "RTX PRO 2000", "RTX PRO 4000", "RTX PRO 4500", "RTX PRO 5000", "RTX PRO 5000 72GB", "RTX PRO 6000",
    "A10", "A10G", "L4", "L20", "L40", "L40S", "GB10",
    "MI210", "MI250", "MI250X", "MI300A", "MI300X", "MI325X", "MI355X", "W7800", "W7900",
    "Gaudi 2", "Gaudi 3", "Max 1550", "Max 1100", "Arc Pro B60",
)


@pytest.mark.parametrize("name", ISSUE_18_NAMES)
def test_every_card_the_issue_lists_resolves_with_memory_capability_and_interconnect(name):
    g = lookup_gpu(name)
    assert g.name != "custom" and g.total_source in ("log", "derived"), name
    assert 4 * 2**30 <= g.total_bytes <= 300 * 2**30, name
    # Gaudi and XPU have no CUDA-style capability (their platforms report none: "0.0" in the table)
    assert g.cc_major_minor >= (6, 0) if g.platform in ("cuda", "rocm") else g.cc_major_minor == (0, 0), name
    assert g.interconnect in ("nvswitch", "mnnvl", "nvlink-pairs", "xgmi", "c2c", "pcie", "roce", "xe-link", "none"), name


def test_a_board_sold_in_two_sizes_needs_its_size():
    with pytest.raises(Exception, match="ambiguous"):
        lookup_gpu("RTX 5060 Ti")
    assert lookup_gpu("RTX 5060 Ti", memory_gib=7.5).name == "RTX-5060-Ti-8GB"
    assert lookup_gpu("RTX 5060 Ti", memory_gib=15.45).name == "RTX-5060-Ti"
