"""Numbers captured from log lines go through one guarded helper (issue 13): never a traceback,
never an infinite GiB figure; the line is skipped with a note."""

from __future__ import annotations

import pytest

from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose.parsers.numbers import BadNumber, integer, maybe_number, num, to_gib

BAD = [".", "1.2.3", "1e999", "nan", "inf", "-inf", "9" * 5000, "", "1..", "1e400"]


@pytest.mark.parametrize("text", BAD)
def test_num_refuses(text):
    with pytest.raises(BadNumber):
        num(text)


@pytest.mark.parametrize("text", BAD + ["12.5"])
def test_integer_refuses(text):
    with pytest.raises(BadNumber):
        integer(text)


def test_good_numbers():
    assert num("1,234.5") == 1234.5 and integer("1,478") == 1478 and to_gib("512", "MiB") == 0.5
    assert maybe_number("0.9") == 0.9 and maybe_number("1e999") is None and maybe_number("7") == 7
    with pytest.raises(BadNumber):
        num("5", hi=1)
    with pytest.raises(BadNumber):
        to_gib("1e17", "TiB")  # finite, but a byte count beyond any machine


# Each template is a line some parser converts; {} is replaced by a malformed number.
TEMPLATES = [
    "INFO 05-01 12:00:00 worker.py:1] Memory profiling results: total_gpu_memory={}GiB initial_memory_usage=1GiB",
    "INFO 05-01 12:00:00 worker.py:1] Model loading took {} GiB and 12.0 seconds",
    "INFO 05-01 12:00:00 executor_base.py:1] # GPU blocks: {}, # CPU blocks: 2048",
    "INFO 05-01 12:00:00 [gpu_worker.py:1] Available KV cache memory: {} GiB",
    "INFO 05-01 12:00:00 [kv_cache_utils.py:1] GPU KV cache size: {} tokens",
    "INFO 05-01 12:00:00 [kv_cache_utils.py:1] Maximum concurrency for {} tokens per request: 2.00x",
    "INFO 05-01 12:00:00 [gpu_model_runner.py:1] Graph capturing finished in 5 secs, took {} GiB",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {} GiB. GPU 0 has a total capacity of 79.19 GiB "
    "of which 1.00 GiB is free.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB. GPU {} has a total capacity of 79.19 GiB "
    "of which 1.00 GiB is free.",
    "ValueError: The model's max seq len ({}) is larger than the maximum number of tokens that can be stored in KV "
    "cache (23648). Try increasing `gpu_memory_utilization`",
    "ValueError: To serve at least one request with the models's max seq len (8192), ({} GiB KV cache is needed, "
    "which is larger than the available KV cache memory (3.18 GiB).",
    "ValueError: Free memory on device (1.0/{} GiB) on startup is less than desired GPU memory utilization (0.9, 71.3 GiB).",
    "ValueError: User-specified max_model_len ({}) is greater than the derived max_model_len (max_position_embeddings=4096)",
    "ValueError: max_num_seqs ({}) exceeds available Mamba cache blocks (10)",
    "[ 12.5] Out of memory: Killed process {} (python3) total-vm:1kB, anon-rss:2kB",
    "[ 12.5] memory: usage {}kB, limit 31457280kB, failcnt 123",
    "INFO 05-01 12:00:00 metrics.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
    "Running: {} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.0%",
    "ValueError: World size ({}) is larger than the number of available GPUs (1).",
]


@pytest.mark.parametrize("bad", ["1.2.3", "1e999", "9" * 5000])
@pytest.mark.parametrize("template", TEMPLATES)
def test_malformed_numbers_never_raise(tmp_path, template, bad):
    text = template.replace("{}", bad)
    log = tmp_path / "vllm.log"
    log.write_text(text + "\n")
    d = diagnose([str(log)])
    d.to_dict()  # serialises: no inf / nan reached the output
    facts = d.collector.to_dict()
    for m in facts["memory"]:
        assert abs(m["value"]) < 1e18


def test_skipped_line_is_noted(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("INFO 05-01 12:00:00 [gpu_worker.py:1] Available KV cache memory: 1e999 GiB\n"
                   "INFO 05-01 12:00:00 [gpu_worker.py:1] Available KV cache memory: 1.1.1 GiB\n")
    d = diagnose([str(log)])
    assert any("vllm.log:2" in n and "unreadable" in n for n in d.collector.notes)
    assert not d.collector.memory.get("kv_available")


@pytest.mark.parametrize("bad", ["nan", "inf", "1e999", "1.2.3", "9" * 5000, "1e308"])
def test_launch_and_printed_args_with_bad_numbers(tmp_path, bad):
    """Values from --launch and from vLLM's printed dict never become nan/inf/absurd numbers in the arithmetic."""
    log = tmp_path / "vllm.log"
    log.write_text(
        f"INFO 05-01 10:00:03 [cli_args.py:309] non-default args: {{'model': 'Qwen/Qwen3-8B', 'max_model_len': {bad!r}, "
        f"'max_num_batched_tokens': {bad}}}\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
        "of which 1.00 GiB is free.\n")
    launch = f"vllm serve Qwen/Qwen3-8B --max-model-len {bad} --gpu-memory-utilization {bad}\n"
    d = diagnose([str(log)], launch_text=launch, model="Qwen/Qwen3-8B", gpu="H100 80GB")
    d.to_dict()
    for value in d.context.args.values():
        if isinstance(value, float):
            assert abs(value) < 1e18
