"""One launch, one answer: the same launch written five ways is read the same way by every command.

The launch (Qwen3-8B from the bundled catalog, vLLM 0.11.0, five flags, one VLLM_ variable)
is written as a start_api.sh (``docker run vllm/vllm-openai:v0.11.0``), a ``--config`` YAML
(with ``--vllm-version 0.11.0``: a YAML names no image), a Kubernetes Deployment, a compose
service and production-stack Helm values with two modelSpecs. For each, ``plan``, ``check``,
``fit --from``, ``host --launch`` and ``export launch`` run through the real CLI entry point,
and the test compares what they saw: the same flags (dest and typed value), environment and
vLLM release, the release's source (the image tag where there is one), the deployment's limits,
and the numbers both planners print (KV cache tokens, max concurrency). The export is read back
with the same reader and must hold the same flags.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

FLAGS = {
    "max_model_len": 16384,
    "max_num_seqs": 32,
    "gpu_memory_utilization": 0.85,
    "max_num_batched_tokens": 4096,
    "tensor_parallel_size": 1,
    "enable_prefix_caching": True,
}
ENV = {"VLLM_LOGGING_LEVEL": "INFO"}
GPU = ["--gpu", "A100-80GB"]
HOST_ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "host" / "roots" / "two_numa_4x4090"

SCRIPT = """#!/bin/bash
# the launch as a docker run script
docker run --gpus all -e VLLM_LOGGING_LEVEL=INFO vllm/vllm-openai:v0.11.0 \\
  --model Qwen/Qwen3-8B \\
  --max-model-len 16384 \\
  --max-num-seqs 32 \\
  --gpu-memory-utilization 0.85 \\
  --max-num-batched-tokens 4096 \\
  --tensor-parallel-size 1 \\
  --enable-prefix-caching
"""
CONFIG = """# vllm serve --config serve.yaml
model: Qwen/Qwen3-8B
max-model-len: 16384
max_num_seqs: 32
gpu-memory-utilization: 0.85
max-num-batched-tokens: 4096
tensor-parallel-size: 1
enable-prefix-caching: true
"""
DEPLOYMENT = """apiVersion: v1
kind: Service
metadata: {name: qwen}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: qwen
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args:
            - Qwen/Qwen3-8B
            - --max-model-len=16384
            - --max-num-seqs
            - "32"
            - --gpu-memory-utilization
            - "0.85"
            - --max-num-batched-tokens=4096
            - --tensor-parallel-size=1
            - --enable-prefix-caching
          env:
            - name: VLLM_LOGGING_LEVEL
              value: INFO
          resources:
            limits: {nvidia.com/gpu: 1, memory: 64Gi}
"""
COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.11.0
    command: ["Qwen/Qwen3-8B", "--max-model-len", "16384", "--max-num-seqs", "32", "--gpu-memory-utilization", "0.85",
              "--max-num-batched-tokens", "4096", "--tensor-parallel-size", "1", "--enable-prefix-caching"]
    environment:
      VLLM_LOGGING_LEVEL: INFO
    deploy:
      resources:
        limits: {memory: 64g}
        reservations:
          devices: [{driver: nvidia, count: 1, capabilities: [gpu]}]
"""
_SPEC = """    - name: {name}
      repository: vllm/vllm-openai
      tag: v0.11.0
      modelURL: Qwen/Qwen3-8B
      requestGPU: 1
      limitMemory: 64Gi
      vllmConfig:
        maxModelLen: 16384
        maxNumSeqs: 32
        gpuMemoryUtilization: 0.85
        tensorParallelSize: 1
        enablePrefixCaching: true
        extraArgs: ["--max-num-batched-tokens", "4096"]
      env:
        - name: VLLM_LOGGING_LEVEL
          value: INFO
"""
HELM = "servingEngineSpec:\n  modelSpec:\n" + _SPEC.format(name="first") + _SPEC.format(name="second")

KINDS = {
    "script": ("start_api.sh", SCRIPT, []),
    "config": ("serve.yaml", CONFIG, ["--vllm-version", "0.11.0"]),
    "deployment": ("deploy.yaml", DEPLOYMENT, []),
    "compose": ("docker-compose.yaml", COMPOSE, []),
    "helm": ("values.yaml", HELM, []),
}


def cli(*argv: str) -> tuple[int, str, str]:
    """The real CLI entry point, in this process (the same code a subprocess would run)."""
    from oomguard.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _flags(launch_dict: dict) -> dict:
    return {k: v["value"] for k, v in launch_dict["flags"].items()}


