"""nvidia-smi parsing, redaction, renamed-flag hints and launch parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose.flags import hint_for, split_unrecognized
from oomguard.diagnose.launch import parse_launch
from oomguard.diagnose.redact import MASK, redact, redact_obj
from oomguard.inputs.nvidia_smi import NvidiaSmiParser, looks_like_csv, looks_like_table, parse_nvidia_smi

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
MiB = 1 << 20


# --- nvidia-smi ----------------------------------------------------------
def test_default_table_gpus_and_processes():
    text = (LOGS / "nvidia-smi-table.txt").read_text()
    assert looks_like_table(text) and not looks_like_csv(text)
    report = parse_nvidia_smi(text)
    assert report.driver_version == "550.54.15" and report.cuda_version == "12.4"
    assert sorted(report.gpus) == [0, 1]
    g0 = report.gpus[0]
    assert g0.name == "NVIDIA H100 80GB HBM3"
    assert g0.peak.memory_used_bytes == 60102 * MiB and g0.memory_total_bytes == 81559 * MiB
    assert [(p.pid, p.used_memory_bytes) for p in report.processes] == [(44182, 59620 * MiB), (51007, 470 * MiB)]


def test_csv_series_peak_and_steps():
    report = parse_nvidia_smi((LOGS / "nvidia-smi-watch.csv").read_text())
    g = report.gpus[0]
    assert g.num_samples == 8
    assert g.peak.memory_used_bytes == 81037 * MiB
    assert g.peak.timestamp == "2025/05/01 19:04:56.114"
    jumps = [(s.from_bytes // MiB, s.to_bytes // MiB) for s in g.steps]
    assert (2110, 29874) in jumps and (31010, 73120) in jumps and (81037, 4) in jumps
    assert g.last.memory_used_bytes == 4 * MiB


def test_csv_without_header_guesses_columns():
    report = parse_nvidia_smi((LOGS / "nvidia-smi-noheader.csv").read_text())
    assert sorted(report.gpus) == [0, 1]
    assert report.gpus[0].peak.memory_used_bytes == 71230 * MiB
    assert report.gpus[0].memory_total_bytes == 81920 * MiB


def test_watch_of_default_table_is_a_series():
    one = (LOGS / "nvidia-smi-table.txt").read_text()
    watch = "Every 1.0s: nvidia-smi     host: Mon Feb  3 12:00:15 2025\n\n" + one + "\n" + one.replace("60102MiB", "80102MiB")
    parser = NvidiaSmiParser("table")
    for i, line in enumerate(watch.splitlines(), 1):
        parser.feed(i, line)
    report = parser.report()
    assert report.num_snapshots == 2
    assert report.gpus[0].peak.memory_used_bytes == 80102 * MiB
    assert report.gpus[0].steps and report.gpus[0].steps[0].to_bytes == 80102 * MiB


def test_nvidia_smi_facts_next_to_a_failure():
    d = diagnose([str(LOGS / "startup-free-memory.log"), str(LOGS / "nvidia-smi-table.txt")])
    assert d.verdicts[0].cls.value == "startup-free-memory"
    smi = d.to_dict()["facts"]["nvidia_smi"][0]
    assert smi["processes"][0]["pid"] == 44182
    assert smi["gpus"][0]["peak_used_bytes"] == 60102 * MiB


def test_topology_kept_raw_or_parsed():
    d = diagnose([str(LOGS / "nvidia-smi-topo.txt")])
    assert d.inputs[0].kind.value == "nvidia-smi-topo"
    topo = d.to_dict()["facts"]["topology"][0]
    assert "parsed" in topo or "GPU0" in topo["raw"]


# --- redaction -----------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abcdef0123456789abcdef", "abcdef0123456789abcdef"),
        ("authorization=Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("curl -H 'X-API-Key: key-1234567890'", "key-1234567890"),
        ("export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123"),
        ("HUGGING_FACE_HUB_TOKEN='tok-secret-value'", "tok-secret-value"),
        ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
        ("vllm serve m --api-key s3cr3t-value --port 1", "s3cr3t-value"),
        ("vllm serve m --api-key=s3cr3t-value", "s3cr3t-value"),
        ("non-default args: {'api_key': ['token-abc-123'], 'model': 'x'}", "token-abc-123"),
        ("args: Namespace(api_key='hunter2hunter2', model='x')", "hunter2hunter2"),
        ("pulling from https://user:p4ssw0rd@registry.example.com/v2/", "p4ssw0rd"),
        ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz in text", "abcdefghijklmnopqrstuvwxyz"),
        ("DB_PASSWORD=correcthorse", "correcthorse"),
    ],
)
def test_secrets_are_redacted(text, secret):
    out = redact(text)
    assert secret not in out
    assert MASK in out


@pytest.mark.parametrize(
    "text",
    [
        "max_num_batched_tokens=2048, max_tokens=512",
        "MAX_NUM_BATCHED_TOKENS=2048",
        "Avg prompt throughput: 10.0 tokens/s",
        "api_key=None",
        "prompt_token_ids: None",
        "https://huggingface.co/Qwen/Qwen3-8B",
    ],
)
def test_ordinary_text_is_untouched(text):
    assert redact(text) == text


def test_redact_obj_masks_secret_keys():
    out = redact_obj({"api_key": "abc", "HF_TOKEN": "hf_x", "max_num_seqs": 8, "nested": ["Bearer abcdefghijkl"]})
    assert out["api_key"] == MASK and out["HF_TOKEN"] == MASK and out["max_num_seqs"] == 8
    assert "abcdefghijkl" not in str(out)


# --- flags ---------------------------------------------------------------
def test_flag_hints():
    assert hint_for("-language-model-only").suggestion == "--language-model-only"
    assert hint_for("--cuda-graph-sizes").suggestion == "--cudagraph-capture-sizes"
    assert hint_for("--swap-space").suggestion is None and "0.18" in hint_for("--swap-space").why
    assert hint_for("--kv-cache-memory").suggestion == "--kv-cache-memory-bytes"
    assert hint_for("--gpu-memory-utilisation").suggestion == "--gpu-memory-utilization"
    assert "sampling" in hint_for("--temperature").why
    assert "OpenAI-compatible" in hint_for("--api-key", prog="api_server.py").why


def test_split_unrecognized_keeps_values():
    assert split_unrecognized("--swap-space 4 --foo=1 --bar --sizes 1 2") == [
        ("--swap-space", "4"), ("--foo", "1"), ("--bar", None), ("--sizes", "1 2")]


# --- launch --------------------------------------------------------------
def test_launch_script_with_env_and_continuations():
    launch = parse_launch(
        "#!/bin/bash\nexport X=1\nCUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Qwen3-32B \\\n"
        "  --tensor-parallel-size 2 --max_model_len 32768 --enforce-eager --no-enable-prefix-caching -q fp8\n")
    assert launch.entrypoint == "vllm serve"
    assert launch.args["model"] == "Qwen/Qwen3-32B"
    assert launch.args["tensor_parallel_size"] == 2 and launch.args["max_model_len"] == 32768
    assert launch.args["enforce_eager"] is True and launch.args["enable_prefix_caching"] is False
    assert launch.args["quantization"] == "fp8"
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "0,1"


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ('{"max_model_len": 4096, "gpu_memory_utilization": 0.4}', "max_model_len", 4096),
        ('LLM(model="Qwen/Qwen-7B", trust_remote_code=True)', "model", "Qwen/Qwen-7B"),
        ("python -m vllm.entrypoints.openai.api_server --model m --max-num-seqs 8", "max_num_seqs", 8),
        ("--max-model-len 29000 (gpu_memory_utilization 0.90)", "max_model_len", 29000),
        ("model: Qwen/Qwen3-8B\nmax_model_len: 8192\n", "max_model_len", 8192),
    ],
)
def test_launch_forms(text, key, value):
    assert parse_launch(text).args[key] == value


@pytest.mark.parametrize("text", ["without --enforce-eager", "util 0.92, CUDA graphs", "| a | b |"])
def test_prose_is_not_a_launch(text):
    assert not parse_launch(text).found
