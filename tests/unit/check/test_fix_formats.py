"""``check --fix`` writes the user's own format back: a minimal diff at the value's span, comments kept.

Through the real CLI entry point: a Deployment (list args, a ``sh -c`` block script with
``$(VAR)``), compose (a string command; a list command with an environment list, and one
without an environment), Helm values with two modelSpecs, a script, and ``--in-place``. Each
corrected file is read back by the same reader, in the same format, and checked clean.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
S1_MODEL = ROOT / "tests" / "scenarios" / "s1" / "model"


def cli(*argv) -> tuple[int, str, str]:
    from oomguard.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def changed_lines(a: str, b: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0))
    return ([x[1:] for x in diff if x.startswith("-") and not x.startswith("---")],
            [x[1:] for x in diff if x.startswith("+") and not x.startswith("+++")])


def fix(path: Path, *opts) -> str:
    code, _out, err = cli("check", path, *opts, "--fix")
    assert code in (0, 1), err
    fixed = path.with_name(f"{path.stem}.fixed{path.suffix}")
    assert fixed.exists(), err
    return fixed.read_text()


def assert_clean(path: Path, *opts) -> dict:
    code, out, err = cli("check", path, *opts, "--format", "json")
    report = json.loads(out)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert not errors and code == 0, (errors, err)
    return report


DEPLOYMENT = """# S1 as a Deployment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: qwen-1m   # one 1M-token request
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args:
            - /models/qwen-1m
            - --max-model-len
            - "1048576"      # the goal
            - --max-num-batched-tokens=1048576
            - --max-num-seqs
            - "1"
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def test_deployment_args_are_fixed_in_place(tmp_path):
    p = tmp_path / "deploy.yaml"
    p.write_text(DEPLOYMENT)
    fixed = fix(p, "--gpu", "A100-80GB", "--model", S1_MODEL)
    old, new = changed_lines(DEPLOYMENT, fixed)
    assert old == ["            - --max-num-batched-tokens=1048576"]
    assert len(new) == 1 and new[0].startswith("            - --max-num-batched-tokens=") and "1048576" not in new[0]
    assert "# one 1M-token request" in fixed and '"1048576"      # the goal' in fixed
    report = assert_clean(p.with_name("deploy.fixed.yaml"), "--gpu", "A100-80GB", "--model", S1_MODEL)
    assert report["launch"]["kind"] == "manifest" and report["launch"]["read"]["vllm_version"]["value"] == "0.11.0"


def test_a_sh_c_block_script_with_kubernetes_variables(tmp_path):
    text = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: llm}
spec:
  template:
    spec:
      containers:
        - name: server
          image: registry.local/serving:1
          command: ["/bin/sh", "-c"]
          args:
            - |
              exec vllm serve $(MODEL_DIR) \\
                --max-model-len 1048576 \\
                --max-num-batched-tokens 1048576
          env:
            - name: MODEL_DIR
              value: /models/qwen-1m
