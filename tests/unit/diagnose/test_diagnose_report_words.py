"""What the reporter's words add beyond the class: the flag they suggest (the fix order), the model and GPU they name
(the weights estimate), host memory named before the OOM, and memory trouble said in words."""

from __future__ import annotations

from pathlib import Path

from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose.events import Fix
from oomguard.diagnose.fixes import suggested_first
from oomguard.diagnose import scoring as _scoring

# The paraphrase tier's cap is fitted on leave-one-batch-out verdicts (scripts/train_diagnose.py fit_cap), not 0.5.
_CAP = _scoring.load().paraphrase_cap


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "report.txt"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _fix(flag: str) -> Fix:
    return Fix(flag, 1, "why")


def test_a_suggested_flag_among_the_builders_fixes_comes_second():
    fixes = [_fix("--max-num-batched-tokens"), _fix("--gpu-memory-utilization"), _fix("--max-num-seqs")]
    assert [f.flag for f in suggested_first(fixes, {"--max-num-seqs"})] == [
        "--max-num-batched-tokens", "--max-num-seqs", "--gpu-memory-utilization"]
    # the first fix suggested too: the next suggested one still comes second
    assert [f.flag for f in suggested_first(fixes, {"--max-num-batched-tokens", "--max-num-seqs"})][1] == "--max-num-seqs"
    # the second already suggested, or not proposed by the builder (no value to give it): unchanged
    assert suggested_first(fixes, {"--gpu-memory-utilization", "--max-num-seqs"}) == fixes
    assert suggested_first(fixes, {"--enforce-eager"}) == fixes


def test_the_report_saying_which_flag_fixed_it_orders_the_fixes(tmp_path):
    text = ("It crashes with CUDA out of memory when serving many requests.\n"
            "We tried everything; setting --max-num-seqs 12 fixed it.\n")
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "runtime-oom"
    assert "--max-num-seqs" in [f.flag for f in v.fix[:2]]


def test_a_launch_line_naming_a_flag_is_not_a_suggestion(tmp_path):
    text = ("vllm serve Qwen/Qwen2.5-7B --enable-chunked-prefill --served-model-name q --max-num-seqs 96\n"
            "It crashes with CUDA out of memory when serving many requests.\n")
    d = diagnose([_write(tmp_path, text)])
    from oomguard.diagnose.fixes import suggested_flags

    assert d.verdicts and "--max-num-seqs" not in suggested_flags(_collector(tmp_path, text))


def _collector(tmp_path: Path, text: str):  # noqa: ANN202
    from oomguard.diagnose.diagnosis import prepare

    return prepare([_write(tmp_path, text)]).collector


def test_the_model_and_gpu_named_in_words_feed_the_weights_estimate(tmp_path):
    text = ("I am trying to load Llama 3 70B on a single 80GB GPU and it fails with CUDA out of memory.\n")
    d = diagnose([_write(tmp_path, text)])
    v = d.verdicts[0]
    assert "ctx:weights-exceed-gpu" in {c["feature"] for c in v.cues}
    assert v.cls.value == "weights-oom"


def test_a_named_model_is_never_taken_for_a_model_id(tmp_path):
    from oomguard.diagnose.diagnosis import prepare

    p = prepare([_write(tmp_path, "I load Qwen2.5-7B-Instruct on my RTX 4090 and it runs out of memory.\n")])
    assert p.context.model is None and p.context.mentioned_model == "Qwen2.5-7B-Instruct"
    assert p.context.gpu_total_gib is None and 23 < p.context.mentioned_gpu_gib < 24


def test_cpu_out_of_memory_in_words_is_host_memory(tmp_path):
    text = "Actors died: CPU Out of Memory when performing actor_rollout_generate_sequences\n"
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "host-oom"


def test_memory_used_more_and_more_is_a_failure_cue(tmp_path):
    d = diagnose([_write(tmp_path, "Why CPU Memory Is Used More and More?\n")])
    assert d.verdicts and d.verdicts[0].cls.value == "host-oom" and d.verdicts[0].confidence <= _CAP


def test_heads_not_divisible_in_words_is_fixed_with_the_tensor_parallel_size(tmp_path):
    text = ("When I try to run vLLM with tensor parallelism of 3, it raises an error saying that the number of "
            "attention heads is not divisible by 3.\n")
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "config-error" and v.fix[0].flag == "--tensor-parallel-size"


def test_v0_aborting_for_lack_of_cpu_swap_space_is_a_runtime_failure(tmp_path):
    """vLLM V0's scheduler message: the KV cache filled while serving and the sequences it preempts by swapping do
    not fit the CPU swap space either (not the host's RAM running out)."""
    text = ("RuntimeError: Aborted due to the lack of CPU swap space. Please increase the swap space to avoid this "
            "error.\n")
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "runtime-oom" and v.confidence > 0.5
    flags = [f.flag for f in v.fix]
    # vLLM's message suggests the swap space: the fitted fix ranker (diagnose/fixes_rank.py) may put it first
    assert set(flags[:2]) == {"--max-num-seqs", "--swap-space"} and len(flags) == len(set(flags))


def test_a_worker_dead_of_sigbus_points_at_the_containers_shared_memory(tmp_path):
    text = "Fatal Python error: Bus error\nI deployed vllm on RTX4090 * 2 and encountered an error.\n"
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "nccl-error" and v.fix[0].flag == "docker" and "shm" in str(v.fix[0].value)
