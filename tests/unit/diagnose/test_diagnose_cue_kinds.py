"""Cue kinds added for reports with no vLLM error line (issue 16 item 3: never "none" where there is a cue).

Each test writes a report shaped like the public ones (a usage dump cut before its error line, Ray's placement
waiting lines, a markdown-wrapped exception, prose that names a memory leak...) and runs the real diagnose on it
with the shipped weights."""

from __future__ import annotations

from pathlib import Path

from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose import scoring as _scoring
from tests.conftest import top_verdict

# The paraphrase tier's cap is fitted on leave-one-batch-out verdicts (scripts/train_diagnose.py fit_cap), not 0.5.
_CAP = _scoring.load().paraphrase_cap


def _diagnose(tmp_path: Path, text: str):  # noqa: ANN202 - a Diagnosis
    p = tmp_path / "report.txt"
    p.write_text(text, encoding="utf-8")
    return diagnose([str(p)])


_top = top_verdict


def test_a_usage_dump_without_its_error_line_is_a_rejected_command_line(tmp_path):
    text = ("This is the output I get when I add that flag:\n"
            "usage: api_server.py [-h] [--host HOST] [--port PORT]\n"
            "                     [--uvicorn-log-level {debug,info,warning,error,critical,trace}]\n")
    v = _top(tmp_path, text)
    assert v.cls.value == "bad-argument"
    assert any(c["feature"] == "sig:argparse-usage" for c in v.cues)


def test_rays_placement_waiting_lines_are_a_placement_failure(tmp_path):
    line = ("(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of "
            "specs for {s} seconds. specs=[{{'GPU': 1.0}}, {{'GPU': 1.0}}]. Check `ray status` and `ray list nodes` "
            "to see if you have enough resources.\n")
    v = _top(tmp_path, "".join(line.format(s=s) for s in (10, 30, 70, 150)))
    assert v.cls.value == "ray-placement-timeout"
    assert "2 GPUs" in v.summary


def test_a_markdown_wrapped_exception_line_is_read_as_the_exception(tmp_path):
    text = ("`ValueError`: The quantization method awq is not supported for the current GPU. Minimum capability: 80. "
            "Current capability: 75.\n\nBut when I try to use vLLM to serve my AWQ LLM:\n")
    v = _top(tmp_path, text)
    assert v.cls.value == "config-error" and v.tier != "paraphrase"


def test_vllms_compiled_ops_that_cannot_load_are_a_missing_dependency(tmp_path):
    text = ("WARNING 08-03 23:03:20 _custom_ops.py:15] Failed to import from vllm._C with ImportError('libcudart.so.12: "
            "cannot open shared object file: No such file or directory')\nPyTorch version: 2.4.0+cu118\n")
    v = _top(tmp_path, text)
    assert v.cls.value == "missing-dependency"


def test_an_extra_named_in_words_is_a_missing_dependency_at_a_capped_confidence(tmp_path):
    v = _top(tmp_path, "the worker image is missing, please install vllm[audio] for ultravox\n")
    assert v.cls.value == "missing-dependency" and v.confidence <= _CAP
    assert any(f.flag == "pip" and "vllm[audio]" in str(f.value) for f in v.fix)


def test_words_that_state_a_failure_are_a_cue(tmp_path):
    leak = _top(tmp_path, "I printed the cpu_memory: the memory leak happens at every generate call and is never "
                          "released until the process is gone.\n")
    assert leak.cls.value == "host-oom" and leak.tier == "paraphrase" and leak.confidence <= _CAP
    unsupported = _top(tmp_path, "- TP=1 with `--data_parallel_size 4`: vLLM rejects offline data parallelism for dense "
                                 "models (`Offline data parallel mode is not supported/useful for dense models`).\n")
    assert unsupported.cls.value == "config-error"


def test_host_memory_named_in_any_case_is_a_host_cue(tmp_path):
    v = _top(tmp_path, "[Bug]: **System Memory** OOM after upgrading to v0.9.0.1\n")
    assert v.cls.value == "host-oom"
    assert any(c["feature"] == "host:ram-words" for c in v.cues)


