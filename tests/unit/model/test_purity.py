"""The memory model is pure arithmetic: no I/O, network, GPU or presentation imports (style.md §1)."""

import ast
from pathlib import Path

MODEL = Path(__file__).resolve().parents[3] / "src" / "oomguard" / "model"
FORBIDDEN = {"rich", "httpx", "psutil", "subprocess", "socket", "pynvml", "requests", "yaml", "oomguard.inputs", "oomguard.cli", "oomguard.plan"}


def test_model_package_imports_nothing_impure():
    offenders = []
    for path in MODEL.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                if any(n == f or n.startswith(f + ".") for f in FORBIDDEN):
                    offenders.append(f"{path.name}: {n}")
    assert offenders == []
