"""Kubernetes env entries set by ``valueFrom`` (a Secret's or ConfigMap's key, a pod field): set, with a value
oomguard cannot know. The launch reader records each with its source; check takes it as set (no finding that
assumes it unset, no masking of the Secret's name or key as if they were values, no leak of the values it
does see); an export keeps each reference as it was (Kubernetes) or asks for the variable in the secrets
file (other targets). Through the real CLI in subprocesses, on real files."""

from __future__ import annotations

import json

import pytest
import yaml

from oomguard.versions import releases
from tests.conftest import run_cli

OFFLINE = {"HF_HUB_OFFLINE": "1"}
PLANTED = "hf_plantedSECRETvalue0123456789"
ENV = f"""
args: ["--model", "Qwen/Qwen3-8B", "--max-model-len", "{{length}}", "--api-key", "$(VLLM_API_KEY)"{{extra}}]
env:
  - name: VLLM_API_KEY
    valueFrom:
      secretKeyRef: {{{{name: vllm-secrets, key: api-key}}}}
  - name: HF_TOKEN
    valueFrom:
      secretKeyRef:
        name: hf
        key: token
  - name: VLLM_ALLOW_LONG_MAX_MODEL_LEN
    valueFrom:
      configMapKeyRef: {{{{name: vllm-config, key: allow-long}}}}
  - name: POD_IP
    valueFrom:
      fieldRef: {{{{fieldPath: status.podIP}}}}
  - name: OTHER_TOKEN
    value: {PLANTED}
"""
SPECS = {
    "VLLM_API_KEY": {"secretKeyRef": {"name": "vllm-secrets", "key": "api-key"}},
    "HF_TOKEN": {"secretKeyRef": {"name": "hf", "key": "token"}},
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": {"configMapKeyRef": {"name": "vllm-config", "key": "allow-long"}},
    "POD_IP": {"fieldRef": {"fieldPath": "status.podIP"}},
}


def _manifest(deployment, length=8192, extra=""):
    return deployment(ENV.format(length=length, extra=extra))


def test_check_takes_a_value_from_variable_as_set(deployment):
    path = _manifest(deployment)
    p = run_cli("check", str(path), "--gpu", "H100", "--format", "json", env=OFFLINE, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    (rep,) = doc["reports"] if "reports" in doc else [doc]
    assert rep["starts"] is True and "findings" in rep
    assert "OG611" not in {f["rule"] for f in rep["findings"]}  # $(VLLM_API_KEY) is set, from its Secret
    notes = " ".join(rep.get("notes", [])) or p.stdout
    assert "env VLLM_API_KEY is set from Secret vllm-secrets key api-key" in notes
    assert "env POD_IP is set from the pod field status.podIP" in notes
    assert "ConfigMap vllm-config key allow-long" in notes
    assert PLANTED not in p.stdout + p.stderr


def test_the_secret_s_name_and_key_are_not_masked_as_values(deployment):
    """``key: token`` names the Secret's key: masking "token" garbled every "tokens" in the output."""
    path = _manifest(deployment)
    p = run_cli("check", str(path), "--gpu", "H100", env=OFFLINE, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Secret hf key token" in p.stdout and "***s" not in p.stdout and "- *** " not in p.stdout
    assert PLANTED not in p.stdout + p.stderr


def test_a_fix_never_defines_a_value_from_variable_twice(deployment, tmp_path):
    """The launch's own YaRN reaches the length; VLLM_ALLOW_LONG_MAX_MODEL_LEN is what vLLM needs, and the
    manifest sets it from a ConfigMap: the finding says so, and --fix writes no second definition."""
    rope = r', "--hf-overrides", "{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":32768}}"'
    path = _manifest(deployment, length=131072, extra=rope)
    newest = ("--vllm-version", releases.supported()[-1])  # a release whose derived length the YaRN does not raise
    p = run_cli("check", str(path), "--gpu", "H100", *newest, "--format", "json", env=OFFLINE, timeout=120)
    doc = json.loads(p.stdout)
    (rep,) = doc["reports"] if "reports" in doc else [doc]
    (og501,) = [f for f in rep["findings"] if f["rule"] == "OG501"]
    assert "set from ConfigMap vllm-config key allow-long, is 1" in og501["message"]
    assert not og501.get("fix")
    run_cli("check", str(path), "--gpu", "H100", *newest, "--fix", env=OFFLINE, timeout=120)
    fixed = path.with_name("deploy.fixed.yaml")
    if fixed.exists():  # other findings may still write a file: never with the variable a second time
        assert fixed.read_text().count("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == 1


def test_kubernetes_export_keeps_each_reference_as_it_was(deployment, tmp_path):
    path = _manifest(deployment)
    out, secrets = tmp_path / "out.yaml", tmp_path / "vllm.secrets"
    p = run_cli("export", "launch", str(path), "--to", "kubernetes", "-o", str(out), "--secrets-file", str(secrets),
                env=OFFLINE, timeout=120)
    assert p.returncode == 0, p.stderr
    docs = [d for d in yaml.safe_load_all(out.read_text()) if d]
    (c,) = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    got = {e["name"]: e["valueFrom"] for e in c["env"] if "valueFrom" in e}
    assert {k: got.get(k) for k in SPECS} == SPECS
    assert "--api-key" not in c["args"]  # vLLM reads VLLM_API_KEY itself
    assert PLANTED not in out.read_text() + p.stdout + p.stderr
    assert f"OTHER_TOKEN={PLANTED}" in secrets.read_text()
    check = run_cli("check", str(out), "--gpu", "H100", "--format", "json", env=OFFLINE, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("target", ["systemd", "docker", "compose"])
def test_other_targets_ask_for_a_value_from_variable_in_the_secrets_file(deployment, tmp_path, target):
    path = _manifest(deployment)
    out, secrets = tmp_path / f"out.{target}", tmp_path / "vllm.secrets"
    p = run_cli("export", "launch", str(path), "--to", target, "-o", str(out), "--secrets-file", str(secrets),
                env=OFFLINE, timeout=120)
    assert p.returncode == 0, p.stderr
    names = {line.partition("=")[0].lstrip("# ") for line in secrets.read_text().splitlines() if "=" in line}
    assert set(SPECS) <= names, secrets.read_text()
    assert PLANTED not in out.read_text() + p.stdout + p.stderr
