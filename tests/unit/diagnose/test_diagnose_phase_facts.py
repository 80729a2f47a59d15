"""The phase of a GPU OOM whose report prints none (issue 16): torch's numbers against the model's weights.

Each test writes one report shape (a torch OOM line alone, no vLLM phase line, no traceback) and runs the real
diagnose on it, with the model from the bundled catalog (src/oomguard/data/models) and the shipped weights: the
phase and the fact that decided it are asserted, and what would settle it when the report leaves it open."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomguard.diagnose import features as feat
from oomguard.diagnose import phase_facts
from oomguard.diagnose.diagnosis import diagnose, prepare
from oomguard.diagnose.parsers.errors import _oom_numbers


def _oom(alloc_mib: float, total: float, free_mib: float, in_use: float, torch_gib: float, procs: str = "") -> str:
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc_mib:.2f} MiB. GPU 0 has a total "
            f"capacity of {total:.2f} GiB of which {free_mib:.2f} MiB is free. {procs}Including non-PyTorch memory, "
            f"this process has {in_use:.2f} GiB memory in use. Of the allocated memory {torch_gib:.2f} GiB is "
            "allocated by PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated.\n")


def _run(tmp_path: Path, text: str, **options):  # a Diagnosis
    p = tmp_path / "report.log"
    p.write_text(text, encoding="utf-8")
    return diagnose([str(p)], **options)


def _features(verdict) -> set[str]:
    """The features scored for the verdict (those with a weight for its class)."""
    return {c["feature"] for c in verdict.cues}


def _extracted(tmp_path: Path, text: str, **options) -> dict[str, str]:
    """Every cue the report yields, whatever its weight: feature -> why."""
    p = tmp_path / "report.log"
    p.write_text(text, encoding="utf-8")
    prepared = prepare([str(p)], **options)
    return {c.feature: c.why for c in feat.extract(prepared.collector, prepared.context)}


def test_torchs_held_figures_are_read():
    n = _oom_numbers(_oom(224, 23.55, 150, 23.39, 22.9, "Process 4242 has 23.39 GiB memory in use. ").strip())
    assert n["torch_allocated_gib"] == pytest.approx(22.9) and n["processes_gib"] == pytest.approx((23.39,))
    assert phase_facts.held_gib(n) == (pytest.approx(22.9), "allocated by PyTorch")
    assert phase_facts.others_gib(n) == pytest.approx(0.0)  # the only listed process is this one


def test_a_garbled_held_figure_keeps_the_oom_line(tmp_path):
    text = _oom(224, 23.55, 150, 23.39, 22.9).replace("22.90 GiB is allocated", "22.9.1 GiB is allocated")
    d = _run(tmp_path, text)
    assert d.verdicts and d.verdicts[0].cls.value in ("weights-oom", "profile-oom", "cudagraph-oom", "runtime-oom")


def test_held_below_the_weights_is_an_oom_while_loading(tmp_path):
    # Qwen2.5-32B is ~61 GiB in bf16 (catalog config); the process held 22.9 GiB when it died: still loading.
    d = _run(tmp_path, _oom(224, 23.55, 150, 23.39, 22.9), model="Qwen/Qwen2.5-32B")
    v = d.verdicts[0]
    assert v.cls.value == "weights-oom"
    assert "size:held-below-weights" in _features(v)
    family = v.to_dict()["family"]
    assert any(c["feature"] == "size:held-below-weights" and c["margin"] > 0 for c in family["decided_by"])


def test_held_well_above_the_weights_is_past_loading(tmp_path):
    # Qwen2.5-7B is ~14.2 GiB (config); 21.5 GiB held on a 23.5 GiB card: the weights were in, something later grew.
    d = _run(tmp_path, _oom(1536, 23.55, 300, 22.2, 21.5), model="Qwen/Qwen2.5-7B")
    v = d.verdicts[0]
    assert v.cls.value in ("profile-oom", "cudagraph-oom", "runtime-oom")
    assert "size:held-above-weights" in _features(v)
    # 1.5 GiB is larger than any Qwen2.5-7B weight tensor (its 1.02 GiB embedding): an activation
    cues = _extracted(tmp_path, _oom(1536, 23.55, 300, 22.2, 21.5), model="Qwen/Qwen2.5-7B")
    assert "from its config" in cues["size:alloc-above-tensor"]


def test_other_processes_holding_the_device_are_a_fact(tmp_path):
    text = _oom(508, 23.53, 329, 1.05, 0.6, "Process 35156 has 22.14 GiB memory in use. ")
    cues = _extracted(tmp_path, text)
    assert "size:others-hold" in cues and "22.14 GiB" in cues["size:others-hold"]


def test_an_open_phase_names_what_would_settle_it(tmp_path):
    d = _run(tmp_path, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    v = d.verdicts[0]
    assert v.cls.value in ("weights-oom", "profile-oom", "cudagraph-oom", "runtime-oom", "startup-free-memory")
    assert v.settle and "--model" in v.settle and "torch's whole out-of-memory message" in v.settle
    assert "--gpu" in v.settle


def test_with_the_facts_known_the_settle_line_asks_only_for_the_log_lines(tmp_path):
    d = _run(tmp_path, _oom(224, 23.55, 150, 23.39, 22.9), model="Qwen/Qwen2.5-32B")
    settle = d.verdicts[0].settle or ""
    assert "--model" not in settle and "--gpu" not in settle and "log lines before the error" in settle


def test_a_release_sibling_in_the_catalog_sizes_the_weights():
    assert phase_facts.catalog_sibling("meta-llama/Llama-4-Scout-17B-16E") == "meta-llama/Llama-4-Scout-17B-16E-Instruct"
    assert phase_facts.catalog_sibling("Llama-2-70B") == "meta-llama/Llama-2-70b-hf"
    assert phase_facts.catalog_sibling("TheBloke/Llama-2-70B-AWQ") is None  # a quantization: other bytes
    assert phase_facts.catalog_sibling("no-such-model-7B") is None


def test_scouts_weights_come_from_its_sibling_not_its_active_count(tmp_path):
    # "17B-16E" names the active parameters; the 109B of weights over TP 4 do not fit 48 GB cards.
    d = _run(tmp_path, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n",
             model="meta-llama/Llama-4-Scout-17B-16E", gpu="L40S", launch_text="vllm serve x --tensor-parallel-size 4")
    assert d.context.config_weights_gib and d.context.config_weights_gib > 180
    assert "ctx:weights-exceed-gpu" in _features(d.verdicts[0]) or d.verdicts[0].cls.value == "weights-oom"


def test_cuda_graph_pools_say_capture_had_begun(tmp_path):
    text = ("ERROR 03-31 15:19:44 [async_llm_engine.py:68] torch.OutOfMemoryError: CUDA out of memory. Tried to "
            "allocate 318.00 MiB. GPU 0 has a total capacity of 23.53 GiB of which 315.44 MiB is free. Including "
            "non-PyTorch memory, this process has 23.20 GiB memory in use. Of the allocated memory 21.29 GiB is "
            "allocated by PyTorch, with 46.00 MiB allocated in private pools (e.g., CUDA Graphs), and 231.26 MiB is "
            "reserved by PyTorch but unallocated.\n")
    assert "size:graph-pools" in _extracted(tmp_path, text)
    v = _run(tmp_path, text).verdicts[0]
    assert v.cls.value in ("cudagraph-oom", "runtime-oom")


def test_the_old_wording_without_a_free_figure_still_gives_what_was_held():
    n = _oom_numbers("RuntimeError: XPU out of memory. Tried to allocate 130.00 MiB (GPU 0; 15.11 GiB total capacity; "
                     "11.09 GiB already allocated; 11.23 GiB reserved in total by PyTorch)")
    assert n["allocated_gib"] == pytest.approx(11.09) and n["total_gib"] == pytest.approx(15.11)


def test_bits_per_weight_in_the_name_size_the_weights():
    from oomguard.diagnose.context import bytes_per_param_from_name

    assert bytes_per_param_from_name("Dracones/c4ai-command-r-plus_exl2_5.5bpw") == pytest.approx(5.5 / 8)


def test_gpus_the_launch_leaves_unused_are_a_fact(tmp_path):
    text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 298.00 MiB\n"
    assert "ctx:gpus-unused" in _extracted(tmp_path, text, gpu="4x RTX 6000 Ada 48 GB")
    assert "ctx:gpus-unused" in _extracted(tmp_path, text, gpu="2 GPUs")
    split = _extracted(tmp_path, text, gpu="4x RTX 6000 Ada 48 GB", launch_text="vllm serve m --tensor-parallel-size 4")
    assert "ctx:gpus-unused" not in split
    # a model far smaller than one card needs no second one
    small = _extracted(tmp_path, text, gpu="4x RTX 6000 Ada 48 GB", model="Qwen/Qwen2.5-0.5B-Instruct")
    assert "ctx:gpus-unused" not in small

