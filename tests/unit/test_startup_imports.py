"""Each command imports and reads only what it uses (start-up cost; benchmarks/cli_startup.py has the times).

The real CLI runs in a fresh interpreter; an audit hook records every file it opens, and at exit the
modules it imported are listed. No timing: what is asserted is that heavy libraries and other
commands' packages stay out, and that only the asked release's flag table is parsed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oomguard.cli.main import YOUNG_GENERATION
from oomguard.versions import releases

REPO = Path(__file__).resolve().parents[2]
S1 = REPO / "tests" / "scenarios" / "s1"
LOGS = REPO / "tests" / "fixtures" / "logs"

_PROBE = r"""
import gc, json, sys
opened = []
sys.addaudithook(lambda ev, a: opened.append(a[0]) if ev == "open" and isinstance(a[0], str) else None)
report, sys.argv = sys.argv[1], ["oomguard"] + sys.argv[2:]
from oomguard.cli.main import main
try:
    code = main()
finally:
    classes = [c for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith("oomguard")
               for c in vars(m).values() if isinstance(c, type) and c.__module__ == m.__name__]
    records = sorted({f"{c.__module__}.{c.__qualname__}": c.__dataclass_params__.frozen
                      for c in classes if "__dataclass_params__" in vars(c)}.items())
    # typing.NamedTuple turns each annotation into a ForwardRef; oomguard.records.NamedTuple keeps the strings
    typing_tuples = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if "_fields" in vars(c)
                           and any(not isinstance(a, str) for a in vars(c).get("__annotations__", {}).values()))
    with open(report, "w") as out:
        json.dump({"modules": sorted(sys.modules), "opened": opened, "dataclasses": records,
                   "typing_named_tuples": typing_tuples, "gc_threshold": gc.get_threshold()}, out)
sys.exit(code)
"""

HEAVY = ("rich", "yaml", "httpx", "hyperscan", "re2", "psutil", "prometheus_client", "numpy", "shutil")


def _report(tmp_path: Path, *argv: str) -> dict:
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-c", _PROBE, str(report), *map(str, argv)], capture_output=True,
                          text=True, cwd=REPO)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(report.read_text())


def _run(tmp_path: Path, *argv: str) -> tuple[set[str], set[str]]:
    data = _report(tmp_path, *argv)
    tables = {Path(p).name for p in data["opened"] if Path(p).parent == Path(releases.DATA_DIR)}
    return set(data["modules"]), tables


def _packages(modules: set[str], *prefixes: str) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(prefixes))


def _table(version: str) -> str:
    return f"vllm-{version}.json"


def test_plan_json_imports_no_heavy_library_and_reads_one_table(tmp_path):
    modules, tables = _run(tmp_path, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--json")
    assert _packages(modules, "oomguard.diagnose", "oomguard.check", "oomguard.fit", "oomguard.export",
                     "oomguard.probe", "oomguard.watch", "oomguard.host", "oomguard.calibrate") == []
    assert tables == {_table(releases.supported()[-1])}
    # a catalog model's plan reads the bundled files by path strings: pathlib and the urllib.parse and ipaddress
    # it imports (~3 ms) are for paths the user gives (a launch file, a model folder)
    assert sorted(modules & {"pathlib", "urllib.parse", "ipaddress"}) == []
    # SIGPIPE's default is set through _signal: signal's import builds three IntEnums (cli/main.py)
    assert "signal" not in modules


# What plan, check and fit do not import (stdlib modules their start-up paid for, ms of CPU each on Python
# 3.11): dataclasses and the inspect/ast/dis/tokenize it pulls in (~8 ms; their mutable records are
# oomguard.records.record, their frozen ones oomguard.records.NamedTuple: typing's compiles each
# annotation, ~0.1 ms a class).
NOT_AT_START_UP = ("dataclasses", "inspect", "ast", "dis", "tokenize")
# typing and the contextlib it imports (~2.5 ms): with ``from __future__ import annotations`` typing's names are
# needed by type checkers only, imported under ``TYPE_CHECKING = False`` (oomguard/records.py says why).
NO_TYPING = ("typing", "contextlib")


@pytest.mark.parametrize("argv", [
    ("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--json"),
    ("plan", S1 / "start_api.sh", "--model", S1 / "model", "--gpu", "A100-80GB", "--json"),
])
def test_plan_defines_no_dataclass_nor_typing_named_tuple(tmp_path, argv):
    data = _report(tmp_path, *argv)
    assert data["dataclasses"] == [], "plan's records are oomguard.records"
    assert data["typing_named_tuples"] == [], "plan's frozen records are oomguard.records.NamedTuple"
    # the command line's young generation (cli/main.py): start-up's objects are not garbage
    assert data["gc_threshold"][0] == YOUNG_GENERATION
    assert sorted(set(NOT_AT_START_UP) & set(data["modules"])) == []
    assert sorted(set(NO_TYPING) & set(data["modules"])) == []


def test_plan_reads_only_the_asked_release(tmp_path):
    modules, tables = _run(tmp_path, "plan", S1 / "start_api.sh", "--model", S1 / "model", "--gpu", "A100-80GB",
                           "--vllm-version", "0.20.0", "--json")
    assert tables == {_table("0.20.0")}


def test_check_with_an_unknown_flag_reads_the_index_not_every_table(tmp_path):
    """"removed in 0.18.0 (last accepted by 0.17.1)" comes from the option index (versions/option_index.py)."""
    modules, tables = _run(tmp_path, "check", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--swap-space", "4",
                           "--format", "json")
    assert tables == {_table(releases.supported()[-1]), "option-index.json"}
    assert _packages(modules, "oomguard.diagnose", "oomguard.export", "oomguard.probe", "oomguard.watch") == []
    assert sorted(set(NOT_AT_START_UP) & modules) == []
    assert sorted(set(NO_TYPING) & modules) == [] and "pathlib" not in modules  # a catalog model: no path given


@pytest.mark.parametrize("log", ["bad-argument-swap-space.log", "v1-kv-too-small.log"])
def test_diagnose_reads_at_most_one_flag_table(tmp_path, log):
    """The fix that names a flag reads the option index and the log's release, not every table; the byte
    scan's engine (hyperscan) is diagnose's own. Measured on the second run: the first after a change to the
    source compiles the scan database and writes it to the cache (tempfile, shutil)."""
    _run(tmp_path, "diagnose", LOGS / log, "--format", "json")
    modules, tables = _run(tmp_path, "diagnose", LOGS / log, "--format", "json")
    assert len([t for t in tables if t.startswith("vllm-")]) <= 1, tables
    found = _packages(modules, "oomguard.check", "oomguard.fit", "oomguard.export", "oomguard.probe", "oomguard.watch")
    assert [m for m in found if m.split(".")[0] != "hyperscan"] == []
    # diagnose's records are oomguard.records too (ast stays: the log's "non-default args" dict is read by
    # ast.literal_eval)
    assert sorted((set(NOT_AT_START_UP) - {"ast"}) & modules) == []


def test_fit_imports_no_heavy_library(tmp_path):
    modules, tables = _run(tmp_path, "fit", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--context", "32768",
                           "--format", "json")
    assert _packages(modules, "oomguard.diagnose", "oomguard.check", "oomguard.export", "oomguard.probe",
                     "oomguard.watch") == []
    assert tables == {_table(releases.supported()[-1])}
    assert sorted(set(NOT_AT_START_UP) & modules) == []
    assert sorted(set(NO_TYPING) & modules) == [] and "pathlib" not in modules