"""
    p = tmp_path / "sts.yaml"
    p.write_text(text)
    fixed = fix(p, "--gpu", "A100-80GB", "--model", S1_MODEL, "--vllm-version", "0.11.0")
    old, new = changed_lines(text, fixed)
    assert old == ["                --max-num-batched-tokens 1048576"] and "exec vllm serve $(MODEL_DIR) \\" in fixed
    assert new[0].startswith("                --max-num-batched-tokens ")
    assert_clean(p.with_name("sts.fixed.yaml"), "--gpu", "A100-80GB", "--model", S1_MODEL, "--vllm-version", "0.11.0")


def test_compose_string_command_and_environment_forms(tmp_path):
    text = ("services:\n  llm:\n    image: vllm/vllm-openai:v0.33.0\n    # a string command\n"
            "    command: Qwen/Qwen3-8B --max-model-len 131072\n")
    p = tmp_path / "compose.yaml"
    p.write_text(text)
    fixed = fix(p, "--gpu", "H100")
    assert "    # a string command\n" in fixed
    line = next(x for x in fixed.splitlines() if x.startswith("    command:"))
    assert line.startswith("    command: Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides ")
    assert "      - \"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\"" in fixed  # the environment, not a command prefix
    assert_clean(p.with_name("compose.fixed.yaml"), "--gpu", "H100")
    listed = ("services:\n  llm:\n    image: vllm/vllm-openai:v0.33.0\n    command:\n      - Qwen/Qwen3-8B\n"
              "      - --max-model-len\n      - '131072'\n    environment:\n      - VLLM_LOGGING_LEVEL=INFO  # kept\n")
    q = tmp_path / "compose2.yaml"
    q.write_text(listed)
    fixed = fix(q, "--gpu", "H100")
    old, new = changed_lines(listed, fixed)
    assert old == [] and any("--hf-overrides" in x for x in new) and any("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in x for x in new)
    assert "      - VLLM_LOGGING_LEVEL=INFO  # kept\n" in fixed
    assert_clean(q.with_name("compose2.fixed.yaml"), "--gpu", "H100")


HELM = """# production-stack values: two models
servingEngineSpec:
  modelSpec:
  - name: long
    repository: vllm/vllm-openai
    tag: v0.11.0
    modelURL: /models/qwen-1m
    requestGPU: 1
    vllmConfig:
      maxModelLen: 1048576   # the goal
      gpuMemoryUtilization: 0.9
      extraArgs: ["--max-num-batched-tokens", "1048576"]
  - name: short
    repository: vllm/vllm-openai
    tag: v0.11.0
    modelURL: /models/qwen-1m
    requestGPU: 1
    vllmConfig:
      maxModelLen: 1048576
"""


def test_helm_values_with_two_model_specs_are_both_fixed(tmp_path):
    p = tmp_path / "values.yaml"
    p.write_text(HELM)
    code, out, err = cli("check", p, "--gpu", "A100-80GB", "--model", S1_MODEL, "--format", "json")
    report = json.loads(out)
    assert [x["launch"]["name"] for x in report["launches"]] == ["modelSpec long", "modelSpec short"]
    assert {f["launch"] for f in report["findings"] if f["severity"] == "error"} == {"modelSpec long", "modelSpec short"}
    fixed = fix(p, "--gpu", "A100-80GB", "--model", S1_MODEL)
    assert "# production-stack values: two models" in fixed and "maxModelLen: 1048576   # the goal" in fixed
    old, new = changed_lines(HELM, fixed)
    assert all("1048576" not in x or "maxModelLen" in x for x in new)
    assert any("gpuMemoryUtilization" in x for x in old)  # a chart key is edited where it is
    again = assert_clean(p.with_name("values.fixed.yaml"), "--gpu", "A100-80GB", "--model", S1_MODEL)
    assert len(again["launches"]) == 2


def test_in_place_keeps_the_format_and_a_pipe_is_never_written(tmp_path):
    p = tmp_path / "deploy.yaml"
    p.write_text(DEPLOYMENT)
    code, _out, err = cli("check", p, "--gpu", "A100-80GB", "--model", S1_MODEL, "--fix", "--in-place")
    assert code == 1 and "wrote" in err
    text = p.read_text()
    assert text.startswith("# S1 as a Deployment\napiVersion: apps/v1\n") and "kind: Deployment" in text
    assert not (tmp_path / "deploy.fixed.sh").exists()
    assert_clean(p, "--gpu", "A100-80GB", "--model", S1_MODEL)
    # a launch from a pipe: the corrected launch is printed, no file is written
    proc = subprocess.run([sys.executable, "-m", "oomguard.cli.main", "check", "-", "--gpu", "A100-80GB", "--model",
                           str(S1_MODEL), "--fix"], input=DEPLOYMENT, capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 1 and "came from a pipe" in proc.stderr, proc.stderr
    assert "+++ " not in proc.stdout or "<stdin>" in proc.stdout
    assert sorted(x.name for x in tmp_path.iterdir()) == ["deploy.yaml"]


def test_a_script_stays_a_script(tmp_path):
    p = tmp_path / "start_api.sh"
    p.write_text("#!/bin/bash\n# S1\nsh -c \"vllm serve Qwen/Qwen3-8B --max-model-len 131072\"\n")
    fixed = fix(p, "--gpu", "H100")
    assert fixed.startswith("#!/bin/bash\n# S1\n") and "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\n" in fixed
    assert "sh -c \"vllm serve Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides '{\\\"rope_scaling\\\"" in fixed
    assert_clean(p.with_name("start_api.fixed.sh"), "--gpu", "H100")
