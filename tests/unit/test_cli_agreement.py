"""The CLI agrees with itself and its docs: one exit-code table (cli/common.py) that every command's
--help prints, that the docs state and that the commands follow; one version check; SIGPIPE as the
pipe convention says (141); one width; the launch's own flag order; no Python None; V0 plans in
V0's terms; fit's exit code the same for --from and --model. Through the real CLI."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from oomguard.cli.common import EXIT_MEANINGS
from oomguard.cli.main import SUBCOMMANDS
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
ENV = {"HF_HUB_OFFLINE": "1"}
CODES = set(EXIT_MEANINGS)


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_help_ends_with_the_one_exit_code_table(command):
    p = run_cli(command, "--help")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "exit codes (the same for every oomguard command):" in text
    for code in CODES:
        assert re.search(rf"[:;] {code} ", text), (command, code)


def test_no_command_declares_its_own_exit_numbers():
    for path in (ROOT / "src" / "oomguard" / "cli").glob("*.py"):
        if path.name == "common.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(isinstance(t, (ast.Name, ast.Tuple)) for t in node.targets):
                names = [n.id for t in node.targets for n in ([t] if isinstance(t, ast.Name) else t.elts) if isinstance(n, ast.Name)]
                if any(n.startswith("EXIT_") and n != "EXIT_MEANINGS" for n in names):
                    literal = isinstance(node.value, ast.Constant) or (isinstance(node.value, ast.Tuple) and any(isinstance(e, ast.Constant) for e in node.value.elts))
                    assert not literal, f"{path.name}:{node.lineno}: {names} (use cli/common.py's table)"


def test_the_docs_state_only_the_shared_codes():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for doc in docs:
        text = doc.read_text()
        for m in re.finditer(r"[Ee]xit (?:codes?|status)[^.\n]*?((?:\*\*)?\d+(?:\*\*)?[^\n]*)", text):
            for n in re.findall(r"\*\*(\d+)\*\*", m.group(0)):
                assert int(n) in CODES, (doc.name, m.group(0)[:120])
    readme = " ".join((ROOT / "README.md").read_text().split())
    for code in CODES:
        assert f"**{code}**" in readme
    rules = (ROOT / "docs" / "rules.md").read_text()
    og001 = rules[rules.index("### OG001"):rules.index("### OG101")]
    assert "exits 3" in og001 and "exits 1" not in og001


@pytest.mark.parametrize("command", ["plan", "check", "fit", "host", "diagnose", "bundle"])
def test_one_version_check(command, tmp_path):
    args = {"fit": ["--model", "Qwen/Qwen3-8B", "--gpu", "H100"], "plan": ["--model", "Qwen/Qwen3-8B", "--gpu", "H100"],
            "check": ["--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-8B"], "host": [],
            "diagnose": [str(tmp_path / "x.log")], "bundle": [str(tmp_path / "x.log")]}[command]
    (tmp_path / "x.log").write_text("INFO starting\n")
    p = run_cli(command, "--vllm-version", "9.9", *args, env=ENV)
    assert p.returncode == 2 and "vLLM 9.9 is not a release oomguard knows" in p.stderr, (command, p.stderr)
    e = run_cli("export", "alerts", "--vllm-version", "9.9", env=ENV)
    assert e.returncode == 2 and "vLLM 9.9 is not a release oomguard knows" in e.stderr


def test_an_unreachable_server_is_could_not_complete_in_probe_and_watch():
    probe = run_cli("probe", "--base-url", "http://127.0.0.1:9", "--max-model-len", "128", "--concurrency", "1", "--format", "json", env=ENV)
    watch = run_cli("watch", "--base-url", "http://127.0.0.1:9", "--for", "1s", "--format", "json", env=ENV)
    assert probe.returncode == watch.returncode == 3, (probe.stderr[-300:], watch.stderr[-300:])


def test_og001_is_could_not_complete(tmp_path):
    s = tmp_path / "start_api.sh"
    s.write_text("vllm serve /models/not/here --max-model-len 4096\n")
    p = run_cli("check", str(s), "--gpu", "H100", env=ENV)
    assert p.returncode == 3 and "OG001" in p.stdout


def test_a_closed_pipe_ends_quietly_with_141():
    # `plan | head -1` with the reader already gone: the pipe's read end is closed before plan starts, so
    # its first write meets EPIPE on any machine (with a real `head`, plan's few KiB can all fit in the
    # pipe before head exits, and on a loaded machine it then ended 0: a race, not the behaviour).
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        p = subprocess.run([sys.executable, "-m", "oomguard.cli.main", "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100",
                            "--verbose"], stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60,
                           env={**os.environ, **ENV})
    finally:
        os.close(write_end)
    # -SIGPIPE (killed by the signal) is what a shell shows as 141
    assert p.returncode in (141, -13) and "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr


def test_bundle_has_a_json_format(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    p = run_cli("bundle", str(log), "--format", "json", env=ENV)
    d = json.loads(p.stdout)
    assert d["report"].startswith("#") and d["bytes"] == len(d["report"].encode()) and p.returncode in (0, 1)


def test_fit_exits_alike_for_an_unmet_goal_from_a_launch_and_from_a_model(tmp_path):
    s3 = ROOT / "tests" / "scenarios" / "s3"
    script = tmp_path / "start_api.sh"  # S3 in 0.33's spelling (--hf-overrides, --kv-cache-memory-bytes)
    script.write_text((s3 / "start_api.sh").read_text().replace("--rope-scaling '", "--hf-overrides '{\"rope_scaling\":")
                      .replace("262144}'", "262144}}'").replace("--kv-cache-memory ", "--kv-cache-memory-bytes "))
    from_launch = run_cli("fit", "--from", str(script), "--model", str(s3 / "model"), "--gpu", "RTX-4090", "--format", "json", env=ENV)
    from_model = run_cli("fit", "--model", str(s3 / "model"), "--gpu", "RTX-4090", "--num-gpus", "4", "--context", "750000",
                         "--format", "json", env=ENV)
    a, b = json.loads(from_launch.stdout), json.loads(from_model.stdout)
    assert not a["goal_met"] and not b["goal_met"]
    assert from_launch.returncode == from_model.returncode == 1
    ok = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--context", "8192", "--format", "json", env=ENV)
    assert ok.returncode == 0 and json.loads(ok.stdout)["goal_met"]


def test_one_width_and_the_launchs_own_flag_order(tmp_path):
    s2 = ROOT / "tests" / "scenarios" / "s2" / "start_api.sh"
    script = tmp_path / "start_api.sh"
    script.write_text(s2.read_text().replace("--tensor-parallel-size 8", "--max-num-seqs 64 --tensor-parallel-size 8"))
    fit = run_cli("fit", "--from", str(script), "--gpu", "RTX-3090", "--vllm-version", "0.6.6", env=ENV).stdout
    lines = fit.splitlines()
    assert max(len(line) for line in lines if "'{" not in line) <= 120
    assert any(len(line) > 80 for line in lines)  # not wrapped at rich's default 80
    block = fit[fit.index("vllm serve"):].split("\n  starts:")[0]
    order = [w for w in re.findall(r"--[a-z-]+", block)]
    assert order.index("--max-num-seqs") < order.index("--tensor-parallel-size") < order.index("--gpu-memory-utilization") < order.index("--max-model-len")
    for cmd in (["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100"], ["check", str(script), "--gpu", "RTX-3090"]):
        out = run_cli(*cmd, env=ENV).stdout
        assert max(len(line) for line in out.splitlines()) <= 120, cmd


def test_host_never_prints_python_none():
    for root in sorted((ROOT / "tests" / "fixtures" / "host" / "roots").iterdir()):
        out = run_cli("host", "--root", str(root), "--launch", str(ROOT / "tests/scenarios/s2/start_api.sh"), env=ENV).stdout
        assert not re.search(r"\bNone\b", out), root.name


def test_v0_plans_speak_v0():
    args = ("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--vllm-version", "0.6.6", "--max-model-len", "8192")
    text = run_cli(*args, "--verbose", env=ENV).stdout
    d = json.loads(run_cli(*args, "--format", "json", env=ENV).stdout)
    assert "PIECEWISE" not in text and "v1/" not in text and "V0 decode-step graphs" in text
    assert not any("v1/" in t["source"] or "PIECEWISE" in t["formula"] for t in d["per_gpu"]["terms"])
