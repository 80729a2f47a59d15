"""Each hand-written fixture (one per failure class and log format) classifies as expected."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from oomguard.diagnose.classes import FailureClass, InputKind
from oomguard.diagnose.diagnosis import diagnose

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

# fixture -> (expected top class, a fix flag it must name, the phase label, input kind)
EXPECTED = {
    "v1-weights-oom-load.log": ("weights-oom", "--tensor-parallel-size", "loading", "vllm-log"),
    "v0-weights-oom.log": ("weights-oom", "--tensor-parallel-size", None, "vllm-log"),
    "interleaved-tp-weights-oom.log": ("weights-oom", "--tensor-parallel-size", "loading", "vllm-log"),
    "v1-profile-oom.log": ("profile-oom", "--max-num-batched-tokens", "profiling", "vllm-log"),
    "v1-sampler-warmup-oom.log": ("profile-oom", "--max-num-seqs", None, "vllm-log"),
    "ansi-compose-multimodal-profile-oom.log": ("profile-oom", "--limit-mm-per-prompt", "profiling", "vllm-log"),
    "v1-cudagraph-oom.log": ("cudagraph-oom", "--enforce-eager", "graph-capture", "vllm-log"),
    "v0-cudagraph-oom.log": ("cudagraph-oom", "--enforce-eager", "graph-capture", "vllm-log"),
    "v1-runtime-oom.log": ("runtime-oom", "--max-num-batched-tokens", "serving", "vllm-log"),
    "v1-no-kv-memory.log": ("no-kv-memory", "--gpu-memory-utilization", "kv-cache", "vllm-log"),
    "v0-no-kv-negative.log": ("no-kv-memory", "--gpu-memory-utilization", "kv-cache", "vllm-log"),
    "k8s-cri-no-kv.log": ("no-kv-memory", "--gpu-memory-utilization", "kv-cache", "vllm-log"),
    "v1-kv-too-small.log": ("kv-too-small", "--max-model-len", "kv-cache", "vllm-log"),
    "v0-kv-too-small.log": ("kv-too-small", "--max-model-len", None, "vllm-log"),
    "docker-json-kv-too-small.log": ("kv-too-small", "--max-model-len", None, "vllm-log"),
    "startup-free-memory.log": ("startup-free-memory", "--gpu-memory-utilization", None, "vllm-log"),
    "host-oom-dmesg.txt": ("host-oom", None, None, "kernel-log"),
    "host-oom-cgroup-journal.txt": ("host-oom", None, None, "kernel-log"),
    "host-oom-vllm.log": ("host-oom", None, None, "vllm-log"),
    "illegal-memory-access.log": ("illegal-memory-access", "--enforce-eager", "serving", "vllm-log"),
    "bad-argument-swap-space.log": ("bad-argument", "--swap-space", None, "vllm-log"),
    "bad-argument-cuda-graph-sizes.log": ("bad-argument", "--cudagraph-capture-sizes", None, "vllm-log"),
    "model-not-found.log": ("bad-argument", None, None, "vllm-log"),
    "max-len-exceeds.log": ("max-len-exceeds-model", "--max-model-len", None, "vllm-log"),
    "config-error-tp.log": ("config-error", "--tensor-parallel-size", None, "vllm-log"),
    "mamba-state-limit.log": ("mamba-state-limit", "--max-num-seqs", None, "vllm-log"),
    "missing-dependency.log": ("missing-dependency", "pip", None, "vllm-log"),
    "chat-template-error.log": ("chat-template-error", "--chat-template", None, "vllm-log"),
    "nccl-shm.log": ("nccl-error", "docker", None, "vllm-log"),
    "ray-placement-timeout.log": ("ray-placement-timeout", "ray", None, "vllm-log"),
}
CLEAN = {
    "v1-clean-start.log": "vllm-log",
    "v0-clean-start.log": "vllm-log",
    "nvidia-smi-table.txt": "nvidia-smi",
    "nvidia-smi-watch.csv": "nvidia-smi-csv",
    "nvidia-smi-noheader.csv": "nvidia-smi-csv",
    "nvidia-smi-topo.txt": "nvidia-smi-topo",
}


def test_every_class_has_a_fixture():
    covered = {cls for cls, *_ in EXPECTED.values()}
    assert covered == {c.value for c in FailureClass} - {"unknown"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_classifies(name):
    expected, flag, phase, kind = EXPECTED[name]
    d = diagnose([str(LOGS / name)])
    assert d.inputs[0].kind == InputKind(kind)
    assert d.verdicts, f"{name}: no verdict"
    top = d.verdicts[0]
    assert top.cls.value == expected, [(v.cls.value, v.confidence) for v in d.verdicts]
    assert top.summary and top.evidence
    assert all(e.line > 0 and e.text for e in top.evidence)
    if flag:
        assert flag in [f.flag for f in top.fix], [f.flag for f in top.fix]
    if phase:
        assert top.phase.label == phase


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_clean_inputs_give_no_verdict(name):
    d = diagnose([str(LOGS / name)])
    assert d.verdicts == []
    assert d.inputs[0].kind.value == CLEAN[name]


def test_clean_start_facts():
    d = diagnose([str(LOGS / "v1-clean-start.log")])
    facts = d.to_dict()["facts"]
    assert facts["version"] == "0.11.0"
    assert facts["engine"] == "V1"
    assert facts["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert facts["phase_reached"] == "serving"  # requests were served; an idle metrics line does not rewind
    names = {m["name"] for m in facts["memory"]}
    assert {"weights", "kv_available", "kv_tokens", "max_concurrency", "cuda_graph"} <= names
    assert facts["requests_in_flight"]["running"] == 0
    # The API key in the non-default args is redacted everywhere.
    assert "sk-proj" not in str(d.to_dict())


def test_numbers_become_fix_values():
    d = diagnose([str(LOGS / "v1-kv-too-small.log")])
    fixes = {f.flag: f.value for f in d.verdicts[0].fix}
    assert fixes["--max-model-len"] == 34736  # "the estimated maximum model length is 34736"
    d = diagnose([str(LOGS / "startup-free-memory.log")])
    fixes = {f.flag: f.value for f in d.verdicts[0].fix}
    assert fixes["--gpu-memory-utilization"] == pytest.approx(0.24)  # 20.1 free of 79.19 GiB
    d = diagnose([str(LOGS / "mamba-state-limit.log")])
    assert {f.flag: f.value for f in d.verdicts[0].fix}["--max-num-seqs"] <= 969
    d = diagnose([str(LOGS / "max-len-exceeds.log")])
    assert {f.flag: f.value for f in d.verdicts[0].fix}["--max-model-len"] == 4096


def test_renamed_flag_gets_new_spelling_with_user_values():
    d = diagnose([str(LOGS / "bad-argument-cuda-graph-sizes.log")])
    fixes = {f.flag: f for f in d.verdicts[0].fix}
    assert fixes["--cudagraph-capture-sizes"].value == "1 2 4 8 16 32"
    assert "0.13" in fixes["--cudagraph-capture-sizes"].why
    swap = diagnose([str(LOGS / "bad-argument-swap-space.log")]).verdicts[0].fix[0]
    assert swap.flag == "--swap-space" and swap.value is None and "0.18" in swap.why


def test_host_oom_from_dmesg_next_to_vllm_log():
    d = diagnose([str(LOGS / "host-oom-vllm.log"), str(LOGS / "host-oom-dmesg.txt")])
    top = d.verdicts[0]
    assert top.cls == FailureClass.HOST_OOM and top.confidence >= 0.9
    assert any("Killed process 2381" in e.text for e in top.evidence)
    kills = d.to_dict()["facts"]["kernel_oom_kills"]
    assert kills[0]["pid"] == 2381 and kills[0]["anon_rss_bytes"] == 31502232 * 1024
    # the launch used --cpu-offload-gb, which lives in host RAM
    assert "--cpu-offload-gb" in [f.flag for f in top.fix]


def test_cgroup_kill_names_the_limit():
    d = diagnose([str(LOGS / "host-oom-cgroup-journal.txt")])
    kill = d.to_dict()["facts"]["kernel_oom_kills"][0]
    assert kill["constraint"] == "CONSTRAINT_MEMCG"
    assert kill["cgroup"].startswith("/kubepods/")
    assert any("limit" in n for n in d.verdicts[0].numbers)


def test_vllm_killing_itself_is_not_a_host_oom():
    # The sampler warm-up log ends with vLLM's own shutdown and the shell's "Killed".
    d = diagnose([str(LOGS / "v1-sampler-warmup-oom.log")])
    assert [v.cls.value for v in d.verdicts] == ["profile-oom"]


def test_exit_code_137_without_gpu_error_is_host_oom():
    d = diagnose([str(LOGS / "v1-clean-start.log")], exit_code=137)
    assert d.verdicts[0].cls == FailureClass.HOST_OOM
    d = diagnose([str(LOGS / "v1-cudagraph-oom.log")], exit_code=137)
    assert d.verdicts[0].cls == FailureClass.CUDAGRAPH_OOM


def test_gpu_oom_phase_decides_the_class():
    """The same OOM text is a different failure at load, in the profile run, in capture, or serving."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 0.50 GiB is free."
    cases = {
        "INFO 01-01 00:00:00 [gpu_model_runner.py:1] Starting to load model x...": "weights-oom",
        "INFO 01-01 00:00:00 [gpu_model_runner.py:1] Model loading took 10.0 GiB and 3.0 seconds": "profile-oom",
        "INFO 01-01 00:00:00 [gpu_model_runner.py:1] Capturing CUDA graphs (decode, FULL): 10%": "cudagraph-oom",
        "INFO 01-01 00:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 5.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%": "runtime-oom",
    }
    for marker, expected in cases.items():
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as fh:
            fh.write(marker + "\n" + oom + "\n")
        d = diagnose([fh.name])
        Path(fh.name).unlink()
        assert d.verdicts[0].cls.value == expected, marker
