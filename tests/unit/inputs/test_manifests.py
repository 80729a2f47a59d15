"""Kubernetes manifests, compose services and production-stack Helm values as launches."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomguard.errors import InputError
from oomguard.inputs.reader import read_launch
from oomguard.inputs.manifests import parse_docker_size, parse_quantity
from oomguard.units import GiB, MiB

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "launch"


def test_k8s_deployment_picks_the_vllm_container_of_a_multi_document_file():
    launch = read_launch(FIX / "k8s" / "s3_deployment.yaml", lenient=True)
    assert launch.model == "/data/models/qwen3-27b-w4a16"
    assert launch.flags["tensor_parallel_size"] == 4 and launch.flags["max_model_len"] == 750000
    assert launch.flags["kv_transfer_config"]["kv_connector_extra_config"]["cpu_bytes_to_use"] == 214748364800
    assert launch.env == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    # a secret is never read: the variable is set from its Secret, with a value not known here
    assert launch.env_from["HF_TOKEN"].source.startswith("Secret ") and "HF_TOKEN" not in launch.secret_env
    assert any("env HF_TOKEN is set from Secret" in n for n in launch.notes)
    d = launch.deployment
    assert (d["kind"], d["container"], d["gpus"]) == ("Deployment", "vllm", 4)
    assert d["memory_limit_bytes"] == 240 * GiB and d["shm_bytes"] == 16 * GiB
    assert launch.command_line == 24  # the args: line


def test_compose_service_and_helm_values():
    c = read_launch(FIX / "compose" / "docker-compose.yaml", lenient=True)
    assert c.model == "Qwen/Qwen3-8B" and c.flags["kv_offloading_size"] == 64
    assert c.deployment["gpus"] == 1 and c.deployment["memory_limit_bytes"] == 96 * GiB
    assert c.deployment["shm_bytes"] == 64 * MiB  # no shm_size: Docker's default
    h = read_launch(FIX / "helm" / "production-stack-values.yaml", lenient=True)
    assert h.model == "Qwen/Qwen3-8B" and h.flags["tensor_parallel_size"] == 2 and h.flags["max_num_seqs"] == 64
    assert h.flags["enable_prefix_caching"] is True and h.env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "20"
    assert h.deployment["gpus"] == 2 and h.deployment["shm_bytes"] == 20 * GiB


def test_no_vllm_container_is_one_line_error(tmp_path):
    p = tmp_path / "d.yaml"
    p.write_text("apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: nginx\n")
    with pytest.raises(InputError) as e:
        read_launch(p)
    assert "no vLLM container" in str(e.value) and e.value.file == str(p)


def test_units():
    assert parse_quantity("16Gi") == 16 * GiB and parse_quantity("500M") == 500 * 10**6
    assert parse_docker_size("16gb") == 16 * GiB and parse_docker_size("512m") == 512 * MiB
    with pytest.raises(InputError):
        parse_quantity("lots")


def test_check_reads_the_manifest_shm_and_memory_limit():
    from oomguard.check.context import CheckOptions
    from oomguard.check.report import check_target

    rep = check_target(CheckOptions(gpu="RTX-4090", num_gpus=4), path=str(FIX / "k8s" / "s3_deployment.yaml"))
    shm = next(f for f in rep.findings if f.rule == "OG405")
    assert shm.severity.value == "error" and "16.00 GiB" in shm.message and "vLLM will not start" in shm.message
    assert rep.ctx.launch.kind == "manifest" and str(rep.fixed_path()).endswith("s3_deployment.fixed.yaml")  # its own format
    host = next(f for f in rep.findings if f.rule == "OG401")
    assert "Deployment's memory limit" in host.message  # 216 GiB of a 240 GiB limit: tight


def test_pre_commit_hook_runs_oomguard_check_on_every_file(tmp_path):
    import os
    import re
    import shlex
    import subprocess
    import sys
    import tomllib

    import yaml

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "oomguard-check")
    assert "oomguard" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    # wide file types (every shell script and YAML file); the hook sniffs their content (tests/unit/check/test_precommit_hook.py)
    assert set(hook["types_or"]) == {"shell", "yaml"} and "files" not in hook
    good = FIX / "clean_h100.sh"
    bad = tmp_path / "start_api.sh"
    bad.write_text("vllm serve Qwen/Qwen3-8B --max-model-len 32768 --no-such-flag\n")
    # As pre-commit runs it: entry, then the hook's args, then the file names; oomguard from this environment.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = shlex.split(hook["entry"]) + ["--gpu", "H100-80GB", str(good), str(bad)]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Qwen/Qwen3-8B" in p.stdout and "--no-such-flag" in p.stdout + p.stderr
    ok = subprocess.run(shlex.split(hook["entry"]) + ["--gpu", "H100-80GB", str(good)], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_statefulset_with_sh_c_and_a_pod_without_a_shm_volume(tmp_path):
    p = tmp_path / "sts.yaml"
    p.write_text(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: llm}\nspec:\n  template:\n    spec:\n      containers:\n"
        "        - name: server\n          image: registry.local/serving:1\n"
        "          command: [\"/bin/sh\", \"-c\"]\n"
        "          args: [\"exec vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --max-model-len 8192\"]\n"
        "          resources: {limits: {nvidia.com/gpu: 2, memory: 64Gi}}\n"
    )
    launch = read_launch(p, lenient=True)
    assert launch.model == "Qwen/Qwen3-8B" and launch.flags["tensor_parallel_size"] == 2
    assert launch.deployment["kind"] == "StatefulSet" and launch.deployment["gpus"] == 2
    assert launch.deployment["shm_bytes"] == 64 * MiB  # no /dev/shm volume: the runtime's default


def test_compose_ipc_host_and_shm_size(tmp_path):
    p = tmp_path / "compose.yaml"
    p.write_text("services:\n  llm:\n    image: vllm/vllm-openai:v0.33.0\n    ipc: host\n    command: --model Qwen/Qwen3-8B\n")
    assert read_launch(p, lenient=True).deployment["shm_bytes"] is None  # the host's /dev/shm
    p.write_text("services:\n  llm:\n    image: vllm/vllm-openai:v0.33.0\n    shm_size: 8gb\n    command: --model Qwen/Qwen3-8B\n")
    d = read_launch(p, lenient=True)
    assert d.model == "Qwen/Qwen3-8B" and d.deployment["shm_bytes"] == 8 * GiB


@pytest.mark.parametrize(
    "text, needle",
    [
        ("services:\n  web:\n    image: nginx\n", "no vLLM service"),
        ("servingEngineSpec:\n  modelSpec: []\n", "expected a list of models"),
        ("servingEngineSpec:\n  modelSpec:\n    - name: a\n", "no modelURL"),
        ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - name: v\n      image: vllm/vllm-openai\n      args: [m]\n      resources: {limits: {memory: lots}}\n", "not a Kubernetes quantity"),
        ("apiVersion: v1\nkind: Pod\nspec: [\n", "invalid YAML"),
    ],
)
def test_bad_manifests_are_one_line_errors(tmp_path, text, needle):
    p = tmp_path / "m.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        read_launch(p)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_check_fix_of_a_manifest_edits_the_command_in_place():
    from oomguard.check.context import CheckOptions
    from oomguard.check.report import check_target

    rep = check_target(CheckOptions(gpu="RTX-4090"), path=str(FIX / "compose" / "docker-compose.yaml"))
    text = rep.fix.text
    assert text.count("--max-model-len") == 1 and rep.fixed_path().endswith("docker-compose.fixed.yaml")
    shm = next(f for f in rep.findings if f.rule == "OG405")
    assert shm.severity.value == "error" and "Docker's 64 MiB" in shm.message
