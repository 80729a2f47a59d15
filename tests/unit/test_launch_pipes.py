"""Launches from pipes, like logs: ``-`` and ``/dev/fd/N`` for every command that takes a launch.

Through the real CLI in subprocesses (a pipe is a process boundary): ``plan -``, ``check -``,
``fit --from -``, ``host --launch -``, ``export launch -`` read stdin; bash's process substitution
(``oomguard plan <(cat deploy.yaml)``) hands a ``/dev/fd/N`` pipe; a missing launch file is
"no such file", not "unexpected argument"; a pipe is bounded like a file.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "tests" / "fixtures" / "launch" / "k8s" / "s3_deployment.yaml"
HOST_ROOT = ROOT / "tests" / "fixtures" / "host" / "roots" / "two_numa_4x4090"
SCRIPT = "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --max-num-seqs 16\n"


def run(argv: list[str], stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oomguard.cli.main", *argv], input=stdin, capture_output=True,
                          text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize("argv", [
    ["plan", "-", "--gpu", "H100"],
    ["check", "-", "--gpu", "H100"],
    ["fit", "--from", "-", "--gpu", "H100"],
    ["host", "--launch", "-", "--root", str(HOST_ROOT)],
    ["export", "launch", "-", "--to", "systemd"],
])
def test_every_command_reads_a_launch_on_stdin(argv):
    p = run(argv, stdin=SCRIPT)
    assert p.returncode in (0, 1), p.stderr
    assert "unexpected argument" not in p.stderr and "Traceback" not in p.stderr


def test_plan_reads_the_same_launch_from_stdin_and_from_the_file():
    import json

    a = json.loads(run(["plan", str(DEPLOY), "--gpu", "RTX-4090", "--model", "Qwen/Qwen3-32B", "--json"]).stdout)
    b = json.loads(run(["plan", "-", "--gpu", "RTX-4090", "--model", "Qwen/Qwen3-32B", "--json"],
                       stdin=DEPLOY.read_text()).stdout)
    assert {k: v["value"] for k, v in a["launch"]["flags"].items()} == {k: v["value"] for k, v in b["launch"]["flags"].items()}
    assert b["launch"]["path"] == "<stdin>" and b["launch"]["flags"]["max_model_len"]["source"]["line"] == 27
    assert a["kv_cache_tokens"] == b["kv_cache_tokens"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="process substitution needs bash")
def test_process_substitution_hands_a_dev_fd_pipe():
    cmd = (f"{shlex.quote(sys.executable)} -m oomguard.cli.main plan <(cat {shlex.quote(str(DEPLOY))}) "
           "--gpu RTX-4090 --model Qwen/Qwen3-32B --json")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert p.returncode in (0, 1), p.stderr
    assert '"path": "/dev/fd/' in p.stdout and "FIFO" not in p.stderr
    h = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m oomguard.cli.main check "
                        f"<(cat {shlex.quote(str(DEPLOY))}) --gpu RTX-4090 --num-gpus 4"],
                       capture_output=True, text=True, timeout=300)
    assert h.returncode in (1, 3) and "/dev/fd/" in h.stdout and "OG405" in h.stdout, h.stderr


def test_a_missing_launch_file_is_no_such_file(tmp_path):
    for argv in (["plan", "missing.sh", "--gpu", "H100"], ["check", "missing.sh"], ["fit", "--from", "missing.yaml"]):
        p = run(argv, cwd=tmp_path)
        assert p.returncode == 2 and "no such file" in p.stderr and "missing" in p.stderr, p.stderr
        assert "unexpected argument" not in p.stderr


def test_a_pipe_is_bounded_like_a_file():
    p = run(["plan", "-", "--gpu", "H100"], stdin="vllm serve m " + "--x y " * 300_000)
    assert p.returncode == 2 and "too large for a launch file" in p.stderr


def test_fit_from_stdin_gives_the_answer_of_the_file():
    """fit --from reads its launch twice (the launch, then check's fixes of it; a third time when the
    model is matched by name): a pipe gives its text once, so every read must see the same text.
    Before, the second read met an empty pipe: check's first edit was silently lost (another answer
    than for the file), and a Deployment whose model is not here was 'empty file'."""
    import json

    docker = ROOT / "tests" / "fixtures" / "launch" / "docker_run.sh"

    def answer(p):
        assert p.returncode in (0, 1), p.stderr
        best = json.loads(p.stdout)["candidates"][0]
        return best["command"], best["flags"]

    from_file = answer(run(["fit", "--from", str(docker), "--gpu", "H100", "--format", "json"]))
    from_pipe = answer(run(["fit", "--from", "-", "--gpu", "H100", "--format", "json"], stdin=docker.read_text()))
    assert from_pipe == from_file
    p = run(["fit", "--from", "-", "--gpu", "RTX-4090", "--num-gpus", "4"], stdin=DEPLOY.read_text())
    assert "empty file" not in p.stderr and "model path does not exist" in p.stderr and p.returncode == 2


COMPOSE_ONE_GPU = """services:
  vllm:
    image: vllm/vllm-openai:v0.11.0
    command: ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192", "--tensor-parallel-size", "2"]
    gpus:
      - driver: nvidia
        count: 1
        capabilities: [gpu]
"""


@pytest.mark.parametrize("argv, expect", [
    (["check", "-", "--gpu", "H100"], "(the manifest's GPU limit)"),
    (["plan", "-", "--gpu", "H100"], "WILL NOT START (config-error)"),
])
def test_the_gpus_a_manifest_gives_are_the_gpus_planned(argv, expect):
    """A compose service (or Deployment) that gives one GPU to a TP 2 launch does not start; check
    and plan said nothing (they planned TP x PP GPUs whatever the manifest gave)."""
    p = run(argv, stdin=COMPOSE_ONE_GPU)
    assert p.returncode == 1, p.stderr
    assert expect in p.stdout + p.stderr
