"""Shapes met in the public failure corpus (tests/data/calibration/failures_public.jsonl), issue 11 second pass."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose import scoring as _scoring
from tests.conftest import top_class

# The paraphrase tier's cap is fitted on leave-one-batch-out verdicts (scripts/train_diagnose.py fit_cap), not 0.5.
_CAP = _scoring.load().paraphrase_cap

ROOT = Path(__file__).resolve().parents[3]


def _top(tmp_path: Path, text: str) -> str:
    """The first verdict's class, or "(none)": some of these reports must give no verdict."""
    return top_class(tmp_path, text)


def test_title_first_then_profile_traceback_is_profile_oom(tmp_path):
    text = ("[Usage]: Getting OOM error while deploying a 70B model\n"
            "(VllmWorker rank=4 pid=555) ERROR 05-04 12:38:38 [multiproc_executor.py:380] Traceback (most recent call last):\n"
            '(VllmWorker rank=4 pid=555) ERROR 05-04 12:38:38 [multiproc_executor.py:380]   File "/x/vllm/v1/worker/gpu_worker.py", line 157, in determine_available_memory\n'
            "(VllmWorker rank=4 pid=555) ERROR 05-04 12:38:38 [multiproc_executor.py:380]     self.model_runner.profile_run()\n")
    assert _top(tmp_path, text) == "profile-oom"


def test_title_first_then_weights_loaded_is_not_weights_oom(tmp_path):
    text = ("[Bug]: OutOfMemoryError when loading a small model with a huge context length\n"
            "INFO 06-26 07:48:15 model_runner.py:160] Loading model weights took 15.2075 GB\n"
            "[rank0]: Traceback (most recent call last):\n")
    assert _top(tmp_path, text) == "profile-oom"


def test_console_newest_first_places_the_oom_in_graph_capture(tmp_path):
    text = ("engine.py :190 2024-02-03 03:44:03,976 Error initializing vLLM engine: CUDA out of memory. Tried to allocate "
            "112.00 MiB. GPU 0 has a total capacty of 44.35 GiB of which 53.38 MiB is free.\n"
            "INFO 02-03 03:43:49 model_runner.py:625] Capturing the model for CUDA graphs. This may lead to unexpected "
            "consequences if the model is not static.\n"
            "INFO 02-03 03:43:48 llm_engine.py:316] # GPU blocks: 7754, # CPU blocks: 2048\n")
    assert _top(tmp_path, text) == "cudagraph-oom"


def test_execute_model_wrapper_is_runtime(tmp_path):
    text = ("ERROR 12-19 09:33:44 engine.py:135] OutOfMemoryError('Error in model execution (input dumped to "
            "/tmp/err_execute_model_input_20241219-093344.pkl): CUDA out of memory. Tried to allocate 524.00 MiB. GPU 0 "
            "has a total capacity of 15.77 GiB of which 137.12 MiB is free.\n")
    assert _top(tmp_path, text) == "runtime-oom"


