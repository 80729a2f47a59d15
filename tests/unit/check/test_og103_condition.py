"""OG103 (and fit's S2 edit) speak only when the whole-prompt step matters (issue 12, second pass):
V0 launches that started with a step that fits stay quiet; S2 (TP 8 on PCIe) and a step larger than
the room outside the budget are flagged."""

from __future__ import annotations

import os

from oomguard.check.context import CheckOptions
from oomguard.check.report import check_target
from oomguard.fit.goalfix import headroom_outside_budget, s2_option, unchunked_step_matters
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.planner import plan_launch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _check(tmp_path, text, gpu, version):
    p = tmp_path / "start_api.sh"
    p.write_text(text)
    return check_target(CheckOptions(version=version, gpu=gpu), path=str(p))


def _rules(rep):
    return {f.rule: f for f in rep.findings}


def test_v0_launch_whose_step_fits_is_quiet(tmp_path):
    # vllm#10517 (S001): Llama-3.1-8B on one RTX 3090 at 20k, V0, started
    rep = _check(tmp_path, "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 20000 --gpu-memory-utilization 0.9\n", "RTX-3090", "0.6.4.post1")
    assert "OG103" not in _rules(rep)


def test_s2_on_pcie_is_flagged_with_its_reason(tmp_path):
    text = "vllm serve codellama/CodeLlama-13b-Instruct-hf --tensor-parallel-size 8 --gpu-memory-utilization 0.8 --max-model-len 8192\n"
    f = _rules(_check(tmp_path, text, "RTX-3090", "0.6.6"))["OG103"]
    assert f.numbers["risk"] == "pcie-nccl" and "PCIe" in f.message
    assert "OG103" not in _rules(_check(tmp_path, text, "RTX-3090", None))  # chunked prefill by default


def test_same_s2_launch_on_nvlink_cards_is_quiet(tmp_path):
    text = "vllm serve codellama/CodeLlama-13b-Instruct-hf --tensor-parallel-size 8 --gpu-memory-utilization 0.8 --max-model-len 8192\n"
    assert "OG103" not in _rules(_check(tmp_path, text, "A100-80GB", "0.6.6"))


def test_step_larger_than_the_room_outside_the_budget_matters():
    m, g = load_model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("RTX-3090")
    base = {"max_model_len": 20000, "gpu_memory_utilization": 0.9}
    p = plan_launch(m, g, base, {}, version="0.6.4.post1")
    one = plan_launch(m, g, {**base, "max_num_seqs": 1}, {}, version="0.6.4.post1")
    assert unchunked_step_matters(p, one) is None
    tight = {**base, "gpu_memory_utilization": 0.95}  # leaves 1.2 GiB outside, the step is ~2.3 GiB
    p2 = plan_launch(m, g, tight, {}, version="0.6.4.post1")
    one2 = plan_launch(m, g, {**tight, "max_num_seqs": 1}, {}, version="0.6.4.post1")
    assert max(r.activation.bytes for r in one2.ranks) > headroom_outside_budget(p2)
    assert unchunked_step_matters(p2, one2) in ("headroom", "fails")


def test_fit_gives_no_s2_edit_where_check_is_quiet():
    m, g = load_model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("RTX-3090")
    flags = {"max_model_len": 20000, "gpu_memory_utilization": 0.9}

    def planner(f, env):
        return plan_launch(m, g, f, env, version="0.6.4.post1")

    assert s2_option(planner, flags, {}, planner(flags, {})) is None
