"""Shared test helpers: run the real CLI in-process or as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Property tests assert behaviour, never speed (speed is benchmarks/'s): no per-example deadline, which a
# loaded 2-core machine exceeds (the alert tracker's brute-force comparison failed at load 20).
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("oomguard", deadline=None)
_hypothesis_settings.load_profile("oomguard")
SCENARIOS = ROOT / "tests" / "scenarios"

# diagnose's compiled Hyperscan databases (diagnose/scan_cache.py): one cache for the whole run and the CLI
# subprocesses it starts, outside the user's home; compiled once (~2 s), then loaded in milliseconds.
os.environ.setdefault("OOMGUARD_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"oomguard-test-cache-{os.getuid()}"))


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "oomguard.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=str(cwd or ROOT),
        env=e,
        timeout=timeout,
    )


@pytest.fixture
def deployment(tmp_path):
    """A one-GPU Deployment of vllm/vllm-openai:v0.10.1 written to tmp_path/deploy.yaml; the argument is the
    container's args/env YAML (dedented; written at the container's indentation)."""
    import textwrap

    def write(container: str):
        body = textwrap.indent(textwrap.dedent(container).strip("\n"), " " * 10)
        path = tmp_path / "deploy.yaml"
        path.write_text(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: qwen}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
{body}
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
""")
        return path

    return write


@pytest.fixture
def cli():
    return run_cli


def pytest_collection_modifyitems(config, items):
    """``OOMGUARD_SKIP_VLLM=1`` skips every test that needs vLLM, even when .venv-vllm exists."""
    if os.environ.get("OOMGUARD_SKIP_VLLM", "") != "1":
        return
    skip = pytest.mark.skip(reason="OOMGUARD_SKIP_VLLM=1")
    for item in items:
        if item.get_closest_marker("vllm") is not None:
            item.add_marker(skip)


def top_verdict(tmp_path: Path, text: str, **options):  # noqa: ANN003, ANN201 - a diagnose Verdict
    """diagnose on ``text`` written to a report file: its first verdict (one is asserted)."""
    from oomguard.diagnose.diagnosis import diagnose

    p = tmp_path / "report.txt"
    p.write_text(text, encoding="utf-8")
    d = diagnose([str(p)], **options)
    assert d.verdicts, "a failure cue must give a verdict"
    return d.verdicts[0]


def top_class(tmp_path: Path, text: str) -> str:
    """diagnose on ``text``: the first verdict's class name, or ``"(none)"`` when there is no verdict."""
    from oomguard.diagnose.diagnosis import diagnose

    p = tmp_path / "report.txt"
    p.write_text(text, encoding="utf-8")
    d = diagnose([str(p)])
    return d.verdicts[0].cls.value if d.verdicts else "(none)"
