"""How a report's shape is read (issue 16, fresh misses by kind): an error hidden among serving lines, wrappers'
ready lines and log formats, other accelerators' memory and collective errors, tracebacks cut before their error
line. Small inputs written in the shapes these tools print (not corpus records)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomguard.cli.main import main
from oomguard.diagnose import scoring
from oomguard.diagnose.diagnosis import diagnose, prepare
from oomguard.diagnose.events import Signal
from oomguard.diagnose.lines import parse_line

_CAP = scoring.load().paraphrase_cap

V0_SERVING = (
    "INFO 03-02 10:11:12 api_server.py:712] vLLM API server version 0.6.4\n"
    "INFO:     Application startup complete.\n"
    "INFO 03-02 10:12:00 metrics.py:449] Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 3.1 tokens/s, "
    "Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.0%, CPU KV cache usage: 0.0%.\n"
    'INFO:     10.0.0.9:40000 - "POST /v1/completions HTTP/1.1" 200 OK\n'
)


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "report.log"
    p.write_text(text, encoding="utf-8")
    return str(p)


def _diagnose(tmp_path: Path, text: str):  # noqa: ANN202
    return diagnose([_write(tmp_path, text)])


def _signals(tmp_path: Path, text: str) -> list[Signal]:
    return [s.signal for s in prepare([_write(tmp_path, text)]).collector.signals]


# --- an explicit error among serving lines ---------------------------------------------------------------------

def test_device_side_assert_in_an_exception_repr_with_torch_boilerplate_is_read(tmp_path):
    # V0's engine logs the exception's repr on one line: the real error, then torch's boilerplate, which says
    # "enable device-side assertions" and must not hide "device-side assert triggered" before it.
    text = V0_SERVING + (
        "CRITICAL 03-02 10:12:03 launcher.py:99] MQLLMEngine is already dead, terminating server process\n"
        "ERROR 03-02 10:12:03 engine.py:135] RuntimeError('CUDA error: device-side assert triggered\\nCUDA kernel "
        "errors might be asynchronously reported at some other API call.\\nFor debugging consider passing "
        "CUDA_LAUNCH_BLOCKING=1\\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\\n')\n")
    d = _diagnose(tmp_path, text)
    assert d.verdicts and d.verdicts[0].cls.value == "illegal-memory-access"
    assert d.incomplete is None


def test_the_boilerplate_alone_is_still_not_an_illegal_access(tmp_path):
    text = "RuntimeError: CUDA error\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    assert Signal.ILLEGAL_MEMORY_ACCESS not in _signals(tmp_path, text)


def test_a_kernel_assert_named_operator_is_an_illegal_access(tmp_path):
    text = ("../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [12,0,0], thread: [3,0,0] Assertion "
            "`-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\n")
    assert Signal.ILLEGAL_MEMORY_ACCESS in _signals(tmp_path, text)


@pytest.mark.parametrize("line", [
    "CRITICAL 03-02 10:12:03 launcher.py:99] MQLLMEngine is already dead, terminating server process",
    "ERROR 03-02 10:12:03 launcher.py:101] AsyncLLMEngine is already dead, terminating server process",
    "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already.",
])
def test_v0_engine_death_after_serving_is_a_failure(tmp_path, line):
    assert Signal.ENGINE_DIED in _signals(tmp_path, V0_SERVING + line + "\n")
    assert _diagnose(tmp_path, V0_SERVING + line + "\n").verdicts


def test_a_5xx_answer_with_words_is_a_failure_not_a_running_server(tmp_path, capsys):
    text = ("The chat endpoint fails for every request with tools:\n" + V0_SERVING
            + 'INFO:     10.0.0.9:40002 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n')
    d = _diagnose(tmp_path, text)
    assert d.verdicts, "a server that answers 500 failed the request"
    assert any(c["feature"] == "serve:5xx" for c in d.verdicts[0].cues)
    # the real CLI: a finding, exit 1
    assert main(["diagnose", _write(tmp_path, text)]) == 1
    capsys.readouterr()


def test_4xx_answers_are_the_clients_and_the_server_is_running(tmp_path, capsys):
    text = (V0_SERVING + 'INFO:     10.0.0.9:40002 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n'
            'INFO:     10.0.0.9:40003 - "GET /v1/chat HTTP/1.1" 404 Not Found\n'
            "I get a 404 when I call the endpoint, the request fails\n")
    d = _diagnose(tmp_path, text)
    assert d.verdicts == [] and d.incomplete is None
    assert main(["diagnose", _write(tmp_path, text)]) == 0
    capsys.readouterr()


def test_an_error_record_after_the_server_came_up_keeps_a_word_verdict(tmp_path):
    # a wrapper's own ERROR record after vLLM served: the server failed under load, the words say which way
    words = "The request fails, it is not supported with images\n"
    served = ("INFO 03-12 09:29:12 async_llm_engine.py:211] Added request 75a1.\n"
              "INFO 03-12 09:29:12 async_llm_engine.py:188] Finished request 75a1.\n")
    error = "2025-03-12 09:29:12,291 xinference.core.model 822191 ERROR    [request 75a2] Leave chat, error: oops\n"
    assert _diagnose(tmp_path, words + served).verdicts == []
    assert _diagnose(tmp_path, words + served + error).verdicts


# --- wrappers: ready lines and log formats ------------------------------------------------------------------------

@pytest.mark.parametrize("ready", [
    "INFO 2025-02-01 10:00:00,000 serve 412 -- Application 'default' is ready at http://127.0.0.1:8000/.",
    "INFO 2025-02-01 10:00:00,000 serve 412 -- Deployed app 'llm' successfully.",
])
def test_ray_serve_ready_lines_mean_running(tmp_path, ready, capsys):
    text = ("INFO 02-01 09:58:00 [gpu_worker.py:298] Available KV cache memory: 20.00 GiB\n"
            "INFO 02-01 09:58:01 [kv_cache_utils.py:716] GPU KV cache size: 163,840 tokens\n" + ready + "\n")
    d = _diagnose(tmp_path, text)
    assert d.verdicts == [] and d.incomplete is None
    assert main(["diagnose", _write(tmp_path, text)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("raw, level, message", [
    ("2025-03-12 09:29:12,291 xinference.core.model 822191 ERROR    [request 1] Leave chat, error: x", "ERROR",
     "[request 1] Leave chat, error: x"),
    ("2025-12-23 12:11:33.205517+08:00 - gpustack.worker.backends.vllm - INFO - Starting vLLM model instance: q",
     "INFO", "Starting vLLM model instance: q"),
    ("2025-01-02 03:04:05,678 - vllm_ascend.worker.model_runner - WARNING - a warning", "WARNING", "a warning"),
])
def test_python_logging_levels_behind_a_timestamp(raw, level, message):
    line = parse_line("f", 1, raw)
    assert (line.level, line.message, line.prose) == (level, message, False)


def test_a_sentence_after_no_timestamp_is_not_a_log_record():
    assert parse_line("f", 1, "numpy 2 ERROR on import, what do I do").level is None


# --- other accelerators --------------------------------------------------------------------------------------------

def test_npu_out_of_memory_is_a_gpu_memory_oom_with_its_sizes(tmp_path):
    text = ("INFO 07-03 19:33:20 model_runner.py:1067] Loading model weights took 28.1 GB\n"
            "INFO 07-03 19:33:21 worker.py:200] Memory profiling takes 1.2 seconds\n"
            "ERROR 07-03 19:33:28 [multiproc_worker_utils.py:238] RuntimeError: NPU out of memory. Tried to allocate "
            "3.47 GiB (NPU 0; 60.97 GiB total capacity; 58.92 GiB already allocated; 58.92 GiB current active; "
            "1.66 GiB free; 58.95 GiB reserved in total by PyTorch)\n")
    p = prepare([_write(tmp_path, text)])
    oom = [s for s in p.collector.signals if s.signal == Signal.CUDA_OOM]
    assert oom and oom[0].numbers.get("total_gib") == pytest.approx(60.97)
    d = diagnose([_write(tmp_path, text)])
    assert d.verdicts[0].cls.value == "profile-oom"


def test_tpu_resource_exhausted_while_compiling_is_a_profile_oom(tmp_path):
    text = ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
            "in memory space hbm. Used 16.5G of 15.75G hbm. Exceeded hbm capacity by 768.0M.\n")
    assert Signal.CUDA_OOM in _signals(tmp_path, text)
    assert _diagnose(tmp_path, text).verdicts[0].cls.value == "profile-oom"


def test_grpc_resource_exhausted_without_memory_words_is_not_an_oom(tmp_path):
    text = "ERROR 05-01 10:00:00 [client.py:12] grpc status RESOURCE_EXHAUSTED: quota exceeded for this project\n"
    assert Signal.CUDA_OOM not in _signals(tmp_path, text)


@pytest.mark.parametrize("line", [
    "(VllmWorker rank=0 pid=48) ERROR 02-24 17:09:23 [multiproc_executor.py:546] RuntimeError: HCCL function error: "
    "HcclCommInitRootInfo(numRanks, &rootInfo, rank, &(comm->hcclComm_)), error code is 7",
    "ERROR 12-17 09:31:58 [engine.py:458] [ERROR] 2025-12-17-09:31:53 (PID:537, Device:0, RankID:-1) ERR02200 DIST "
    "call hccl api failed.",
    "(VllmWorker TP0 pid=9) ERROR 09-04 09:44:06 [multiproc_executor.py:596] RuntimeError: EI0007: [PID: 9] "
    "Failed to allocate resource[qp] with info [aicpu rank:0]. Reason: Memory resources are exhausted.",
    "ERROR 01-05 11:00:00 [core.py:700] RuntimeError: RCCL error: unhandled system error (run with NCCL_DEBUG=INFO)",
])
def test_hccl_and_rccl_errors_are_nccl_errors(tmp_path, line):
    assert Signal.NCCL_ERROR in _signals(tmp_path, line + "\n")
    assert _diagnose(tmp_path, line + "\n").verdicts[0].cls.value == "nccl-error"


# --- a traceback cut before its error line ---------------------------------------------------------------------

def test_a_cut_traceback_through_the_kv_cache_setup_during_profiling_is_a_memory_class(tmp_path):
    text = ("INFO 10-23 19:55:16 model_runner.py:1067] Loading model weights took 19.8557 GB\n"
            "INFO 10-23 19:55:16 enc_dec_model_runner.py:301] Starting profile run for multi-modal models.\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/dist-packages/vllm/engine/multiprocessing/engine.py", line 390, in run_mp_engine\n'
            "    engine = MQLLMEngine.from_engine_args(engine_args=engine_args,\n"
            '  File "/usr/lib/python3/dist-packages/vllm/engine/llm_engine.py", line 348, in __init__\n'
            "    self._initialize_kv_caches()\n"
            '  File "/usr/lib/python3/dist-packages/vllm/engine/llm_engine.py", line 483, in _initialize_kv_caches\n')
    d = _diagnose(tmp_path, text)
    v = d.verdicts[0]
    features = {c["feature"] for c in v.cues}
    assert {"paste-frame:kv-init", "cut-phase:profiling"} & features
    assert v.cls.value == "profile-oom"
    assert v.tier == "paraphrase" and v.confidence <= _CAP


def test_dist_init_frames_of_a_cut_traceback_are_a_collective_failure(tmp_path):
    text = ("(RayWorkerWrapper pid=7) ERROR 04-30 02:38:09 [worker_base.py:620] Traceback (most recent call last):\n"
            '(RayWorkerWrapper pid=7) ERROR 04-30 02:38:09 [worker_base.py:620]   File "/x/vllm/distributed/'
            'parallel_state.py", line 771, in init_world_group\n'
            '(RayWorkerWrapper pid=7) ERROR 04-30 02:38:09 [worker_base.py:620]   File "/x/torch/distributed/'
            'distributed_c10d.py", line 4981, in new_group\n')
    v = _diagnose(tmp_path, text).verdicts[0]
    assert v.cls.value == "nccl-error" and v.confidence <= _CAP


# --- what a client's error says about the server -------------------------------------------------------------

def test_a_clients_5xx_is_the_server_failing_a_request(tmp_path):
    text = ("openai.InternalServerError: Error code: 500 - {'object': 'error', 'message': 'Internal Server Error', "
            "'type': 'InternalServerError', 'code': 500}\n")
    v = _diagnose(tmp_path, text).verdicts[0]
    features = {c["feature"] for c in v.cues}
    assert {"sig:client-exception", "client:server-error"} <= features
    assert not v.summary.startswith("vLLM rejected the configuration")


def test_a_refused_connection_says_the_server_is_not_listening(tmp_path):
    text = ("requests.exceptions.ConnectionError: HTTPConnectionPool(host='localhost', port=8000): Max retries exceeded "
            "with url: /v1/completions (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object>: "
            "Failed to establish a new connection: [Errno 111] Connection refused'))\n")
    v = _diagnose(tmp_path, text).verdicts[0]
    assert "client:unreachable" in {c["feature"] for c in v.cues}
    assert v.cls.value == "unknown"


def test_kubectl_prefix_and_ray_serve_records_are_unwrapped():
    line = parse_line("f", 1, "[pod/vllm-7d9f/vllm] ERROR 06-23 14:21:48 [core.py:700] EngineCore failed to start.")
    assert (line.level, line.src, line.message) == ("ERROR", "core.py:700", "EngineCore failed to start.")
    line = parse_line("f", 1, "(ServeReplica:default:VLLMDeployment pid=1234) ERROR 2024-11-07 02:21:29,123 "
                              "default_VLLMDeployment kfcx7f0b -- Exception raised in creation task")
    assert (line.level, line.proc, line.message) == ("ERROR", "ServeReplica:default:VLLMDeployment pid=1234",
                                                      "Exception raised in creation task")


@pytest.mark.parametrize("text", [
    '(APIServer pid=1) INFO:     192.168.1.14:37188 - "GET /v1/models HTTP/1.1" 200 OK\n',
    '(APIServer pid=9) INFO:     127.0.0.1:46686 - "GET /v1/chat/completions HTTP/1.1" 401 Unauthorized\n',
    "(APIServer pid=1) INFO 02-06 09:17:20 [launcher.py:47] Route: /v1/models, Methods: GET\n",
    "│ INFO 03-21 20:19:24 [launcher.py:34] Route: /v1/embeddings, Methods: POST                          │\n",
    '{"id":"chatcmpl-8470","object":"chat.completion","created":1784699055,"model":"qwen3-32b","choices":[]}\n',
])
def test_the_servers_answers_and_route_list_mean_it_is_running(tmp_path, text):
    d = _diagnose(tmp_path, text)
    assert d.verdicts == [] and d.incomplete is None


def test_a_health_scrape_alone_is_not_an_answer_of_the_api(tmp_path):
    # "/health" and "/metrics" are polled by probes before the API is up too: they are not read as serving
    text = ("INFO 02-06 09:17:00 [api_server.py:1] vLLM API server version 0.9.1\n"
            'INFO:     10.0.0.2:40000 - "GET /metrics HTTP/1.1" 200 OK\n')
    assert _diagnose(tmp_path, text).incomplete is not None


def test_torch_npu_insufficient_memory_wording_and_its_sizes(tmp_path):
    text = ("RuntimeError: NPU memory is insufficient. Attempting to allocate 386.00 MiB (NPU 1; total capacity 29.49 GiB; "
            "allocated 28.90 GiB; currently active 28.90 GiB; free 171.96 MiB; PyTorch has reserved a total of 28.95 GiB)\n")
    oom = [s for s in prepare([_write(tmp_path, text)]).collector.signals if s.signal == Signal.CUDA_OOM]
    assert oom and oom[0].numbers["total_gib"] == pytest.approx(29.49)
    assert oom[0].numbers["alloc_gib"] == pytest.approx(386 / 1024)


def test_a_cut_traceback_in_a_request_handler_is_read_as_request_time(tmp_path):
    prefix = "(APIServer pid=298) ERROR 03-05 01:39:01 [api_server.py:1591] "
    text = (prefix + "Traceback (most recent call last):\n"
            + prefix + '  File "/x/vllm/entrypoints/openai/serving_chat.py", line 137, in create_chat_completion\n'
            + prefix + "    result = await self._run(prompt, params, request_id)\n")
    v = _diagnose(tmp_path, text).verdicts[0]
    assert "paste-frame:request" in {c["feature"] for c in v.cues} or v.cls.value == "runtime-oom"
    assert v.confidence <= _CAP


def test_a_404_on_models_from_a_misconfigured_client_is_a_running_server(tmp_path):
    text = ("I got the server started on 0.0.0.0:8000, but my front end gets weird errors:\n"
            '"GET /models HTTP/1.1" 404 Not Found\n')
    assert _diagnose(tmp_path, text).verdicts == []
