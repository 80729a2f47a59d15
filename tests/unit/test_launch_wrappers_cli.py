"""Ordinary launch shapes issue 20 found crashing or refused, read through the real CLI (plan --json in a
subprocess): a script whose vLLM command runs under ``sh -c`` / ``bash -lc`` or pipes into ``tee``; a
Kubernetes ``kind: List`` and a CronJob; a compose ``gpus:`` list of device requests. Each is read as the
launch it is (its model and --max-model-len reach the plan)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

OFFLINE = {"HF_HUB_OFFLINE": "1"}
POD = ("spec:\n  containers:\n    - name: vllm\n      image: vllm/vllm-openai:v0.10.1\n"
       "      args: [--model, Qwen/Qwen3-8B, --max-model-len, '4096']\n"
       "      resources: {limits: {nvidia.com/gpu: 1}}\n")


def _indent(text: str, n: int) -> str:
    return "".join(" " * n + line + "\n" for line in text.splitlines())


FORMS = {
    "sh-c.sh": 'MODEL=Qwen/Qwen3-8B\nsh -c "vllm serve $MODEL --max-model-len 4096"\n',
    "bash-lc.sh": "bash -lc 'export X=1; vllm serve Qwen/Qwen3-8B --max-model-len 4096'\n",
    "tee.sh": "vllm serve Qwen/Qwen3-8B --max-model-len 4096 2>&1 | tee /tmp/vllm.log\n",
    "list.yaml": ("apiVersion: v1\nkind: List\nitems:\n  - apiVersion: apps/v1\n    kind: Deployment\n"
                  "    metadata: {name: a}\n    spec:\n      template:\n" + _indent(POD, 8)),
    "cron.yaml": ("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  jobTemplate:\n    spec:\n"
                  "      template:\n" + _indent(POD, 8)),
    "compose.yaml": ("services:\n  vllm:\n    image: vllm/vllm-openai:v0.10.1\n"
                     "    command: [--model, Qwen/Qwen3-8B, --max-model-len, '4096']\n"
                     "    deploy:\n      resources:\n        reservations:\n          devices:\n"
                     "            - {driver: nvidia, count: 1, capabilities: [gpu]}\n"),
    "compose-gpus.yaml": ("services:\n  vllm:\n    image: vllm/vllm-openai:v0.10.1\n"
                          "    command: [--model, Qwen/Qwen3-8B, --max-model-len, '4096']\n"
                          "    gpus:\n      - driver: nvidia\n        count: 1\n"),
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_the_launch_is_read_through_the_cli(tmp_path, name):
    path = tmp_path / name
    path.write_text(FORMS[name])
    p = run_cli("plan", str(path), "--gpu", "H100", "--json", env=OFFLINE, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    plan = json.loads(p.stdout)
    assert plan["max_model_len"] == 4096 and "Qwen3-8B" in plan["model"]
