"""Exported launches: every format reads back to the same flags; secrets never leak.

The three founding scenarios (tests/scenarios/s1..s3) round-trip through every
target. S3's start_api.sh as written parses under no single vLLM release
(--rope-scaling exists up to 0.11.0, --no-scheduler-reserve-full-isl from
0.19.0), so it is exported in the spelling `oomguard check` suggests:
--hf-overrides '{"rope_scaling": ...}' with 0.33.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oomguard.export.launch import ExportOptions, Target, render_launch
from oomguard.export.readback import differences, expected_flags, read_back
from oomguard.export.systemd import environment, join_lines, quote_word, split_command
from oomguard.inputs.command import parse_script
from oomguard.inputs.launch import Launch
from oomguard.inputs.reader import read_launch

ROOT = Path(__file__).resolve().parents[3]
SCEN = ROOT / "tests" / "scenarios"
TARGETS = list(Target)


def s3_launch(version="0.33.0"):
    text = (SCEN / "s3" / "start_api.sh").read_text()
    m = re.search(r"--rope-scaling '([^']*)'", text)
    text = text.replace(m.group(0), "--hf-overrides '" + json.dumps({"rope_scaling": json.loads(m.group(1))}) + "'")
    return parse_script(text, path=str(SCEN / "s3" / "start_api.sh"), version=version)


def scenario(name):
    if name == "s3":
        return s3_launch(), "0.33.0"
    return read_launch(SCEN / name / "start_api.sh"), None


def assert_round_trip(launch, target, version):
    rendered = render_launch(launch, target, ExportOptions(vllm_version=version))
    model, flags, env = read_back(rendered.text, target, version=version)
    if target is not Target.ENV:
        assert model == launch.model
        assert differences(expected_flags(launch.flags, version=version), flags) == []
    expected_env = dict(launch.env)
    if target in (Target.DOCKER, Target.COMPOSE, Target.KUBERNETES):
        expected_env.pop("CUDA_VISIBLE_DEVICES", None)  # became the container's GPU selection
    if target is not Target.YAML:
        assert env == expected_env
    return rendered


@pytest.mark.parametrize("name", ["s1", "s2", "s3"])
@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_scenarios_round_trip(name, target):
    launch, version = scenario(name)
    assert launch.flags  # the scenario parsed
    assert_round_trip(launch, target, version)


def test_s3_json_flags_survive_every_quoting():
    launch, version = scenario("s3")
    ktc = launch.flags["kv_transfer_config"]
    assert ktc["kv_connector_extra_config"]["cpu_bytes_to_use"] == 214748364800
    for target in (Target.SYSTEMD, Target.DOCKER, Target.COMPOSE, Target.KUBERNETES, Target.YAML):
        _, flags, _ = read_back(
            render_launch(launch, target, ExportOptions(vllm_version=version)).text, target, version=version
        )
        assert flags["kv_transfer_config"] == ktc
        assert flags["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}


def test_kubernetes_spec_has_gpus_shm_and_probes():
    launch, version = scenario("s3")
    doc = yaml.safe_load(
        render_launch(launch, Target.KUBERNETES, ExportOptions(vllm_version=version, shm_size="32Gi")).text
    )
    assert doc["kind"] == "Deployment" and doc["apiVersion"] == "apps/v1"
    spec = doc["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["image"] == "vllm/vllm-openai:v0.33.0"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "4"  # TP 4
    # 200 GiB of CPU KV offload must fit in the pod's memory request
    assert int(c["resources"]["requests"]["memory"].rstrip("Gi")) >= 200
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in spec["volumes"]
    assert any(v.get("hostPath", {}).get("path") == "/data/models/qwen3-27b-w4a16" for v in spec["volumes"])
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    assert doc["spec"]["selector"]["matchLabels"] == doc["spec"]["template"]["metadata"]["labels"]


def test_compose_and_docker_pin_the_gpus_of_cuda_visible_devices():
    launch, _ = scenario("s2")
    compose = yaml.safe_load(render_launch(launch, Target.COMPOSE).text)
    svc = compose["services"]["vllm"]
    dev = svc["deploy"]["resources"]["reservations"]["devices"][0]
    assert dev["device_ids"] == [str(i) for i in range(8)] and dev["capabilities"] == ["gpu"]
    assert svc["ipc"] == "host" and svc["ports"] == ["8000:8000"]
    docker = render_launch(launch, Target.DOCKER)
    assert "--gpus '\"device=0,1,2,3,4,5,6,7\"'" in docker.text
    assert any("renumbered" in n for n in docker.notes)


def test_secrets_never_appear():
    launch = Launch(
        "command",
        None,
        "m",
        flags={"api_key": ["sk-verysecretvalue123"], "hf_token": "hf_abcdefgh1234", "max_model_len": 4096},
        env={"VLLM_API_KEY": "sk-alsosecret4567", "HF_TOKEN": "hf_zzzzzzzz", "VLLM_HOST_IP": "10.0.0.1"},
    )
    for target in TARGETS:
        r = render_launch(launch, target, ExportOptions(vllm_version="0.32.0"))
        for secret in ("verysecretvalue", "hf_abcdefgh", "alsosecret", "hf_zzzz"):
            assert secret not in r.text, (target, r.text)
        assert "VLLM_API_KEY" in r.text  # the operator is told where it goes
        assert any("VLLM_API_KEY" in n for n in r.notes)
        if target is not Target.ENV:
            _, flags, _ = read_back(r.text, target, version="0.32.0")
            assert flags == {"max_model_len": 4096}
    k8s = yaml.safe_load(render_launch(launch, Target.KUBERNETES).text)
    env = k8s["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "VLLM_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "vllm-secrets", "key": "VLLM_API_KEY"}},
    } in env


def test_localhost_host_warns_in_containers():
    launch = Launch("command", None, "m", flags={"host": "127.0.0.1", "port": 9000})
    r = render_launch(launch, Target.DOCKER)
    assert "-p 9000:9000" in r.text and any("unreachable from outside" in n for n in r.notes)
    assert not any("unreachable" in n for n in render_launch(launch, Target.SYSTEMD).notes)


@pytest.mark.parametrize(
    "word",
    [
        "plain",
        "",
        "a b",
        'q"uote',
        "it's",
        "50%",
        "$HOME",
        "${X}",
        "$$",
        "back\\slash",
        "tab\there",
        "new\nline",
        ";",
        "%%n",
        '{"a":"b c"}',
        "ünïcode é",
    ],
)
def test_systemd_quoting_round_trips(word):
    assert split_command(quote_word(word)) == [word]
    assert split_command("prog " + quote_word(word) + " --x " + quote_word(word)) == ["prog", word, "--x", word]


def test_systemd_unit_layout():
    launch, _ = scenario("s2")
    unit = render_launch(launch, Target.SYSTEMD, ExportOptions(vllm_bin="/opt/vllm/bin/vllm")).text
    assert unit.index("[Unit]") < unit.index("[Service]") < unit.index("[Install]")
    assert environment(unit) == {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    exec_line = [ln for ln in join_lines(unit).splitlines() if ln.startswith("ExecStart=")][0]
    assert split_command(exec_line[len("ExecStart=") :])[:3] == [
        "/opt/vllm/bin/vllm",
        "serve",
        "codellama/CodeLlama-13b-Instruct-hf",
    ]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_accepts_the_unit(tmp_path):
    launch, version = scenario("s3")
    unit = render_launch(launch, Target.SYSTEMD, ExportOptions(vllm_version=version, vllm_bin="/bin/true")).text
    f = tmp_path / "vllm-test.service"
    f.write_text(unit)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(f)], capture_output=True, text=True, timeout=60)
    # only complaints about the unit file itself count (no systemd as PID 1 here, so others are noise)
    own = [ln for ln in (p.stdout + p.stderr).splitlines() if f.name in ln]
    assert own == [], own


def test_cli_export_launch(tmp_path):
    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "oomguard.cli.main", "export", "launch", *a],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )

    p = run(str(SCEN / "s1" / "start_api.sh"), "--to", "docker")
    assert p.returncode == 0, p.stderr
    assert "vllm/vllm-openai:latest" in p.stdout and "--max-num-batched-tokens 1048576" in p.stdout
    p = run(
        "--to",
        "kubernetes",
        "-o",
        str(tmp_path / "k.yaml"),
        "--vllm-version",
        "0.32.0",
        "--",
        "vllm",
        "serve",
        "m",
        "--max-model-len",
        "8192",
    )
    assert p.returncode == 0 and yaml.safe_load((tmp_path / "k.yaml").read_text())["kind"] == "Deployment"
    p = run(str(SCEN / "s1" / "start_api.sh"), "--to", "yaml", "-o", str(tmp_path / "c.yaml"))
    assert p.returncode == 0
    assert read_launch(tmp_path / "c.yaml").flags == read_launch(SCEN / "s1" / "start_api.sh").flags
    p = run("--to", "docker")
    assert p.returncode == 2 and "give a launch file" in p.stderr
    p = run(str(tmp_path / "missing.sh"), "--to", "docker")
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr
    p = run(str(SCEN / "s1" / "start_api.sh"), "--to", "podman")
    assert p.returncode == 2


def test_cli_fix_exports_checks_corrected_launch():
    pytest.importorskip("oomguard.cli.check")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "oomguard.cli.main",
            "export",
            "launch",
            str(SCEN / "s1" / "start_api.sh"),
            "--to",
            "yaml",
            "--fix",
            "--gpu",
            "A100-80GB",
            "--model",
            str(SCEN / "s1" / "model"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    data = yaml.safe_load(p.stdout)
    # S1's token budget equal to the whole 1M context is what check fixes (chunked prefill)
    assert data["max-num-batched-tokens"] < 1048576
    assert "--fix applied" in p.stderr


def test_a_tampered_export_is_caught_before_printing():
    from dataclasses import replace

    from oomguard.cli.export import _verify

    launch, version = scenario("s2")
    rendered = render_launch(launch, Target.DOCKER, ExportOptions(vllm_version=version))
    assert _verify(rendered, Target.DOCKER, launch, version) == []
    bad = replace(rendered, text=rendered.text.replace("--max-model-len 8192", "--max-model-len 4096"))
    (problem,) = _verify(bad, Target.DOCKER, launch, version)
    assert "'8192'" in problem and "'4096'" in problem
    broken = replace(rendered, text=rendered.text.replace("--max-model-len 8192", "--max-model-len '8192"))
    assert _verify(broken, Target.DOCKER, launch, version)[0].startswith("reading it back failed")
