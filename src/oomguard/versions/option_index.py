"""Which releases accept each option string: a compact index derived from the flag tables.

``option_history`` ("--swap-space": 0.6.0-0.17.1, removed in 0.18.0) needs every release's
options. Building all ~70 tables for that (12,000 ``Flag`` objects, ~0.2 s) made every check
with an unknown flag and every diagnose fix that names a flag pay for all releases. The index
(``data/flags/option-index.json``) holds only the option strings, as runs of release positions,
and is generated from the tables by ``scripts/gen_flag_tables.py`` (``--index``); the tables
stay the one source: a unit test rebuilds the index from them and compares, and when the index
does not list exactly the committed releases (a table added without regenerating it) the
tables are read instead, so the answer is never stale, only slower.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from functools import lru_cache

from . import releases

INDEX_NAME = "option-index.json"
FORMAT = 1


def build(versions: Iterable[str], options_of: Callable[[str], Iterable[str]]) -> dict:
    """The index for ``versions`` (oldest first): each option -> [[first, last], ...] position runs."""
    versions = list(versions)
    runs: dict[str, list[list[int]]] = {}
    for i, version in enumerate(versions):
        for option in options_of(version):
            spans = runs.setdefault(option, [])
            if spans and spans[-1][1] == i - 1:
                spans[-1][1] = i
            else:
                spans.append([i, i])
    return {"format": FORMAT, "releases": versions, "options": dict(sorted(runs.items()))}


def render(index: dict) -> str:
    """One option per line: small, and a new release's diff stays readable."""
    head = json.dumps({"format": index["format"], "releases": index["releases"]}, separators=(",", ":"))
    rows = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in index["options"].items()]
    return head[:-1] + ',\n "options": {\n' + ",\n".join(rows) + "\n }\n}\n"


@lru_cache(maxsize=1)
def load() -> dict | None:
    """The committed index, or None when it is missing, unreadable or not built from exactly the
    committed tables (the caller then reads the tables)."""
    try:
        with open(os.path.join(releases.DATA_DIR, INDEX_NAME), encoding="utf-8") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    if tuple(data.get("releases", ())) != releases.supported():
        return None
    return data


def present_in(option: str) -> tuple[str, ...] | None:
    """The supported releases (oldest first) whose parser has ``option``; None without a usable index."""
    data = load()
    if data is None:
        return None
    versions = data["releases"]
    return tuple(versions[i] for first, last in data["options"].get(option, ()) for i in range(first, last + 1))
