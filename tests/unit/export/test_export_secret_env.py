"""Every credential the launch holds reaches the exported service, never written inline.

The launch reader keeps the variables vLLM reads (VLLM_*, NCCL_*, CUDA_VISIBLE_DEVICES ...); a token
for the Hub (HF_TOKEN, HUGGING_FACE_HUB_TOKEN) or a provider key (OPENAI_API_KEY) is none of those, and
the exports used to drop it: a gated model then failed to download on the server. Now the one redactor
(``redact.is_secret``) picks them out, and each target carries them the way it carries VLLM_API_KEY: the
secrets file / env file (mode 0600), systemd's EnvironmentFile, docker's ``-e NAME``, compose's
``${NAME}``, a Kubernetes Secret by secretKeyRef. The written file passes ``oomguard check``. Through
the real CLI in a subprocess, on real files.
"""

from __future__ import annotations

import json
import os
import shlex
import stat

import pytest
import yaml

from tests.conftest import run_cli

CREDENTIALS = {
    "HF_TOKEN": "hf_mendTOKENvalue0123456789ab",
    "HUGGING_FACE_HUB_TOKEN": "hf_mendHUBvalue0123456789abcd",
    "OPENAI_API_KEY": "sk-mendOPENAIvalue0123456789",
}
SCRIPT = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in CREDENTIALS.items()) + (
    "export HF_HOME=/data/hf\n"  # not a secret, not vLLM's: stays out, as before
    "vllm serve Qwen/Qwen3-8B --max-model-len 8192\n")
TARGETS = ["env", "systemd", "docker", "compose", "kubernetes", "yaml"]
OFFLINE = {"HF_HUB_OFFLINE": "1"}


def _env_lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            out[k] = shlex.split(v)[0] if v else ""
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_hub_token_and_api_keys_reach_the_service(target, tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text(SCRIPT)
    out, secrets = tmp_path / f"out.{target}", tmp_path / "vllm.secrets"
    argv = ["export", "launch", str(script), "--to", target, "-o", str(out)]
    if target != "env":
        argv += ["--secrets-file", str(secrets)]
    p = run_cli(*argv, env=OFFLINE, timeout=120)
    assert p.returncode == 0, p.stderr
    written = out.read_text()
    for value in CREDENTIALS.values():
        assert value not in p.stdout + p.stderr
        if target != "env":  # `--to env -o FILE` is the env file: it holds them
            assert value not in written, (target, written)
    store = out if target == "env" else secrets
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o600
    stored = _env_lines(store.read_text())
    assert {k: stored.get(k) for k in CREDENTIALS} == CREDENTIALS, stored
    assert "HF_HOME" not in stored
    if target == "systemd":
        assert f"EnvironmentFile={secrets}" in written  # required, not "-" optional
    elif target == "docker":
        assert all(f"-e {k} " in written for k in CREDENTIALS), written
    elif target == "compose":
        (svc,) = yaml.safe_load(written)["services"].values()
        assert all(svc["environment"][k] == "${" + k + "}" for k in CREDENTIALS), svc
    elif target == "kubernetes":
        docs = [d for d in yaml.safe_load_all(written) if d]
        (c,) = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
        refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in c["env"] if "valueFrom" in e}
        assert all(refs.get(k) == k for k in CREDENTIALS), c["env"]
    elif target == "yaml":
        assert all(f"{k}=<secret>" in written for k in CREDENTIALS), written
    if target not in ("env", "yaml"):  # the env file and a --config YAML hold no launch of their own
        check = run_cli("check", str(out), "--gpu", "H100", "--format", "json", env=OFFLINE, timeout=120)
        doc = json.loads(check.stdout)
        assert not [f for f in doc["findings"] if f["severity"] == "error"], doc["findings"]
        assert not any(v in check.stdout for v in CREDENTIALS.values())


def test_a_manifest_token_reaches_the_kubernetes_secret(tmp_path, deployment):
    """A Deployment with HF_TOKEN in its env list, exported again for Kubernetes: the token moves into the
    Secret (by secretKeyRef), out of the container's plain env."""
    deploy = deployment(f"""
        args: [Qwen/Qwen3-8B, --max-model-len, "8192"]
        env:
          - name: HF_TOKEN
            value: {CREDENTIALS["HF_TOKEN"]}
    """)
    out, secrets = tmp_path / "out.yaml", tmp_path / "vllm.secrets"
    p = run_cli("export", "launch", str(deploy), "--to", "kubernetes", "-o", str(out), "--secrets-file", str(secrets),
                env=OFFLINE, timeout=120)
    assert p.returncode == 0, p.stderr
    assert CREDENTIALS["HF_TOKEN"] not in out.read_text() + p.stdout + p.stderr
    assert _env_lines(secrets.read_text())["HF_TOKEN"] == CREDENTIALS["HF_TOKEN"]
    docs = [d for d in yaml.safe_load_all(out.read_text()) if d]
    (c,) = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {e["name"]: "valueFrom" in e for e in c["env"]}.get("HF_TOKEN") is True, c["env"]


def test_a_token_the_launch_takes_from_its_caller_is_not_written_as_text(tmp_path):
    """`export HF_TOKEN="$HF_TOKEN"`: the value is the caller's; the env file asks for it instead of holding
    the text `$HF_TOKEN`."""
    script = tmp_path / "start_api.sh"
    script.write_text('export HF_TOKEN="$HF_TOKEN"\nvllm serve Qwen/Qwen3-8B\n')
    out = tmp_path / "vllm.env"
    p = run_cli("export", "launch", str(script), "--to", "env", "-o", str(out), env=OFFLINE, timeout=120)
    assert p.returncode == 0, p.stderr
    assert _env_lines(out.read_text())["HF_TOKEN"] == "" and "$HF_TOKEN" not in out.read_text()
    assert "set HF_TOKEN" in p.stderr
