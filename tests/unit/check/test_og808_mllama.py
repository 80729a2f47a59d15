"""OG808: Llama-3.2-Vision's encoder-decoder profile (one full-size image per sequence) runs
out of memory at the default 256 sequences; it runs although oomguard does not model mllama."""

from __future__ import annotations

import os

from oomguard.check.context import CheckOptions
from oomguard.check.report import check_target

os.environ.setdefault("HF_HUB_OFFLINE", "1")

M = "meta-llama/Llama-3.2-11B-Vision-Instruct"


def _check(tmp_path, text, **kw):
    p = tmp_path / "start_api.sh"
    p.write_text(text)
    return check_target(CheckOptions(**kw), path=str(p))


def test_default_sequences_are_an_error_with_the_maintainers_fix(tmp_path):
    # vllm#9445: this exact launch OOMed on an A100 80GB at 0.6.3
    rep = _check(tmp_path, f"vllm serve {M} --max-model-len 1024\n", gpu="A100-80GB", version="0.6.3")
    f = next(f for f in rep.errors if f.rule == "OG808")
    assert f.numbers["max_num_seqs"] == 256 and "(the default)" in f.message
    assert {e.dest: e.value for e in f.fix} == {"max_num_seqs": 16, "enforce_eager": True}
    assert "--max-num-seqs 16" in rep.fixed_text and "--enforce-eager" in rep.fixed_text


def test_the_launch_that_started_is_quiet(tmp_path):
    rep = _check(tmp_path, f"vllm serve {M} --max-model-len 1024 --max-num-seqs 32 --enforce-eager\n", gpu="A100-80GB", version="0.6.3")
    assert not [f for f in rep.findings if f.rule == "OG808"] and not rep.errors


def test_runs_without_a_gpu_and_other_models_are_untouched(tmp_path):
    rep = _check(tmp_path, f"vllm serve {M} --max-num-seqs 64\n", version="0.6.3")
    assert [f.rule for f in rep.errors] == ["OG808"]
    rep = _check(tmp_path, "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n", gpu="A100-80GB", version="0.6.3")
    assert "OG808" not in {f.rule for f in rep.findings}


def test_from_07_it_is_the_budget_that_decides(tmp_path):
    # PR #12126 (record S005): 128 sequences at 65,536 tokens started on an H100 at 0.7
    rep = _check(tmp_path, f"vllm serve {M} --max-model-len 65536 --max-num-seqs 128 --enforce-eager\n", gpu="H100", version="0.7.0")
    assert "OG808" not in {f.rule for f in rep.findings}
    # the same 128 before that release: the over-counting profile failed
    rep = _check(tmp_path, f"vllm serve {M} --max-model-len 65536 --max-num-seqs 128 --enforce-eager\n", gpu="H100", version="0.6.6")
    assert "OG808" in {f.rule for f in rep.errors}
    # the default 256 at 0.7: 19.7 GiB of weights + 73 GiB of profile do not fit an 80 GB card
    rep = _check(tmp_path, f"vllm serve {M} --max-model-len 1024\n", gpu="A100-80GB", version="0.7.0")
    f = next(f for f in rep.errors if f.rule == "OG808")
    assert 19 < f.numbers["weights_gib"] < 21 and f.numbers["profile_peak_gib"] > 70
