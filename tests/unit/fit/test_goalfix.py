"""fit.goalfix: the one ranking check --fix and fit --from share (issue 12, item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomguard.fit.goalfix import (
    Goal,
    Option,
    goal_options,
    headroom_floor,
    rank,
    s2_option,
    shared_util_cap,
    unchunked_whole_prompt,
)
from oomguard.inputs.hardware import lookup_gpu
from oomguard.inputs.model_config import load_model
from oomguard.model.planner import plan_launch
from oomguard.units import GiB

SCEN = Path(__file__).resolve().parents[3] / "tests" / "scenarios"
S1_FLAGS = {"max_model_len": 1048576, "max_num_batched_tokens": 1048576, "max_num_seqs": 1, "enable_prefix_caching": True,
            "gpu_memory_utilization": 0.9, "enforce_eager": True}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _planner(model, gpu, version=None, num_gpus=None, other=0):
    return lambda flags, env: plan_launch(model, gpu, flags, env, version=version, num_gpus=num_gpus, other_gpu_use_bytes=other)


def test_headroom_floor_is_a_share_never_below_half_a_gib():
    assert headroom_floor(int(80 * GiB)) == int(0.02 * 80 * GiB)
    assert headroom_floor(int(8 * GiB)) == 512 * 2**20
    assert headroom_floor(int(80 * GiB), share=0.05) == int(0.05 * 80 * GiB)


def test_s1_options_keep_the_length_and_are_ranked():
    m, g = load_model(str(SCEN / "s1" / "model")), lookup_gpu("A100-80GB")
    P = _planner(m, g)
    base = P(S1_FLAGS, {})
    opts = goal_options(P, S1_FLAGS, {}, base, model=m)
    assert opts and all(o.keeps_goal and o.floor_ok and o.plan.starts for o in opts)
    assert all(o.plan.settings.max_model_len == 1048576 for o in opts)
    assert opts == rank(opts)
    # each option was planned with the full planner: its plan is the plan of the edited launch
    o = opts[0]
    again = P({**S1_FLAGS, **dict(o.edits)}, {})
    assert again.kv_cache_tokens == o.plan.kv_cache_tokens
    # the fp8 one is offered, and ranked after the engine-only edits (it costs accuracy)
    fp8 = [i for i, x in enumerate(opts) if dict(x.edits).get("kv_cache_dtype") == "fp8"]
    assert fp8 and fp8[0] > 0


def test_a_shared_card_never_gets_a_higher_utilization():
    m, g = load_model(str(SCEN / "s1" / "model")), lookup_gpu("A100-80GB")
    other = 4 * GiB
    P = _planner(m, g, other=other)
    base = P(S1_FLAGS, {})
    cap = shared_util_cap(base, other)
    assert cap == 0.85
    opts = goal_options(P, S1_FLAGS, {}, base, model=m, other_gpu_use_bytes=other)
    assert opts and all(o.plan.settings.gpu_memory_utilization <= cap for o in opts)
    assert opts[0].keeps_goal and dict(opts[0].edits).get("kv_cache_dtype") == "fp8"  # at 0.85 only fp8 holds 1M


def test_without_an_asked_length_lowering_it_beats_fp8():
    m, g = load_model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("RTX-3090")
    P = _planner(m, g)
    base = P({}, {})
    assert not base.starts
    opts = goal_options(P, {}, {}, base, model=m, goal=Goal(base.settings.max_model_len, user_length=False))
    assert opts[0].keeps_goal and "kv_cache_dtype" not in dict(opts[0].edits)
    assert dict(opts[0].edits)["max_model_len"] < 131072


def test_nothing_fits_the_length_then_the_options_say_so():
    m, g = load_model(str(SCEN / "s3" / "model")), lookup_gpu("RTX-4090")
    flags = {"tensor_parallel_size": 4, "max_model_len": 750000, "kv_cache_dtype": "fp8_e4m3", "kv_cache_memory_bytes": 10 * GiB,
             "enable_chunked_prefill": True, "max_num_batched_tokens": 8192, "max_num_seqs": 96, "gpu_memory_utilization": 0.85,
             "hf_overrides": {"rope_scaling": {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 262144}}}
    P = _planner(m, g, version="0.25", num_gpus=4)
    base = P(flags, {})
    opts = goal_options(P, flags, {}, base, model=m)
    assert opts and not any(o.keeps_goal for o in opts)
    assert opts[0].plan.settings.max_model_len > 327_680  # more than the 10 GiB pool: the pool is raised first
    assert any("gives up" in t for t in opts[0].tradeoffs)


def test_rank_key_puts_the_goal_first_then_cost():
    def opt(keeps, cost, n=1, robust=True):
        return Option(tuple((f"f{i}", i) for i in range(n)), None, keeps, 5 * GiB, GiB, GiB, robust, cost)

    a, b, c, d = opt(False, 0.1), opt(True, 3.0), opt(True, 0.5, n=2), opt(True, 0.5, robust=False)
    assert rank([a, b, c, d]) == [c, b, d, a]


def test_s2_rule_is_for_unchunked_releases_only():
    m, g = load_model("codellama/CodeLlama-13b-Instruct-hf"), lookup_gpu("RTX-3090")
    flags = {"tensor_parallel_size": 8, "gpu_memory_utilization": 0.8, "max_model_len": 8192}
    old = _planner(m, g, version="0.6.6", num_gpus=8)
    p = old(flags, {})
    assert unchunked_whole_prompt(p, flags)
    o = s2_option(old, flags, {}, p)
    assert dict(o.edits) == {"enable_chunked_prefill": True, "max_num_batched_tokens": 1024, "max_num_seqs": 1024} or \
        dict(o.edits)["max_num_batched_tokens"] == 1024
    new = _planner(m, g, num_gpus=8)
    assert not unchunked_whole_prompt(new(flags, {}), flags) and s2_option(new, flags, {}, new(flags, {})) is None


def test_fit_from_and_check_fix_agree_on_a_launch_that_starts(tmp_path):
    import json

    from tests.conftest import run_cli

    p = tmp_path / "start.sh"
    p.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072 --max-num-batched-tokens 131072\n")
    env = {"HF_HUB_OFFLINE": "1"}
    chk = json.loads(run_cli("check", str(p), "--gpu", "H100", "--format", "json", env=env).stdout)
    assert "--max-num-batched-tokens 8192" in chk["fixed_command"]  # OG101's fix; the launch starts
    proc = run_cli("fit", "--from", str(p), "--gpu", "H100", "--format", "json", env=env)
    d = json.loads(proc.stdout)
    assert d["candidates"][0]["flags"]["max_num_batched_tokens"] == 8192
    assert d["candidates"][0]["plan"]["max_model_len"] == 131072
