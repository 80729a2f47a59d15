"""User-facing text speaks the user's language: no project jargon (the founding scenarios' names,
"S2's budget") in any message, rule text or output string. Docstrings and comments may cite them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "oomguard"
JARGON = re.compile(r"\bS[123]\b|\bS[123]'s")


def _strings(tree: ast.AST):
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docs.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node


def test_no_scenario_names_in_user_facing_strings():
    offenders = []
    for path in SRC.rglob("*.py"):
        for node in _strings(ast.parse(path.read_text())):
            if JARGON.search(node.value):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value.strip()[:80]!r}")
    assert offenders == []
