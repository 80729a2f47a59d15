"""Every search is bounded by its inputs (issue 20 item 2): absurd parallel sizes are refused at
once, fit's split enumeration does not count up to --num-gpus, did-you-mean is length-bounded.

Through the real CLI (subprocesses): the timeout here is a hang guard, not a speed target
(those are in benchmarks/)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomguard.fit.space import _valid_tp, parallel_splits
from tests.conftest import run_cli

OFFLINE = {"HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("flags, needle", [
    (["--pipeline-parallel-size", "1000000"], "65,536"),
    (["--tensor-parallel-size", "100000", "--pipeline-parallel-size", "100000"], "10,000,000,000 GPUs"),
    (["--data-parallel-size", "1000000"], "65,536"),
    (["--pipeline-parallel-size", "37"], "36 layers"),  # Qwen3-8B has 36
])
def test_plan_refuses_absurd_parallel_sizes(flags, needle):
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", *flags, env=OFFLINE, timeout=30)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_fit_from_an_absurd_launch_is_bad_input(tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 100000 --pipeline-parallel-size 1000\n")
    p = run_cli("fit", "--from", str(script), "--gpu", "H100", env=OFFLINE, timeout=30)
    assert p.returncode == 2 and "GPUs, more than the 65,536" in p.stderr, p.stderr


def test_data_parallel_counts_against_the_gpus_given():
    p = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--data-parallel-size", "4", "--num-gpus", "2",
                env=OFFLINE, timeout=30)
    text = " ".join(p.stdout.split())  # the ledger wraps long lines
    assert p.returncode == 1 and "config-error" in text and "data_parallel_size = 4 but only 2 GPU(s)" in text


def test_pp_layer_partition_in_a_launch(tmp_path):
    for value, needle in (("a,b", "invalid partition"), ("18,17", "sums to 35"), ("36", "has 1 entries")):
        script = tmp_path / "start_api.sh"
        script.write_text(f"export VLLM_PP_LAYER_PARTITION={value}\nvllm serve Qwen/Qwen3-8B --pipeline-parallel-size 2\n")
        p = run_cli("plan", str(script), "--gpu", "H100", env=OFFLINE, timeout=30)
        assert p.returncode == 2 and needle in p.stderr, (value, p.stderr)


def test_fit_on_the_most_gpus_completes():
    p = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--num-gpus", "65536", "--format", "json",
                env=OFFLINE, timeout=120)
    assert p.returncode in (0, 1), p.stderr


def _brute_force(model, num_gpus, launched=None):
    """The enumeration parallel_splits replaced: every world from num_gpus down, every TP."""
    out = []
    for world in range(num_gpus, 0, -1):
        out = [(tp, world // tp) for tp in range(1, world + 1)
               if world % tp == 0 and _valid_tp(model, tp) and world // tp <= model.num_layers]
        if out:
            break
    if launched and launched not in out and launched[0] * launched[1] <= num_gpus:
        out.append(launched)
    return sorted(out, key=lambda x: (x[1], -x[0]))


@settings(max_examples=200, deadline=None)
@given(family=st.sampled_from(["dense", "mla"]), heads=st.integers(1, 160), kv_div=st.integers(1, 16),
       layers=st.integers(1, 100), gpus=st.integers(1, 300))
def test_parallel_splits_match_the_brute_force(family, heads, kv_div, layers, gpus):
    kv = max(1, heads // kv_div) if heads % max(1, heads // kv_div) == 0 else heads
    model = SimpleNamespace(family=family, num_attention_heads=heads, num_kv_heads=kv, num_layers=layers)
    assert parallel_splits(model, gpus) == _brute_force(model, gpus)


def test_did_you_mean_is_bounded_on_a_64k_model_id():
    import random

    r = random.Random(7)
    spec = "Qwen/" + "".join(r.choice("abcdefghijklmnopqrstuvwxyz0123456789-.") for _ in range(65536))
    p = run_cli("plan", "--model", spec, "--gpu", "H100", env=OFFLINE, timeout=20)
    assert p.returncode == 2 and "not" in p.stderr and len(p.stderr) < 1500