def test_dsa_boilerplate_after_a_cuda_oom_is_not_illegal_memory_access(tmp_path):
    text = ("RuntimeError: CUDA error: out of memory\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
    assert _top(tmp_path, text) != "illegal-memory-access"


@pytest.mark.parametrize("text", [
    "VllM ： NCCLerror: unhandled system error (run withNCCL DEBUG=INFo for details)\n",
    "ERROR 06-13 07:35:59 [core.py:517] cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: unhandled system error\n"
    "[2025-06-16 17:17:39] kilo:318:3584 [5] misc/ibvwrap.cc:183 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Cannot allocate memory\n",
], ids=["garbled", "ib-registration-not-host-oom"])
def test_nccl_spellings(tmp_path, text):
    assert _top(tmp_path, text) == "nccl-error"


@pytest.mark.parametrize("text", [
    "can someone help ? ValueError: As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one.\n",
    "{'error': {'message': 'As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one. None', 'type': 'BadRequestError', 'param': None, 'code': 400}}\n",
], ids=["sentence", "client-json"])
def test_chat_template_in_prose(tmp_path, text):
    assert _top(tmp_path, text) == "chat-template-error"


@pytest.mark.parametrize("text", [
    "[error]Please install vllm[audio] for audio support\n",
    "[Bug]: ModuleNotFoundError: No module named 'llguidance'\n",
], ids=["platform-prefix", "title"])
def test_missing_module_in_prose(tmp_path, text):
    assert _top(tmp_path, text) == "missing-dependency"


def test_vllm_warning_fallback_is_still_not_a_failure(tmp_path):
    text = "WARNING 06-13 07:35:59 [utils.py:10] Please install vllm[audio] for audio support; audio inputs are disabled\n"
    assert _top(tmp_path, text) == "(none)"


def test_kubernetes_kill_in_words_is_host_oom(tmp_path):
    assert _top(tmp_path, "Container is killed by Kubernetes when memory crosses the defined limit while model is loading.\n") == "host-oom"


def test_public_corpus_accuracy():
    spec = importlib.util.spec_from_file_location("diagnose_accuracy", ROOT / "benchmarks" / "diagnose_accuracy.py")
    acc = importlib.util.module_from_spec(spec)
    sys.modules["diagnose_accuracy"] = acc
    spec.loader.exec_module(acc)  # type: ignore[union-attr]
    results = acc.evaluate(with_context=False, records=acc.load_records(acc.PUBLIC_RECORDS))
    s = acc.summary(results)
    assert s["records"] >= 55
    assert s["accuracy"] >= 0.9, acc.misses(results)


def test_chat_template_in_backticks(tmp_path):
    text = ("`vllm serve deepseek-ai/DeepSeek-V3.2 --max-model-len 131072`\nan error occurred when invoking it\n"
            "`ValueError: As of transformers v4.44, default chat template is no longer allowed, so you must provide a "
            "chat template if the tokenizer does not define one.`\n")
    assert _top(tmp_path, text) == "chat-template-error"


@pytest.mark.parametrize("args", ["/root/models/Qwen3-8B", "serve /root/models/Qwen3-8B"])
def test_positional_model_to_the_api_server_is_fixed_with_model_flag(tmp_path, args):
    p = tmp_path / "paste.log"
    p.write_text(f"api_server.py: error: unrecognized arguments: {args}\n", encoding="utf-8")
    v = diagnose([str(p)]).verdicts[0]
    assert v.cls.value == "bad-argument"
    assert (v.fix[0].flag, v.fix[0].value) == ("--model", "/root/models/Qwen3-8B")


def test_report_of_another_process_places_a_bare_oom_at_startup_free_memory(tmp_path):
    text = ("There are other processes taking up about 15G of memory on the GPU, so why does it go OOM?\n"
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total "
            "capacity; 27.91 GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch)\n")
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "startup-free-memory"
    assert v.confidence <= _CAP  # it rests on the reporter's words


def test_other_process_words_do_not_override_a_traceback(tmp_path):
    text = ("Another process is using the GPU as well.\n"
            "Traceback (most recent call last):\n"
            '  File "/x/vllm/worker/model_runner.py", line 1024, in load_model\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB.\n")
    assert _top(tmp_path, text) == "weights-oom"


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "paste.log"
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_startup_free_memory_in_lower_case_title(tmp_path):
    text = ("[release 2.11][vllm] Distributed failures - free memory on device cuda:0 (19.77/22.05 GiB) on startup is "
            "less than desired GPU memory utilization (0.9, 19.84 GiB)\n")
    assert _top(tmp_path, text) == "startup-free-memory"


def test_flattened_traceback_frames_count(tmp_path):
    text = ('c x = self._get_prompt_logprobs_dict( ^^^^ File "/x/vllm/v1/worker/gpu_model_runner.py", line 4308, in '
            '_get_prompt_logprobs_dict logprobs = self.sampler.compute_logprobs(logits) ^^^^ File '
            '"/x/vllm/v1/sample/sampler.py", line 207, in compute_logprobs return logits.log_softmax(dim=-1)\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.71 GiB. GPU 0 has a total capacity of "
            "22.30 GiB of which 1.52 GiB is free.\n")
    assert _top(tmp_path, text) == "runtime-oom"


def test_oom_logged_by_the_chat_handler_is_runtime(tmp_path):
    text = ("vllm  | ERROR 02-11 08:25:49 serving_chat.py:661] torch.OutOfMemoryError: CUDA out of memory. Tried to "
            "allocate 1.15 GiB. GPU 0 has a total capac\n")
    assert _top(tmp_path, text) == "runtime-oom"


def test_torch_cuda_graphs_boilerplate_is_not_a_capture_hint(tmp_path):
    text = ("[Bug]: 运行时服务被撑爆导致的oom\n"
            "(EngineCore_DP0 pid=8402) ERROR 10-24 01:26:57 [core.py:710] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 960.00 MiB. GPU 0 has a total capacity of 79.14 GiB of which 712.75 MiB is free. Of the "
            "allocated memory 74.06 GiB is allocated by PyTorch, with 159.88 MiB allocated in private pools (e.g., CUDA "
            "Graphs), and 2.22 GiB is reserved by PyTorch but unallocated.\n")
    assert _top(tmp_path, text) == "runtime-oom"


def test_killed_due_to_high_memory_usage_is_host_oom(tmp_path):
    assert _top(tmp_path, "[Bug]: killed due to high memory usage\n") == "host-oom"


def test_cuda_kernel_assertion_lines_alone_are_a_device_fault(tmp_path):
    text = ("../aten/src/ATen/native/cuda/Indexing.cu:1284: indexSelectLargeIndex: block: [0,0,0], thread: [24,0,0] "
            "Assertion `srcIndex < srcSelectDimSize` failed.\n")
    assert _top(tmp_path, text) == "illegal-memory-access"


def test_ray_driver_without_gpu_is_placement(tmp_path):
    text = ("Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement group or running "
            "the driver on a GPU node.\n")
    assert _top(tmp_path, text) == "ray-placement-timeout"


def test_process_group_init_timeout_is_a_communication_failure(tmp_path):
    text = ("RuntimeError: Timed out initializing process group in store based barrier on rank: 1, for key: "
            "store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:30:00)\n")
    assert _top(tmp_path, text) == "nccl-error"


def test_v0_profile_oom_without_known_length_keeps_the_context_first(tmp_path):
    text = ("INFO 06-26 07:48:15 model_runner.py:160] Loading model weights took 15.2075 GB\n"
            "[rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "/x/vllm/worker/worker.py", line 175, in determine_num_available_blocks\n'
            "[rank0]:     self.model_runner.profile_run()\n"
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 GiB.\n")
    v = diagnose([_write(tmp_path, text)]).verdicts[0]
    assert v.cls.value == "profile-oom"
    # V0 rejects --max-num-batched-tokens below max_model_len without chunked prefill: never offered alone
    # (which of the two comes first is the fitted fix ranker's choice: diagnose/fixes_rank.py)
    assert set([f.flag for f in v.fix][:2]) == {"--enable-chunked-prefill", "--max-model-len"}
