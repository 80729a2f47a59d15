"""Issue 11: traceback shapes, healthy corpus, incomplete logs, paraphrases, wrapped messages, new classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomguard.cli.main import main
from oomguard.diagnose import diagnose_paths
from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose import scoring as _scoring

# The paraphrase tier's cap is fitted on leave-one-batch-out verdicts (scripts/train_diagnose.py fit_cap), not 0.5.
_CAP = _scoring.load().paraphrase_cap

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests" / "fixtures" / "logs"
STARTUP = ROOT / "tests" / "data" / "calibration" / "startup.jsonl"

SHAPES = {
    "rank-prefixed-profile-oom.log": "profile-oom",
    "ipython-weights-oom.txt": "weights-oom",
    "ray-wrapped-cudagraph-oom.log": "cudagraph-oom",
    "trimmed-indented-sampler-oom.md": "profile-oom",
    "interleaved-runtime-oom.log": "runtime-oom",
    "rich-capture-oom.txt": "cudagraph-oom",
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_traceback_shapes(name):
    d = diagnose([str(LOGS / "shapes" / name)])
    assert [v.cls.value for v in d.verdicts][:1] == [SHAPES[name]], [(v.cls.value, v.confidence) for v in d.verdicts]
    # One run, one GPU OOM: the re-reports (Ray, engine core, API server) do not become other phases.
    assert len([v for v in d.verdicts if v.cls.value.endswith("-oom")]) == 1


def test_engine_crash_names_the_root_error():
    d = diagnose([str(LOGS / "shapes" / "engine-crash-root-error.log")])
    top = d.verdicts[0]
    assert "AssertionError: num_computed_tokens" in top.summary and "consequence" in top.summary
    assert len(d.verdicts) == 1


# --- healthy corpus: no failure verdict, ever -------------------------------
HEALTHY = sorted((LOGS / "healthy").iterdir())


@pytest.mark.parametrize("path", HEALTHY, ids=[p.name for p in HEALTHY])
def test_healthy_logs_have_no_verdict(path):
    d = diagnose([str(path)])
    assert d.verdicts == [], [(v.cls.value, v.evidence[0].text) for v in d.verdicts]
    assert d.complete  # each reaches the ready line


def _startup_records():
    with open(STARTUP, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_public_startup_excerpts_have_no_failure_verdict(tmp_path):
    alarms = []
    for rec in _startup_records():
        if rec.get("startup_outcome") not in (None, "success"):
            continue
        p = tmp_path / f"{rec['id']}.log"
        p.write_text(rec.get("raw_excerpt") or "", encoding="utf-8")
        d = diagnose([str(p)])
        alarms += [(rec["id"], v.cls.value) for v in d.verdicts]
    assert alarms == []


@pytest.mark.parametrize("line", [
    "INFO 10-10 05:34:54 model_runner.py:1389] CUDA graphs can take additional 1~3 GiB memory per GPU. If you are "
    "running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode.",
    "WARNING 10-10 05:33:59 arg_utils.py:930] The model has a long context length (131072). This may cause OOM errors "
    "during the initial memory profiling phase, or result in low performance due to small KV cache space.",
    "INFO 10-10 05:36:10 logger.py:37] Received request chat-1: prompt: 'torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 2.00 GiB. My pod was OOMKilled', params: SamplingParams(n=1)",
    "WARNING 05-01 10:00:18 [topk_topp_sampler.py:69] FlashInfer is not available. Falling back to the PyTorch-native "
    "implementation of top-p & top-k sampling. For the best performance, please install FlashInfer.",
    "WARNING 11-20 08:01:05 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('libcuda.so.1: cannot "
    "open shared object file: No such file or directory')",
    "2c1e8a3b9d4f:1:1 [0] NCCL INFO Channel 00/02 :    0   1",
])
def test_advice_and_echo_lines_are_not_failures(tmp_path, line):
    p = tmp_path / "vllm.log"
    p.write_text(line + "\n")
    assert diagnose([str(p)]).verdicts == []


# --- incomplete logs ------------------------------------------------------
def _cli(capsys, *args):
    code = main(["diagnose", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_log_cut_during_loading_is_incomplete_exit_3(tmp_path, capsys):
    lines = (LOGS / "healthy" / "v0.8.5-v1.log").read_text().splitlines()
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(lines[:12]) + "\n")
    d = diagnose([str(cut)])
    assert d.verdicts == [] and d.incomplete is not None and d.incomplete.phase.label == "loading"
    assert any("dmesg" in c for c in d.incomplete.collect)
    code, out, err = _cli(capsys, str(cut), "--format", "json")
    assert code == 3, err
    data = json.loads(out)
    assert data["incomplete"]["stopped_during"] == "loading" and data["verdicts"] == []
    code, out, _ = _cli(capsys, str(cut))
    assert code == 3 and "incomplete" in out and "clean start" not in out


def test_thin_margin_says_what_is_likely(tmp_path):
    p = tmp_path / "cut.log"
    p.write_text("INFO 01-27 00:31:40 [api_server.py:1] vLLM API server version 0.11.0\n"
                 "INFO 01-27 00:31:44 [gpu_model_runner.py:1] Starting to load model openai/gpt-oss-120b...\n"
                 "INFO 01-27 00:31:59 [gpu_model_runner.py:3905] Model loading took 68.38 GiB memory and 14.4 seconds\n")
    d = diagnose([str(p)], gpu="H100 80GB")
    assert d.incomplete is not None and d.incomplete.phase.label == "profiling"
    assert d.incomplete.likely and "profile-oom" in d.incomplete.likely and d.incomplete.confidence < 0.5


def test_text_without_anything_known_is_unrecognised_not_clean(tmp_path, capsys):
    p = tmp_path / "notes.txt"
    p.write_text("we restarted the box yesterday and it has been fine since\n")
    d = diagnose([str(p)])
    assert d.verdicts == [] and d.incomplete is not None and d.incomplete.reason == "unrecognised"
    assert any("--ask" in c for c in d.incomplete.collect)
    code, out, _ = _cli(capsys, str(p))
    assert code == 3 and "No failure found" not in out


# --- paraphrases, English and Chinese --------------------------------------
@pytest.mark.parametrize("text,cls", [
    ("模型加载的时候显存不足，直接挂了", "weights-oom"),
    ("vllm 启动后推理的时候 OOM 了，并发一高就挂", "runtime-oom"),
    ("服务跑着跑着被 OOM killer 杀掉了", "host-oom"),
    ("KV 缓存不够，max_model_len 设成 128k 就起不来", "kv-too-small"),
    ("It ran out of GPU memory while loading the weights of the 70B model on one card.", "weights-oom"),
    ("After an hour under load the kernel killed it, no error in the vLLM log at all.", "host-oom"),
])
def test_paraphrases_are_lower_confidence(tmp_path, text, cls):
    p = tmp_path / "issue.txt"
    p.write_text(text + "\n", encoding="utf-8")
    d = diagnose([str(p)])
    assert d.verdicts and d.verdicts[0].cls.value == cls, [(v.cls.value, v.confidence) for v in d.verdicts]
    assert d.verdicts[0].confidence <= _CAP and d.verdicts[0].to_dict()["tier"] == "paraphrase"


# --- wrapped, lower-cased and truncated vLLM messages ----------------------
@pytest.mark.parametrize("text", [
    "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is\n"
    "needed, which is larger than the available KV cache memory (9.47 GiB). Based on the available memory, the\n"
    "Estimated maximum model length is 77552. Try increasing `gpu_memory_utilization` or decreasing `max_model_len`",
    "valueerror: to serve at least one request with the models's max seq len (131072), (16.00 gib kv cache is needed, "
    "which is larger than the available kv cache memory (9.47 gib). based on the available memory, the estimated "
    "maximum model length is 77552.",
    "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be\n"
    "stored in KV cache (77552). Try increasing `gpu_memory_utilization`",
    "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, wh",
])
def test_wrapped_kv_messages(tmp_path, text):
    p = tmp_path / "vllm.log"
    p.write_text(text + "\n")
    d = diagnose([str(p)])
    assert d.verdicts and d.verdicts[0].cls.value == "kv-too-small"
    if "77552" in text and "stored in" not in text:
        assert any(f.flag == "--max-model-len" and f.value == 77552 for f in d.verdicts[0].fix)


@pytest.mark.parametrize("text", [
    "Warning  OOMKilled  pod/vllm-0  Container vllm was OOMKilled (exit code 137)",
    "[Mon May  5 10:00:01 2025] Out of memory: Killed process 4242 (python3) total-vm:99999999kB, anon-rss:88888888kB",
    "May 05 10:00:01 host systemd[1]: vllm.service: Failed with result 'oom-kill'.",
    "the vllm container keeps getting OOM killed during start-up",
])
def test_oom_killer_wording_is_host_oom(tmp_path, text):
    p = tmp_path / "x.log"
    p.write_text(text + "\n")
    d = diagnose([str(p)])
    assert d.verdicts and d.verdicts[0].cls.value == "host-oom", [(v.cls.value, v.confidence) for v in d.verdicts]
    assert all(not v.cls.value.endswith("-oom") or v.cls.value == "host-oom" for v in d.verdicts)


def test_diagnose_paths_is_the_stable_entry_point():
    d = diagnose_paths([str(LOGS / "shapes" / "interleaved-runtime-oom.log")])
    assert d.verdicts[0].cls.value == "runtime-oom" and d.to_dict()["verdicts"][0]["class"] == "runtime-oom"


# --- fixes the planner has checked -----------------------------------------
KV_LOG = (
    "(APIServer pid=1) INFO 10-06 12:00:01 [api_server.py:1839] vLLM API server version 0.11.0\n"
    "(APIServer pid=1) INFO 10-06 12:00:01 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-8B', "
    "'max_model_len': 40960}\n"
    "(EngineCore_DP0 pid=201) ERROR 10-06 12:01:13 [core.py:700] ValueError: To serve at least one request with the "
    "models's max seq len (40960), (5.62 GiB KV cache is needed, which is larger than the available KV cache memory "
    "(4.20 GiB). Based on the available memory, the estimated maximum model length is 30576. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n")


def test_max_model_len_fix_is_checked_and_never_above_vllms_estimate(tmp_path):
    p = tmp_path / "vllm.log"
    p.write_text(KV_LOG)
    d = diagnose_paths([str(p)], gpu="RTX 4090")
    fix = next(f for f in d.verdicts[0].fix if f.flag == "--max-model-len")
    assert fix.value <= 30576 and fix.checked and fix.checked.startswith("starts")


SF_LOG = (
    "INFO 05-01 10:00:03 [api_server.py:1043] vLLM API server version 0.11.0\n"
    "INFO 05-01 10:00:03 [utils.py:309] non-default args: {'model': 'Qwen/Qwen3-8B', 'max_model_len': 32768}\n"
    "ERROR 05-01 10:00:20 [core.py:515] ValueError: Free memory on device (30.2/79.19 GiB) on startup is less than "
    "desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
    "other processes.\n")


def test_co_resident_process_gets_a_checked_kv_cache_memory_bytes(tmp_path):
    p = tmp_path / "vllm.log"
    p.write_text(SF_LOG)
    d = diagnose_paths([str(p)], gpu="H100 80GB")
    v = d.verdicts[0]
    assert v.cls.value == "startup-free-memory" and "48.99 GiB" in v.summary
    kv = next(f for f in v.fix if f.flag == "--kv-cache-memory-bytes")
    assert isinstance(kv.value, int) and kv.checked.startswith("starts")
    assert v.fix[0] is kv  # the fix that starts comes first
    util = next(f for f in v.fix if f.flag == "--gpu-memory-utilization")
    assert util.value <= 30.2 / 79.19  # never above what is free


def test_old_version_has_no_kv_cache_memory_bytes(tmp_path):
    p = tmp_path / "vllm.log"
    p.write_text(SF_LOG.replace("0.11.0", "0.9.1"))
    d = diagnose_paths([str(p)], gpu="H100 80GB")
    kv = next(f for f in d.verdicts[0].fix if f.flag == "--kv-cache-memory-bytes")
    assert kv.checked.startswith("fails") and "0.9.1" in kv.checked


def test_text_only_model_never_gets_multimodal_fixes(tmp_path):
    p = tmp_path / "issue.txt"
    p.write_text("Qwen3-8B OOMs during the profile run with the vision encoder settings from the docs; "
                 "--limit-mm-per-prompt did not help\n")
    d = diagnose([str(p)], model="Qwen/Qwen3-8B")
    assert d.context.config_multimodal is False
    assert all(f.flag != "--limit-mm-per-prompt" for v in d.verdicts for f in v.fix)
    d = diagnose([str(p)], model="Qwen/Qwen2.5-VL-7B-Instruct")
    assert d.context.config_multimodal is True


# --- several files, one story ------------------------------------------------
def test_launch_and_log_disagree_is_said(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(KV_LOG)
    launch = tmp_path / "start_api.sh"
    launch.write_text("vllm serve Qwen/Qwen3-8B --max-model-len 65536\n")
    d = diagnose([str(log)], launch_text=launch.read_text())
    bad = [c for c in d.agreement if not c["agree"]]
    assert bad and "max_model_len=65536" in bad[0]["detail"] and "40960" in bad[0]["detail"]
    assert d.to_dict()["facts"]["agreement"] == d.agreement


def test_gpu_option_vs_log(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
                   "of 79.19 GiB of which 1.00 GiB is free.\n")
    d = diagnose([str(log)], gpu="A100 40GB")
    assert [c["agree"] for c in d.agreement if c["check"] == "gpu"] == [False]
    d = diagnose([str(log)], gpu="H100 80GB")
    assert [c["agree"] for c in d.agreement if c["check"] == "gpu"] == [True]


def test_kernel_victim_matches_the_vllm_process_and_timeline_is_merged():
    d = diagnose([str(LOGS / "host-oom-dmesg.txt"), str(LOGS / "host-oom-vllm.log")])
    assert any(c["check"] == "oom-kill victim" and c["agree"] for c in d.agreement)
    files = [e["file"] for e in d.to_dict()["facts"]["timeline"]]
    assert len(set(files)) == 2


@pytest.mark.parametrize("text,cls,flag", [
    ("ValueError: User-specified max_model_len (262144) is greater than the derived max_model_len\n"
     "(max_position_embeddings=40960 or model_max_length=None in model's config.json).", "max-len-exceeds-model",
     "--max-model-len"),
    ("ValueError: The checkpoint you are trying to load has model type `qwen3_moe` but Transformers does not "
     "recognize this architecture.", "missing-dependency", "pip"),
    ("huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url "
     "https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json. Access to model meta-llama/Llama-3.1-8B "
     "is restricted. You must have access to it and be authenticated to access it.", "bad-argument", "HF_TOKEN"),
    ("ERROR 04-01 10:00:00 [core.py:1] RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for "
     "details)\nNCCL WARN Cuda failure 'peer access is not supported between these two devices'", "nccl-error",
     "NCCL_P2P_DISABLE"),
    ("ValueError: Cannot use chat template functions because tokenizer.chat_template is not set and no template "
     "argument was passed!", "chat-template-error", "--chat-template"),
])
def test_more_messages(tmp_path, text, cls, flag):
    p = tmp_path / "x.log"
    p.write_text(text + "\n")
    d = diagnose([str(p)])
    assert d.verdicts and d.verdicts[0].cls.value == cls, [(v.cls.value, v.confidence) for v in d.verdicts]
    assert flag in [f.flag for f in d.verdicts[0].fix]


def test_real_vllm_cpu_log_cut_before_ready_is_incomplete(tmp_path):
    """The real vLLM 0.32 CPU start (tests/fixtures/logs/healthy/vllm-cpu-0.32-serve-one-request.log) cut after
    the weights: no verdict, incomplete, and the full log is a clean start that reached serving."""
    real = LOGS / "healthy" / "vllm-cpu-0.32-serve-one-request.log"
    full = diagnose([str(real)])
    assert full.verdicts == [] and full.complete and full.collector.phase_reached.label == "serving"
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(real.read_text().splitlines()[:45]) + "\n")
    d = diagnose([str(cut)])
    assert d.verdicts == [] and d.incomplete is not None
    assert d.incomplete.phase.label in ("loading", "profiling")


def test_ray_placement_requested_vs_available_from_ray_status(tmp_path):
    p = tmp_path / "ray.log"
    p.write_text((LOGS / "ray-placement-timeout.log").read_text() + "Usage:\n 0.0/96.0 CPU\n 0.0/4.0 GPU\n")
    v = diagnose([str(p)]).verdicts[0]
    assert v.cls.value == "ray-placement-timeout" and "8 GPUs" in v.summary and "offers 4" in v.summary
    assert ("--pipeline-parallel-size", 1) in [(f.flag, f.value) for f in v.fix]


@pytest.mark.parametrize("text,flag", [
    ("RuntimeError: Failed to infer device type", "CUDA_VISIBLE_DEVICES"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "pip"),
    ("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
     "'spawn' start method", "VLLM_WORKER_MULTIPROC_METHOD"),
    ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 81920, Hardware limit: 65536.",
     "--enforce-eager"),
])
def test_machine_cannot_run_the_launch_is_config_error(tmp_path, text, flag):
    p = tmp_path / "x.log"
    p.write_text(text + "\n")
    v = diagnose([str(p)]).verdicts[0]
    assert v.cls.value == "config-error" and flag in [f.flag for f in v.fix]


def test_utilization_below_the_weights_is_not_offered_as_a_fix(tmp_path):
    p = tmp_path / "vllm.log"
    p.write_text("INFO 05-01 10:00:03 [cli_args.py:309] non-default args: {'model': 'meta-llama/Llama-3.3-70B-Instruct', "
                 "'tensor_parallel_size': 2}\n"
                 "ERROR 05-01 10:00:20 [core.py:515] ValueError: Free memory on device (30.2/79.19 GiB) on startup is less "
                 "than desired GPU memory utilization (0.9, 71.27 GiB).\n")
    v = diagnose([str(p)]).verdicts[0]
    util = next(f for f in v.fix if f.flag == "--gpu-memory-utilization")
    assert "cannot hold" in util.why and any("below the weights" in n for n in v.numbers)