def _env(launch_dict: dict) -> dict:
    return {k: v["value"] for k, v in launch_dict["env"].items()}


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    """What every command saw, per input kind."""
    out = {}
    for kind, (name, text, extra) in KINDS.items():
        d = tmp_path_factory.mktemp(kind)
        path = d / name
        path.write_text(text)
        one = f"{path}#first" if kind == "helm" else str(path)
        rc, plan_out, err = cli("plan", path, *GPU, *extra, "--format", "json")
        assert rc == 0, err
        plan = json.loads(plan_out)
        plans = plan["launches"] if "launches" in plan else [plan]
        rc, check_out, err = cli("check", path, *GPU, *extra, "--format", "json")
        assert rc in (0, 1), err
        check = json.loads(check_out)
        checks = check["launches"] if "launches" in check else [check]
        rc, fit_out, err = cli("fit", "--from", one, *GPU, *extra, "--format", "json")
        assert rc in (0, 1), err
        rc, host_out, err = cli("host", "--launch", one, "--root", HOST_ROOT, *extra, "--format", "json")
        assert rc in (0, 1), err
        rc, export_out, err = cli("export", "launch", one, "--to", "kubernetes", *extra)
        assert rc == 0, err
        exported = d / "exported.yaml"
        exported.write_text(export_out)
        rc, again_out, err = cli("plan", exported, *GPU, *extra, "--format", "json")
        assert rc == 0, err
        out[kind] = {"plans": plans, "checks": checks, "fit": json.loads(fit_out), "host": json.loads(host_out),
                     "export": json.loads(again_out), "path": str(path)}
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_command_reads_the_same_launch(seen, kind):
    s = seen[kind]
    assert len(s["plans"]) == (2 if kind == "helm" else 1) == len(s["checks"])
    for plan, check in zip(s["plans"], s["checks"]):
        read = plan["launch"]
        assert _flags(read) == FLAGS, kind
        assert read["model"]["value"] == "Qwen/Qwen3-8B"
        assert _env(read) == (ENV if kind != "config" else {})  # a --config YAML sets no environment
        assert read["vllm_version"]["value"] == "0.11.0"
        assert read["vllm_version"]["source"]["origin"] == ("option" if kind == "config" else "image-tag")
        # check reads the same structure (lenient mode, same reader) and plans the same numbers
        assert check["launch"]["read"]["flags"] == read["flags"]
        assert check["launch"]["read"]["env"] == read["env"]
        assert check["vllm_version"] == "0.11.0"
        assert check["plan"]["kv_cache_tokens"] == plan["kv_cache_tokens"]
        assert check["plan"]["max_concurrency"] == plan["max_concurrency"]
    fit, host = s["fit"], s["host"]
    assert fit["goal"]["vllm_version"] == "0.11.0" and fit["goal"]["max_model_len"] == FLAGS["max_model_len"]
    assert fit["goal"]["model"] == "Qwen/Qwen3-8B"
    view = host["facts"]["launch"]
    assert view["vllm_version"] == "0.11.0"
    assert view["gpu_memory_utilization"] == FLAGS["gpu_memory_utilization"] and view["utilization_explicit"]
    assert view["tensor_parallel_size"] == FLAGS["tensor_parallel_size"]
    # the export reads back to the same flags and release
    again = s["export"]["launch"]
    assert _flags(again) == FLAGS and again["model"]["value"] == "Qwen/Qwen3-8B"
    assert s["export"]["kv_cache_tokens"] == s["plans"][0]["kv_cache_tokens"]


def test_the_five_forms_are_one_launch(seen):
    numbers = {(kind, i): (p["kv_cache_tokens"], p["max_concurrency"])
               for kind, s in seen.items() for i, p in enumerate(s["plans"])}
    assert len(set(numbers.values())) == 1, numbers
    limits = {kind: s["plans"][0]["launch"]["deployment"] for kind, s in seen.items()}
    assert limits["script"] is None and limits["config"] is None
    for kind in ("deployment", "compose", "helm"):
        assert limits[kind]["memory_limit_bytes"] == 64 << 30 and limits[kind]["gpus"] == 1, (kind, limits[kind])
    host = {kind: s["host"]["facts"]["launch"]["deployment"] for kind, s in seen.items()}
    assert host["deployment"]["memory_limit_bytes"] == 64 << 30 and host["helm"]["memory_limit_bytes"] == 64 << 30


def test_values_point_at_their_lines(seen):
    lines = {kind: s["plans"][0]["launch"]["flags"]["max_num_seqs"]["source"] for kind, s in seen.items()}
    assert lines["script"]["line"] == 6 and lines["script"]["origin"] == "script"
    assert lines["config"]["line"] == 4 and lines["config"]["yaml_path"] == "max_num_seqs"
    assert lines["deployment"]["line"] == 18 and lines["deployment"]["yaml_path"] == "spec.template.spec.containers[0].args[2]"
    assert lines["compose"]["line"] == 4 and lines["compose"]["yaml_path"] == "services.vllm.command[3]"
    assert lines["helm"]["line"] == 11 and lines["helm"]["yaml_path"] == "servingEngineSpec.modelSpec[0].vllmConfig.maxNumSeqs"
    second = seen["helm"]["plans"][1]["launch"]["flags"]["max_num_seqs"]["source"]
    assert second["yaml_path"] == "servingEngineSpec.modelSpec[1].vllmConfig.maxNumSeqs" and second["line"] == 27
