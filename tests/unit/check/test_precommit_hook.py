"""The pre-commit hook in a real repository: `oomguard check --hook` checks only the files that hold
a vLLM launch (content sniffing), with per-path settings from .oomguard.yaml, and takes the hook's
`args:` the way pre-commit passes them. The last test runs `pre-commit try-repo` on a sample git
repository with an unrelated Helm chart (Redis), a deployment.yaml with vLLM and one without."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "tests" / "fixtures" / "hook_repo"
FILES = ["charts/redis/Chart.yaml", "charts/redis/values.yaml", "charts/redis/templates/deployment.yaml",
         "deploy/web/deployment.yaml", "deploy/vllm/deployment.yaml", "scripts/start_api.sh", "scripts/helper.sh"]


@pytest.fixture
def repo(tmp_path) -> Path:
    dst = tmp_path / "repo"
    shutil.copytree(SAMPLE, dst)
    return dst


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


def hook(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oomguard.cli.main", "check", "--hook", *args], cwd=repo,
                          capture_output=True, text=True, timeout=120, env=_env())


def test_only_vllm_launches_are_checked_each_with_its_paths_settings(repo):
    p = hook(repo, "--verbose", *FILES)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "charts/redis/values.yaml: skipped: YAML without vLLM flags" in out
    assert "charts/redis/templates/deployment.yaml: skipped" in out and "deploy/web/deployment.yaml: skipped" in out
    assert "scripts/helper.sh: skipped" in out
    vllm = out[out.index("== deploy/vllm/deployment.yaml =="):]
    assert "H100" in vllm.splitlines()[1]  # deploy/vllm/** -> H100
    script = out[out.index("== scripts/start_api.sh =="):]
    assert "RTX-4090" in script.splitlines()[1]  # scripts/** -> RTX-4090
    assert "2 launch(es) checked of 7 file(s)" in out


def test_the_hooks_args_as_pre_commit_passes_them(repo):
    # args: [--gpu, A100-80GB, --model, models/x/config.json] (option values before the files)
    model = repo / "models" / "x"
    model.mkdir(parents=True)
    shutil.copy(ROOT / "src" / "oomguard" / "data" / "models" / "Qwen__Qwen3-8B" / "config.json", model / "config.json")
    (repo / ".oomguard.yaml").unlink()
    p = hook(repo, "--gpu", "A100-80GB", "--model", "models/x/config.json", "scripts/start_api.sh", "deploy/vllm/deployment.yaml")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("A100-SXM4-80GB") == 2 and "expected one argument" not in p.stderr


def test_a_launch_that_will_not_start_fails_the_commit(repo):
    s = repo / "scripts" / "start_api.sh"
    s.write_text(s.read_text().replace("--max-model-len 16384", "--max-model-len 40960"))
    p = hook(repo, "scripts/start_api.sh", "charts/redis/values.yaml")
    assert p.returncode == 1 and "OG201" in p.stdout  # 40,960 tokens do not fit a 24 GB card next to 16 GB of weights


def test_skip_and_bad_settings(repo):
    cfg = repo / ".oomguard.yaml"
    cfg.write_text(cfg.read_text() + "  - glob: deploy/**\n    skip: true\n")
    p = hook(repo, "--verbose", "deploy/vllm/deployment.yaml")
    assert p.returncode == 0 and "deploy/vllm/deployment.yaml: skipped by .oomguard.yaml" in p.stdout
    cfg.write_text("gpu: H100\npaths:\n  - glob: deploy/**\n    gpus: 8\n")
    bad = hook(repo, "deploy/vllm/deployment.yaml")
    assert bad.returncode == 2 and ".oomguard.yaml" in bad.stderr and "unknown key 'gpus'" in bad.stderr
    cfg.write_text("paths:\n  - glob: deploy/**\n    num_gpus: lots\n")
    bad = hook(repo, "deploy/vllm/deployment.yaml")
    assert bad.returncode == 2 and ".oomguard.yaml" in bad.stderr


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"})


def _pre_commit() -> str | None:
    exe = Path(sys.executable).parent / "pre-commit"
    return str(exe) if exe.exists() else shutil.which("pre-commit")


@pytest.mark.skipif(_pre_commit() is None or shutil.which("git") is None, reason="pre-commit (pip install pre-commit) and git needed")
def test_pre_commit_try_repo_on_a_sample_repository(repo, tmp_path):
    # The hook repository: this project's .pre-commit-hooks.yaml with one change, `language: system`
    # (the installed oomguard), because `language: python` makes pre-commit pip-install the repo
    # into a fresh virtualenv, which needs the network. Everything else (entry, file types) is ours.
    ours = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert ours.count("language: python") == 1
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / ".pre-commit-hooks.yaml").write_text(ours.replace("language: python", "language: system"))
    _git(hooks, "init", "-q")
    _git(hooks, "add", ".")
    _git(hooks, "commit", "-qm", "hooks")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    env = {**_env(), "PRE_COMMIT_HOME": str(tmp_path / "pc-home"), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "SKIP": "", "PRE_COMMIT_ALLOW_NO_CONFIG": "1"}

    def try_repo():
        return subprocess.run([_pre_commit(), "try-repo", str(hooks), "oomguard-check", "--all-files", "--verbose"], cwd=repo,
                              capture_output=True, text=True, timeout=300, env=env)

    p = try_repo()
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "oomguard check (vLLM launches)" in p.stdout and "Passed" in p.stdout
    assert "== deploy/vllm/deployment.yaml ==" in p.stdout and "== scripts/start_api.sh ==" in p.stdout
    assert "== charts/redis" not in p.stdout and "== deploy/web" not in p.stdout  # sniffed out, not checked
    # a launch that will not start on its path's GPU fails the hook
    s = repo / "scripts" / "start_api.sh"
    s.write_text(s.read_text().replace("--max-model-len 16384", "--max-model-len 40960"))
    _git(repo, "add", ".")
    p = try_repo()
    assert p.returncode == 1 and "Failed" in p.stdout and "OG201" in p.stdout
