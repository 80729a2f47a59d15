"""Nested secrets leave every export target; --job is escaped for PromQL; bad names are refused (issue 13.4)."""

from __future__ import annotations

import json

import pytest
import yaml

from oomguard.cli.main import main

LAUNCH = """#!/bin/bash
vllm serve Qwen/Qwen3-8B --api-key s3cretKEYvalue --max-model-len 8192 \\
  --kv-transfer-config '{"kv_connector":"X","kv_connector_extra_config":{"api_key":"nestedSECRET1","password":"pw-in-json-99","url":"http://bob:hunter2pw@x:1"}}'
"""
SECRETS = ("s3cretKEYvalue", "nestedSECRET1", "pw-in-json-99", "hunter2pw")
REFERENCE = {
    "systemd": "${SECRET_KV_TRANSFER_CONFIG}",
    "docker": '"${SECRET_KV_TRANSFER_CONFIG}"',
    "compose": "${SECRET_KV_TRANSFER_CONFIG}",
    "kubernetes": "$(SECRET_KV_TRANSFER_CONFIG)",
    "env": "SECRET_KV_TRANSFER_CONFIG=",
    "yaml": '--kv-transfer-config "${SECRET_KV_TRANSFER_CONFIG}"',  # on the `# run:` line
}


@pytest.mark.parametrize("target", sorted(REFERENCE))
def test_json_flag_with_credentials_moves_to_the_environment(capsys, tmp_path, target):
    script = tmp_path / "start_api.sh"
    script.write_text(LAUNCH)
    rc = main(["export", "launch", str(script), "--to", target])
    out, err = capsys.readouterr()
    assert rc == 0, err
    for secret in SECRETS:
        assert secret not in out + err
    assert REFERENCE[target] in out
    assert "SECRET_KV_TRANSFER_CONFIG" in err  # the note says where the value went
    if target == "kubernetes":
        docs = list(yaml.safe_load_all(out))
        env = [e for d in docs if d and d.get("kind") == "Deployment"
               for e in d["spec"]["template"]["spec"]["containers"][0].get("env", [])]
        assert any(e["name"] == "SECRET_KV_TRANSFER_CONFIG" and "secretKeyRef" in e.get("valueFrom", {}) for e in env)


def test_json_flag_without_credentials_stays_inline(capsys, tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve m --kv-transfer-config '{\"kv_connector\":\"X\",\"kv_role\":\"kv_both\"}'\n")
    rc = main(["export", "launch", str(script), "--to", "docker"])
    out, _ = capsys.readouterr()
    assert rc == 0 and "kv_both" in out and "SECRET_" not in out


def test_alert_job_is_a_promql_string_not_code(capsys):
    evil = 'x"} or vector(1) or up{job="'
    rc = main(["export", "alerts", "--job", evil, "--format", "prometheus"])
    out, _ = capsys.readouterr()
    assert rc == 0
    doc = yaml.safe_load(out)
    rules = [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == "VllmServerDown"]
    (rule,) = rules
    assert rule["expr"] == "up{job=" + json.dumps(evil) + "} == 0"
    assert "or vector(1)" not in rule["expr"].replace(json.dumps(evil), "")
    assert evil not in rule["annotations"]["description"]  # the label, not the text, goes into the template


@pytest.mark.parametrize("name", ["Bad_Name", "-x", "x-", "a" * 64, "a/b", "with space"])
def test_invalid_kubernetes_names_are_one_line_errors(capsys, tmp_path, name):
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve m\n")
    rc = main(["export", "launch", str(script), "--to", "kubernetes", f"--name={name}"])
    _, err = capsys.readouterr()
    assert rc != 0 and "not a valid Kubernetes name" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["../etc/x", "a/b", ""])
def test_unit_names_cannot_escape_their_path(capsys, tmp_path, name):
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve m\n")
    rc = main(["export", "launch", str(script), "--to", "systemd", f"--name={name}"])
    _, err = capsys.readouterr()
    assert rc != 0 and "--name" in err


PORT_REFERENCE = {
    "systemd": "--port ${PORT}",
    "docker": '--port "${PORT}"',
    "compose": "${PORT}",
    "kubernetes": "$(PORT)",
    "env": "PORT=",
    "yaml": '--port "${PORT}"',
}


@pytest.mark.parametrize("target", sorted(PORT_REFERENCE))
def test_a_server_option_from_an_unset_variable_is_a_reference_not_bad_input(capsys, tmp_path, target):
    """`--port "$PORT"`: no memory figure reads the port, so the launch is not refused for it (it was
    exit 2 in every command but check); the export references the variable."""
    script = tmp_path / "start_api.sh"
    script.write_text('vllm serve Qwen/Qwen3-8B --port "$PORT" --max-model-len 8192\n')
    rc = main(["export", "launch", str(script), "--to", target])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert PORT_REFERENCE[target] in out
    if target in ("docker", "compose", "kubernetes"):  # they publish a port: the note says which
        assert "probes assume 8000" in err


def test_a_planned_flag_from_an_unset_variable_is_still_bad_input(capsys, tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text('vllm serve Qwen/Qwen3-8B --port "$PORT" --max-num-seqs "$SEQS"\n')
    assert main(["plan", str(script), "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert "--max-num-seqs uses variable(s) the launch does not set: $SEQS" in err and "$PORT" not in err
    script.write_text('vllm serve Qwen/Qwen3-8B --port "$PORT" --max-model-len 8192\n')
    assert main(["plan", str(script), "--gpu", "H100", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "--port uses $PORT" in out + err
