"""Which fix comes first (issue 16 item 4): the builders' facts-based candidates, ordered by the fixes labelled
threads of the class used (``fixes.rank_fixes``, votes fitted by scripts/train_diagnose.py), and the checks made
from the model's config. Real diagnose runs on written reports, with the shipped weights."""

from __future__ import annotations

from oomguard.diagnose import scoring
from oomguard.diagnose.events import Fix
from oomguard.diagnose.fixes import rank_fixes
from tests.conftest import top_verdict

_top = top_verdict


def _flags(v) -> list[str]:  # noqa: ANN001
    return [f.flag for f in v.fix]


def test_votes_reorder_the_alternatives_but_never_the_first_fix():
    fixes = [Fix("--enforce-eager", True, ""), Fix("--max-cudagraph-capture-size", 64, ""),
             Fix("--gpu-memory-utilization", 0.85, "")]
    assert [f.flag for f in rank_fixes(fixes, {})] == [f.flag for f in fixes]
    # one vote moves a fix one place at most; the first fix stays first whatever the votes
    one = rank_fixes(fixes, {"--gpu-memory-utilization": 1})
    assert [f.flag for f in one] == ["--enforce-eager", "--gpu-memory-utilization", "--max-cudagraph-capture-size"]
    many = rank_fixes(fixes, {"--gpu-memory-utilization": 9, "--max-cudagraph-capture-size": 5})
    assert many[0].flag == "--enforce-eager"


def test_the_shipped_weights_carry_the_fix_votes_and_the_phase_model():
    w = scoring.load()
    assert w.fix_votes and all(flag.startswith("--") or flag.isupper() for row in w.fix_votes.values() for flag in row)
    assert w.phase is not None and set(w.phase.classes) <= set(scoring.PHASE_CLASSES)


def test_no_kv_memory_on_v1_with_default_sequences_offers_fewer_sequences(tmp_path):
    text = ("(EngineCore_DP0 pid=7) INFO 05-01 10:00:00 [core.py:70] Initializing a V1 LLM engine (v0.10.1) with config: "
            "model='Qwen/Qwen2.5-VL-7B-Instruct'\n"
            "(EngineCore_DP0 pid=7) ERROR 05-01 10:00:09 [core.py:700] ValueError: No available memory for the cache "
            "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n")
    v = _top(tmp_path, text)
    assert v.cls.value == "no-kv-memory"
    assert _flags(v)[0] == "--gpu-memory-utilization" and "--max-num-seqs" in _flags(v)[:2]


def test_weights_in_fp32_are_fixed_with_the_dtype_first(tmp_path):
    text = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 518.00 MiB. GPU 0 has a total capacty of "
            "21.67 GiB of which 4.06 MiB is free.\n")
    v = _top(tmp_path, text, launch_text="vllm serve Qwen/Qwen2-7B-Instruct --dtype float --max-model-len 512\n",
             model="Qwen/Qwen2-7B-Instruct", gpu="RTX 2080 Ti 22GB")
    assert v.cls.value == "weights-oom"
    assert (v.fix[0].flag, v.fix[0].value) == ("--dtype", "auto")


def test_an_option_of_another_tool_is_mapped_to_the_servers_flag(tmp_path):
    v = _top(tmp_path, "api_server.py: error: unrecognized arguments: --max-concurrency 20\n")
    assert v.cls.value == "bad-argument" and v.fix[0].flag == "--max-num-seqs"


def test_a_swap_space_near_the_host_ram_is_fixed_with_the_swap_space(tmp_path):
    v = _top(tmp_path, "ValueError: Too large swap space. 4.00 GiB out of the 4.30 GiB total CPU memory is allocated "
                       "for the swap space.\n")
    assert v.cls.value == "config-error" and v.fix[0].flag == "--swap-space"


def test_heads_that_do_not_divide_by_the_tp_size_are_a_configuration_error(tmp_path):
    # gemma-3-27b-it (bundled config): 32 attention heads, TP 3; the paste stops before vLLM's own error
    text = ("2025-06-19T11:30:14+08:00 - gpustack.worker.backends.vllm - INFO - Starting vllm server\n"
            "INFO 06-19 11:30:19 [__init__.py:239] Automatically detected platform cuda.\n")
    v = _top(tmp_path, text, launch_text="vllm serve google/gemma-3-27b-it --tensor-parallel-size 3\n",
             model="google/gemma-3-27b-it")
    assert v.cls.value == "config-error"
    assert (v.fix[0].flag, v.fix[0].value) == ("--tensor-parallel-size", 2)


def test_without_a_cause_of_its_own_the_votes_order_the_first_fix_too():
    fixes = [Fix("--max-num-batched-tokens", 4096, "a"), Fix("--gpu-memory-utilization", 0.85, "b"),
             Fix("--max-num-seqs", 64, "c")]
    votes = {"--gpu-memory-utilization": 6, "--max-num-batched-tokens": 1}
    # a cause named (keep_first): the builder's first stays; otherwise 6 threads outvote the builder's order
    assert rank_fixes(fixes, votes)[0].flag == "--max-num-batched-tokens"
    assert [f.flag for f in rank_fixes(fixes, votes, keep_first=False)][:2] == [
        "--gpu-memory-utilization", "--max-num-batched-tokens"]
