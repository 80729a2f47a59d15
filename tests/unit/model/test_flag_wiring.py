"""Every engine flag of every release is classified once; modelled flags move the plan,
unmodelled ones leave a note (model/flag_effects.py)."""

import functools
import json
from pathlib import Path

import pytest

import oomguard
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.flag_effects import MODELLED, NO_MEMORY_EFFECT, NOT_MODELLED, classify
from oomguard.model.planner import plan_launch
from oomguard.units import GiB

FLAGS_DIR = Path(oomguard.__file__).parent / "data" / "flags"


def _engine_dests() -> dict[str, str]:
    seen: dict[str, str] = {}
    for path in sorted(FLAGS_DIR.glob("vllm-*.json")):
        for f in json.loads(path.read_text())["flags"]:
            if f.get("group", "engine") != "frontend":
                seen.setdefault(f["dest"], path.name)
    return seen


def test_every_engine_flag_of_every_release_is_classified_once():
    dests = _engine_dests()
    assert len(dests) > 250
    missing = sorted(d for d in dests if classify(d) is None)
    assert not missing, f"flags parsed but neither modelled nor explained: {missing}"
    tables = [set(MODELLED), set(NO_MEMORY_EFFECT), set(NOT_MODELLED)]
    assert not (tables[0] & tables[1] or tables[0] & tables[2] or tables[1] & tables[2])
    assert all(len(r) > 10 for t in (MODELLED, NO_MEMORY_EFFECT, NOT_MODELLED) for r in t.values())
    stale = sorted(d for t in tables for d in t if d not in dests)
    assert not stale, f"table names flags no release has: {stale}"


@functools.lru_cache(maxsize=None)
def _model(name):
    return load_model(name)


DENSE = "Qwen/Qwen3-8B"
VL = "Qwen/Qwen2.5-VL-7B-Instruct"
SLIDING = "google/gemma-3-27b-it"
HYBRID = "Qwen/Qwen3-Next-80B-A3B-Instruct"
MOE = "Qwen/Qwen3-30B-A3B"

# flag -> (value, model, gpu, version, base flags, num_gpus)
CASES = {
    "async_scheduling": (False, SLIDING, "H100", "0.33", {"max_model_len": 32768}, None),
    "block_size": (32, DENSE, "H100", "0.33", {}, None),
    "runner": ("pooling", DENSE, "H100", "0.30", {}, None),
    "task": ("embed", DENSE, "H100", "0.10.2", {}, None),
    "convert": ("embed", DENSE, "H100", "0.30", {}, None),
    "compilation_config": ({"cudagraph_mode": "PIECEWISE"}, DENSE, "H100", "0.33", {}, None),
    "cpu_offload_gb": (2, DENSE, "H100", "0.33", {}, None),
    "cuda_graph_sizes": ([64], DENSE, "H100", "0.10.2", {}, None),
    "cudagraph_capture_sizes": ([1, 2, 4, 8], DENSE, "H100", "0.33", {}, None),
    "disable_custom_all_reduce": (True, DENSE, "L40S", "0.11.0", {"tensor_parallel_size": 2}, 2),
    "disable_hybrid_kv_cache_manager": (True, SLIDING, "H100", "0.33", {"max_model_len": 32768}, None),
    "dtype": ("float32", DENSE, "H100", "0.33", {}, None),
    "enable_chunked_prefill": (False, DENSE, "H100", "0.33", {"max_model_len": 32768}, None),
    "data_parallel_size": (2, MOE, "H100", "0.33", {"tensor_parallel_size": 2, "enable_expert_parallel": True}, 4),
    "enable_expert_parallel": (True, MOE, "H100", "0.33", {"tensor_parallel_size": 2, "data_parallel_size": 2}, 4),
    "enable_prefix_caching": (False, HYBRID, "H200", "0.33", {"tensor_parallel_size": 4}, 4),
    "enforce_eager": (True, DENSE, "H100", "0.33", {}, None),
    "gpu_memory_utilization": (0.8, DENSE, "H100", "0.33", {}, None),
    "hf_overrides": ({"max_position_embeddings": 4096}, DENSE, "H100", "0.33", {"max_model_len": None}, None),
    "kv_cache_dtype": ("fp8", DENSE, "H100", "0.33", {}, None),
    "kv_cache_memory_bytes": (10 * GiB, DENSE, "H100", "0.33", {}, None),
    "language_model_only": (True, VL, "H100", "0.33", {}, None),
    "limit_mm_per_prompt": ({"image": 0, "video": 0}, VL, "H100", "0.33", {}, None),
    "max_cudagraph_capture_size": (64, DENSE, "H100", "0.33", {}, None),
    "max_model_len": (4096, DENSE, "H100", "0.33", {}, None),
    "max_num_batched_tokens": (4096, DENSE, "H100", "0.33", {}, None),
    "max_num_seqs": (64, DENSE, "H100", "0.33", {}, None),
    "mm_ipc_gpu_memory_gb": (1, VL, "H100", "0.33", {}, None),
    "moe_backend": ("marlin", "openai/gpt-oss-20b", "H100", "0.33", {}, None),
    "nnodes": (2, DENSE, "H100", "0.11.0", {"tensor_parallel_size": 8}, 8),
    "num_gpu_blocks_override": (1000, DENSE, "H100", "0.33", {}, None),
    "pipeline_parallel_size": (2, DENSE, "H100", "0.33", {}, 2),
    "quantization": ("fp8", DENSE, "H100", "0.33", {}, None),
    "rope_scaling": ({"rope_type": "linear", "factor": 2.0}, DENSE, "H100", "0.33", {"max_model_len": None}, None),
    "skip_mm_profiling": (True, VL, "H100", "0.33", {}, None),
    "speculative_config": ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}, DENSE, "H100", "0.33", {}, None),
    "tensor_parallel_size": (2, DENSE, "H100", "0.33", {}, 2),
}


def _signature(p):
    return json.dumps(p.to_dict(), sort_keys=True, default=str), p.baseline_bytes, p.outside_bytes


def test_every_modelled_flag_has_a_case():
    assert sorted(CASES) == sorted(MODELLED)


@pytest.mark.parametrize("dest", sorted(CASES))
def test_modelled_flag_changes_the_plan(dest):
    value, model, gpu, version, base, n = CASES[dest]
    flags = {"max_model_len": 8192, **base}
    flags = {k: v for k, v in flags.items() if v is not None}
    before = plan_launch(_model(model), lookup_gpu(gpu), flags, version=version, num_gpus=n)
    after = plan_launch(_model(model), lookup_gpu(gpu), {**flags, dest: value}, version=version, num_gpus=n)
    assert _signature(before) != _signature(after), f"{dest}={value!r} is parsed and then ignored"
    assert not any(dest.replace("_", "-") in m and m.startswith("not modelled") for m in after.messages)


@pytest.mark.parametrize("dest", sorted(NOT_MODELLED))
def test_unmodelled_flag_leaves_a_note(dest):
    value = True
    p = plan_launch(_model(DENSE), lookup_gpu("H100"), {"max_model_len": 8192, dest: value}, num_gpus=2)
    option = "--" + dest.replace("_", "-")
    notes = [m for m in p.messages if m.startswith("not modelled") and option in m]
    assert notes and NOT_MODELLED[dest] in notes[0]


def test_flags_without_memory_effect_leave_no_note():
    p = plan_launch(_model(DENSE), lookup_gpu("H100"), {"max_model_len": 8192, "seed": 3, "disable_log_stats": True})
    assert not [m for m in p.messages if m.startswith("not modelled")]