def test_a_complaint_in_words_about_a_server_that_serves_is_no_failure(tmp_path):
    text = ("INFO:     Application startup complete.\n"
            'INFO:     10.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
            "The response_format option is not supported the way I expected, the output is plain text.\n")
    assert _diagnose(tmp_path, text).verdicts == []


def test_a_traceback_in_logfmt_records_is_read(tmp_path):
    lines = ['  File \\"/opt/vllm-env/lib/python3.12/site-packages/vllm/entrypoints/cli/main.py\\", line 48, in main',
             '    args = parser.parse_args()',
             '  File \\"/opt/vllm-env/lib/python3.12/site-packages/vllm/utils.py\\", line 1391, in parse_args',
             'ValueError: With `vllm serve`, you should provide the model as a positional argument']
    text = "".join(f'time="2026-01-29T14:55:54Z" level=info msg="{m}" component=vllm\n' for m in lines)
    d = _diagnose(tmp_path, text)
    assert d.verdicts and d.collector.paste_frames, "the frames inside msg=\"...\" are read"


def test_colour_codes_that_lost_their_escape_are_stripped(tmp_path):
    text = ("`[36m(main_task pid=3523385) ValueError: max_num_batched_tokens (8192) is smaller than max_model_len "
            "(9216). Please increase max_num_batched_tokens or decrease max_model_len.`\n")
    v = _top(tmp_path, text)
    assert v.cls.value == "config-error" and v.fix[0].flag == "--max-num-batched-tokens"


def test_a_relation_between_two_settings_in_a_pydantic_error_is_a_configuration_error(tmp_path):
    text = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig\n"
            "  Value error, max_num_batched_tokens (2048) is smaller than max_model_len (40960). This effectively "
            "limits the maximum sequence length. [type=value_error]\n")
    assert _top(tmp_path, text).cls.value == "config-error"


def test_an_npu_workers_zero_kv_budget_is_no_kv_memory(tmp_path):
    text = ("[mineru] ^[[0;36m(EngineCore_DP0 pid=4146)^[[0;0m INFO 01-15 06:47:41 [worker_v1.py:270] Available memory: "
            "0, total memory: 65452113920\n"
            "[mineru] ^[[0;36m(EngineCore_DP0 pid=4146)^[[0;0m ERROR 01-15 06:47:41 [core.py:843] EngineCore failed to "
            "start.\n")
    assert _top(tmp_path, text).cls.value == "no-kv-memory"


def test_a_driver_older_than_the_wheels_cuda_is_a_missing_dependency(tmp_path):
    v = _top(tmp_path, "RuntimeError: The NVIDIA driver on your system is too old (found version 12080)\n")
    assert v.cls.value == "missing-dependency" and v.fix and v.fix[0].flag == "pip"


def test_an_undefined_symbol_is_a_broken_install(tmp_path):
    v = _top(tmp_path, "after install vllm==0.8.5 torch becomes 2.6.0, then I get `flash_attn_2_cuda.cpython-311-"
                       "x86_64-linux-gnu.so: undefined symbol:` error again.\n")
    assert v.cls.value == "missing-dependency"


def test_c10d_store_timeouts_are_a_communication_failure(tmp_path):
    text = ("[E306 00:03:07.842961975 socket.cpp:1011] [c10d] The client socket has timed out after 60000ms while "
            "trying to connect to (10.0.0.12, 29400).\n")
    assert _top(tmp_path, text).cls.value == "nccl-error"


def test_a_gpu_still_held_by_an_old_instance_is_start_up_free_memory(tmp_path):
    v = _top(tmp_path, "After the first launch failed I killed every process, but the GPU memory is still occupied by "
                       "the old vLLM workers and the new server cannot start.\n")
    assert v.cls.value == "startup-free-memory" and v.confidence <= _CAP
