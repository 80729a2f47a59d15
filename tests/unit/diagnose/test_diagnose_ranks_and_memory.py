"""Issue 16, sixth pass: collective failures told without NCCL's error words, which memory ran out (the device's or
the host's), requests reaching a server that serves, and sentences shaped like records.

Each test writes a report in the shape public threads paste it and runs the real prepare / diagnose with the shipped
weights (no mocks).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oomguard.diagnose.diagnosis import diagnose, prepare
from oomguard.diagnose.features import extract
from oomguard.diagnose.lines import parse_line


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "report.txt"
    p.write_text(text, encoding="utf-8")
    return str(p)


def _cues(tmp_path: Path, text: str, **options) -> dict[str, bool]:
    """feature -> anchor, for every cue of the report."""
    prepared = prepare([_write(tmp_path, text)], **options)
    return {c.feature: c.anchor for c in extract(prepared.collector, prepared.context)}


def _top(tmp_path: Path, text: str, **options) -> str:
    d = diagnose([_write(tmp_path, text)], **options)
    return d.verdicts[0].cls.value if d.verdicts else "(none)"


# --- a hang where several ranks run ----------------------------------------------------------------------------


def test_a_hang_said_in_words_with_more_than_one_rank_is_an_anchored_collective_hang(tmp_path):
    cues = _cues(tmp_path, "[Bug]: when tensor-parallel-size>1, Stuck\n")
    assert cues.get("coll:hang") is True
    assert "words:multi-rank" in cues


def test_the_launch_s_tensor_parallel_size_is_enough_to_make_a_hang_a_collective_one(tmp_path):
    text = "The server hangs after loading the weights and never prints the ready line.\n"
    assert "coll:hang" not in _cues(tmp_path, text)
    assert _cues(tmp_path, text, launch_text="vllm serve Qwen/Qwen2.5-72B-Instruct --tensor-parallel-size 4").get(
        "coll:hang") is True


def test_a_hang_that_is_denied_is_no_hang(tmp_path):
    assert "coll:hang" not in _cues(tmp_path, "With --tensor-parallel-size 2 there is no hang any more, thanks.\n")


def test_a_communication_library_s_environment_workaround_and_pynccl_are_collective_evidence(tmp_path):
    text = ("When I start vLLM, it gets stuck at a step in pynccl.py and cannot proceed to model loading. I have to "
            "export NCCL_P2P_DISABLE=1 to load the model.\n")
    cues = _cues(tmp_path, text)
    assert {"coll:env", "words:collective", "coll:hang"} <= set(cues)
    assert _top(tmp_path, text) == "nccl-error"


def test_dev_shm_named_with_nccl_is_an_anchor_even_without_an_error_word(tmp_path):
    text = ("I had to manually increase the Docker `/dev/shm` with an additional volumeMount\n"
            "to avoid NCCL shared memory allocation issues\n")
    assert _cues(tmp_path, text).get("coll:shm") is True
    assert _top(tmp_path, text) == "nccl-error"


def test_gloo_s_recv_timeout_is_a_collective_failure(tmp_path):
    text = ("ERROR 05-02 10:11:12 [core.py:2178] RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/"
            "unbound_buffer.cc:78] Timed out waiting 1800000ms for recv operation to complete\n")
    assert {"words:collective", "coll:failure"} <= set(_cues(tmp_path, text))


# --- which memory ---------------------------------------------------------------------------------------------


def test_a_device_s_ram_is_not_host_ram(tmp_path):
    text = "On a 4xL4 (4 x 24 GB CUDA RAM) instance it fails with the same OOM error as above.\n"
    cues = _cues(tmp_path, text)
    assert "host:ram-words" not in cues
    assert "mem:device-oom" in cues


def test_running_out_of_memory_on_wake_up_is_said_of_the_device(tmp_path):
    text = "During a GRPO experiment I encountered OOM (Out of Memory) issues when waking up vLLM.\n"
    assert "mem:device-oom" in _cues(tmp_path, text)


def test_host_words_still_count_for_host_memory(tmp_path):
    cues = _cues(tmp_path, "The RSS of the process grows to 120 GB of RAM and the pod is killed.\n")
    assert "host:ram-words" in cues and "mem:device-oom" not in cues


# --- requests reaching a server that serves ------------------------------------------------------------------


def test_an_aborted_request_with_a_client_side_error_is_no_failure_of_the_server(tmp_path):
    text = ("When the prompt is short, the response is returned normally. However, if the prompt is long, the server "
            "logs the following error: `INFO 08-19 11:15:47 async_llm_engine.py:181] Aborted request "
            "chat-12fa08eea52d4308ab46efbdeb7a300a.`, and the client displays `Error: read ECONNRESET`.\n")
    assert _top(tmp_path, text) == "(none)"


def test_a_client_s_read_timeout_against_a_running_server_is_no_failure_of_the_server(tmp_path):
    text = ("Problem: Timeout for 300 seconds, no matter how I adjust those parameters.\n"
            '[vllm] Error: PluginInvokeError: {"error_type":"ConnectionError","message":"HTTPConnectionPool('
            "host='192.168.1.12', port=8000): Read timed out.\"}\n")
    assert _top(tmp_path, text) == "(none)"


def test_a_read_timeout_beside_the_engine_s_own_error_is_still_that_error(tmp_path):
    text = ("requests.exceptions.ReadTimeout: HTTPConnectionPool(host='localhost', port=8000): Read timed out.\n"
            "ERROR 08-19 11:15:47 [core.py:123] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "2.00 GiB. GPU 0 has a total capacity of 79.14 GiB of which 1.02 GiB is free.\n")
    assert _top(tmp_path, text) != "(none)"


# --- sentences shaped like records -----------------------------------------------------------------------------


@pytest.mark.parametrize("text, prose", [
    ("`nvidia-smi` on those nodes reports 4 MiB used and no compute apps, so the gap is the engine's own", True),
    ("`SequentialOffloadHook._move_params` calls `data.pin_memory()` on every parameter tensor being moved", True),
    ("`ValueError: To serve at least one request with the model's max seq len (180000)`", False),
    ("`vllm serve Qwen/Qwen3-4B --gpu-memory-utilization 0.8 --tensor-parallel-size 2`", False),
    ("  1. The coordinator path can initialize kvcached with the wrong world size even though it knows", True),
    ("   \u2022 Model output is degenerate (e.g. a single repeated token like this one)", True),
    # indented without a list marker: a code block, or a record cut at its prefix (vLLM's own sentence)
    (" Sequence group 221 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.",
     False),
    ("    model_uid = await (await self._get_supervisor_ref()).launch_builtin_model(", False),
    ("  - ValueError: The model's max seq len is larger than the KV cache", False),
])
def test_a_line_led_by_a_code_span_or_a_list_marker_is_prose_when_it_reads_as_a_sentence(text, prose):
    assert parse_line("report.txt", 1, text).prose is prose


# --- another tenant on the device, the utilization in words ----------------------------------------------------


@pytest.mark.parametrize("text", [
    "With more than 1 vllm instance on a single GPU, total_allocated_bytes includes the other instance's memory.\n",
    "我先启动了32b的模型 gpu-memory-utilization设置为0.7 启动成功，然后启动9b的模型，报错如下\n",
    "Two models sharing the same GPU fail at start-up with the error below.\n",
])
def test_another_tenant_on_the_same_device_is_a_cue(tmp_path, text):
    assert "words:coresident" in _cues(tmp_path, text + "it fails with an error\n")


def test_the_utilization_named_in_words_is_a_cue(tmp_path):
    cues = _cues(tmp_path, "[Usage]: cannot load llama 3.2 3b on a 16gb gpu when gpu_memory_utilisation=1\n")
    assert "words:utilization" in cues


def test_a_keyword_inside_a_longer_one_still_lets_its_rule_see_the_line(tmp_path):
    # "hangs" is fail:words' keyword and holds words:hang's "hang"; "memory leak" holds memory-growth's "leak"
    assert {"fail:words", "words:hang"} <= set(_cues(tmp_path, "The server hangs after the first request.\n"))
    assert "words:memory-growth" in _cues(tmp_path, "There is a memory leak at every generate call, it fails.\n")


def test_a_question_about_a_serving_engine_with_a_faint_likeness_to_a_message_is_no_failure(tmp_path):
    # "I use vllm as backend to test the performance" shares a few words with a benchmark's argument check (a prose
    # paraphrase of quality ~0.5): too faint to state that anything failed
    text = ("I use vllm as backend to test the perdormance\nmy question is :\n"
            "1. when GPU kv cache useage is 100% , waiting reqseq should increase?\n"
            "2. why only two request , kv cache is 100% ?\n")
    assert _top(tmp_path, text) == "(none)"
