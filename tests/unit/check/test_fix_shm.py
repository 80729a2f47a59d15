"""``check --fix`` gives /dev/shm the CPU KV tier's size (OG405) in the manifest's own terms.

From vLLM 0.27 the CPU KV tier is one file in /dev/shm; a container's /dev/shm is 64 MiB unless the
manifest sizes it. The fix used to leave OG405 standing (no automatic fix): now a Kubernetes pod gets a
memory emptyDir at /dev/shm (or its sizeLimit raised), a compose service ``shm_size``, a production-stack
modelSpec ``shmSize``; the written file passes ``oomguard check`` with OG405 gone. Through the real CLI
in a subprocess, on real files.
"""

from __future__ import annotations

import json

import yaml

from tests.conftest import run_cli

TIER = "--kv-offloading-size"  # 16 GiB of CPU tier below: /dev/shm needs 17 GiB (the tier + 1 GiB for NCCL)


def _fix(path):
    proc = run_cli("check", str(path), "--gpu", "H100", "--fix", env={"HF_HUB_OFFLINE": "1"}, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "OG405" in proc.stdout, proc.stdout[-2000:]  # the input has the finding
    fixed = path.with_name(path.stem + ".fixed" + path.suffix)
    assert fixed.exists(), proc.stderr
    return fixed


def _rules(path) -> list[str]:
    proc = run_cli("check", str(path), "--gpu", "H100", "--format", "json", env={"HF_HUB_OFFLINE": "1"}, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return [f["rule"] for f in json.loads(proc.stdout)["findings"]]


def test_kubernetes_pod_gets_a_memory_emptydir_at_dev_shm(tmp_path):
    """No /dev/shm volume; block-style mounts and volumes already there, and another fix (a YaRN override for
    the length) in the same args list: the new mount and volume go at the ends of their own lists."""
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: qwen
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.28.0
          args:
            - Qwen/Qwen3-8B
            - {TIER}
            - "16"
            - --max-model-len
            - "131072"
          volumeMounts:
            - name: data
              mountPath: /data
      volumes:
        - name: data
          hostPath:
            path: /data
""")
    fixed = _fix(deploy)
    pod = yaml.safe_load(fixed.read_text())["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "17Gi"}, volume
    assert {"name": "data", "mountPath": "/data"} in c["volumeMounts"] and pod["volumes"][0]["name"] == "data"
    assert "--hf-overrides" in c["args"]  # the other fix still written, in the args list
    assert "OG405" not in _rules(fixed)


def test_kubernetes_existing_memory_emptydir_gets_its_size(tmp_path):
    """A /dev/shm emptyDir of 2Gi (flow-style mount, block emptyDir), and one in flow style without sizeLimit in
    a second file: the size is written into the emptyDir the manifest already has; no second volume."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(f"""apiVersion: v1
kind: Pod
metadata: {{name: qwen}}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.28.0
      args: [Qwen/Qwen3-8B, {TIER}, "16"]
      volumeMounts:
        - {{name: shm, mountPath: /dev/shm}}
      resources:
        limits: {{nvidia.com/gpu: 1, memory: 64Gi}}
  volumes:
    - name: shm
      emptyDir:
        medium: Memory
        sizeLimit: 2Gi
""")
    fixed = _fix(pod)
    spec = yaml.safe_load(fixed.read_text())["spec"]
    assert spec["volumes"] == [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "17Gi"}}]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "shm", "mountPath": "/dev/shm"}]
    assert "OG405" not in _rules(fixed)


def test_compose_service_gets_shm_size(tmp_path):
    """A service without shm_size (Docker's 64 MiB) and one with 2gb too small, in one file."""
    compose = tmp_path / "compose.yaml"
    compose.write_text(f"""services:
  a:
    image: vllm/vllm-openai:v0.28.0
    command: ["Qwen/Qwen3-8B", "{TIER}", "16"]
    environment:
      - HF_HOME=/data
  b:
    image: vllm/vllm-openai:v0.28.0
    shm_size: "2gb"
    command: Qwen/Qwen3-8B {TIER} 16
""")
    fixed = _fix(compose)
    services = yaml.safe_load(fixed.read_text())["services"]
    assert services["a"]["shm_size"] == "17gb" and services["b"]["shm_size"] == "17gb", services
    assert services["a"]["environment"] == ["HF_HOME=/data"]
    assert "OG405" not in _rules(fixed)


def test_helm_modelspec_gets_shmsize_where_the_chart_mounts_one(tmp_path):
    """production-stack mounts /dev/shm (shmSize, default 20Gi) only with tensorParallelSize: that modelSpec is
    fixed; the one without keeps its finding (the chart gives it no volume to size)."""
    values = tmp_path / "values.yaml"
    values.write_text(f"""servingEngineSpec:
  modelSpec:
    - name: tp
      repository: vllm/vllm-openai
      tag: v0.28.0
      modelURL: Qwen/Qwen3-8B
      requestGPU: 2
      vllmConfig:
        tensorParallelSize: 2
        extraArgs: ["{TIER}", "32"]
    - name: single
      repository: vllm/vllm-openai
      tag: v0.28.0
      modelURL: Qwen/Qwen3-8B
      requestGPU: 1
      vllmConfig:
        extraArgs: ["{TIER}", "32"]
""")
    fixed = _fix(values)
    specs = yaml.safe_load(fixed.read_text())["servingEngineSpec"]["modelSpec"]
    assert specs[0]["shmSize"] == "33Gi" and "shmSize" not in specs[1], specs
    proc = run_cli("check", str(fixed), "--gpu", "H100", "--format", "json", env={"HF_HUB_OFFLINE": "1"}, timeout=120)
    doc = json.loads(proc.stdout)
    by_launch = {r["launch"]["name"]: [f["rule"] for f in r["findings"]] for r in doc["launches"]}
    assert "OG405" not in by_launch["modelSpec tp"] and "OG405" in by_launch["modelSpec single"], by_launch
