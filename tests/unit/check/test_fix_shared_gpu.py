"""``check --fix`` on one file whose servers share a GPU and do not all start writes the planner's split.

Two compose services (or two pods pinned to one node) reserving the same device, each tuned alone: the
second fails vLLM's free-memory check at start. check used to print the splits that work and write nothing;
now ``--fix`` writes the first split that lets every server start (pinned KV pools where the release has
``--kv-cache-memory-bytes``, else utilizations) into each server's own flags, and the written file passes
``oomguard check`` (exit 0: every server starts, together). Through the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.conftest import ROOT, run_cli

FIXTURES = ROOT / "tests" / "fixtures" / "shared-gpu"


def _commands(doc: dict, kind: str) -> list[list[str]]:
    if kind == "compose":
        return [svc["command"] for svc in doc["services"].values()]
    return [doc["spec"]["containers"][0]["args"]]


@pytest.mark.parametrize("fixture, kind", [("two-services.yaml", "compose"), ("two-pods.yaml", "pod")])
def test_fix_writes_the_first_split_that_starts_every_server(fixture, kind, tmp_path):
    src = tmp_path / fixture
    shutil.copy(FIXTURES / fixture, src)
    before = run_cli("check", str(src), "--gpu", "A100-80GB", "--format", "json", timeout=120)
    assert before.returncode == 1 and any(not sp["ok"] for sp in json.loads(before.stdout)["shared_gpu"])
    split = next(o for o in json.loads(before.stdout)["shared_gpu"][0]["options"] if o["ok"] and o["kind"] != "mig")

    p = run_cli("check", str(src), "--gpu", "A100-80GB", "--fix", timeout=120)
    assert p.returncode == 1, p.stderr  # the file as given still fails
    assert f"--fix writes split {split['kind']}" in p.stderr, p.stderr
    fixed = src.with_name(src.stem + ".fixed.yaml")
    docs = [d for d in yaml.safe_load_all(fixed.read_text()) if d]
    commands = [c for d in docs for c in _commands(d, kind)]
    for server, command in zip(split["servers"], commands):
        for dest, value in server["edits"].items():
            option = "--" + dest.replace("_", "-")
            assert command[command.index(option) + 1] == str(value), (option, command)

    after = run_cli("check", str(fixed), "--gpu", "A100-80GB", "--format", "json", timeout=120)
    assert after.returncode == 0, after.stdout[-2000:]
    assert all(sp["ok"] for sp in json.loads(after.stdout)["shared_gpu"])


def test_fix_with_same_gpu_writes_each_script_beside_itself(tmp_path):
    """Two scripts on one A100 (`check chat.sh --same-gpu helper.sh`), the helper failing vLLM's free-memory check:
    --fix writes chat.fixed.sh and helper.fixed.sh with the split, never the scripts themselves, and the two
    written scripts pass check together."""
    chat, helper = tmp_path / "chat.sh", tmp_path / "helper.sh"
    chat.write_text("vllm serve Qwen/Qwen3-8B --max-model-len 32768 --gpu-memory-utilization 0.7\n")
    helper.write_text("vllm serve Qwen/Qwen3-0.6B --max-model-len 8192 --gpu-memory-utilization 0.3 --port 8001\n")
    originals = chat.read_text(), helper.read_text()
    args = ("--gpu", "A100-80GB", "--vllm-version", "0.11.0")
    p = run_cli("check", str(chat), "--same-gpu", str(helper), *args, "--fix", timeout=120)
    assert p.returncode == 1 and "--fix writes split" in p.stderr, p.stderr
    assert (chat.read_text(), helper.read_text()) == originals
    fixed = tmp_path / "chat.fixed.sh", tmp_path / "helper.fixed.sh"
    assert all(f.read_text() != o for f, o in zip(fixed, originals))  # each server's own flags changed
    after = run_cli("check", str(fixed[0]), "--same-gpu", str(fixed[1]), *args, "--format", "json", timeout=120)
    assert after.returncode == 0, after.stdout[-2000:]
    assert json.loads(after.stdout)["shared_gpu"][0]["ok"] is True
