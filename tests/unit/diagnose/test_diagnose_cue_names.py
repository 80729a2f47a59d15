"""The fix builders name report cues only as the cue table defines them (parsers/cues.py CUE_NAMES).

A fix that tests a cue by a literal name silently stops firing when the cue is renamed: these tests read the fix
modules' string literals (their source, through ``ast``) and fail on a cue-shaped name the table does not have.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from oomguard.diagnose.parsers.cues import CUE_NAMES, MENTION_PREFIX, SUGGESTION_PREFIX, cue_name

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "oomguard" / "diagnose"
FIX_MODULES = ("fixes.py", "fixes_blend.py", "fixes_config.py", "fixes_env.py", "fixes_memory.py", "remedy.py",
               "planning.py", "context.py")
# The kinds of name a cue has ("host:ps-table"); the scorer's features of other kinds ("sig:", "kill:") are not cues.
CUE_KINDS = sorted({name.split(":", 1)[0] for name in CUE_NAMES})
CUE_SHAPED = re.compile(r"^(?:[a-z]+):[a-z0-9][a-z0-9+:-]*$")
FEATURE_ONLY_KINDS = ("sig", "para", "kill", "sigkill", "engine", "ctx", "phase", "exc", "frame")


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _cue_literals() -> list[tuple[str, int, str]]:
    out = []
    for name in FIX_MODULES:
        for line, text in _literals(PACKAGE / name):
            kind = text.split(":", 1)[0]
            if CUE_SHAPED.match(text) and (kind in CUE_KINDS or kind in FEATURE_ONLY_KINDS):
                out.append((name, line, text))
    return out


def test_the_fix_modules_name_only_cues_that_exist():
    bad = []
    for module, line, text in _cue_literals():
        if text.endswith(":") or text in (SUGGESTION_PREFIX, MENTION_PREFIX):
            # a prefix ("fail:", "words:limit"): some cue must start with it
            if not any(c.startswith(text) for c in CUE_NAMES):
                bad.append(f"{module}:{line} prefix {text!r} starts no cue")
            continue
        parts = text.split("+")
        missing = [p for p in parts if p not in CUE_NAMES and not any(c.startswith(p) for c in CUE_NAMES)]
        if missing:
            bad.append(f"{module}:{line} {text!r}: {missing} not in the cue table")
    assert not bad, "\n".join(bad)


def test_the_check_sees_the_cue_names_the_builders_use():
    # the test above must look at something: the family table's and the host builder's cues are among them
    names = {text for _m, _l, text in _cue_literals()}
    assert {"cfg:custom-allreduce", "host:sigbus", "host:oomkilled", "gpu:pre-ampere"} <= names


def test_a_renamed_cue_fails_loudly():
    assert cue_name("host:sigbus") == "host:sigbus"
    assert cue_name("cfg:bf16+gpu:pre-ampere") == "cfg:bf16+gpu:pre-ampere"
    with pytest.raises(KeyError, match="no cue named 'host:sig-bus'"):
        cue_name("host:sig-bus")
    with pytest.raises(KeyError, match="'gpu:pre-amper'"):
        cue_name("cfg:bf16+gpu:pre-amper")


def test_a_scorer_feature_is_not_a_cue():
    # "sig:kernel-oom-kill" / "kill:systemd" are features of the scorer (features.py), never keys of col.cues: a fix
    # builder that tested them as cues never fired (the host builder did until this test's commit)
    assert "sig:kernel-oom-kill" not in CUE_NAMES and "kill:systemd" not in CUE_NAMES
    assert not [t for _m, _l, t in _cue_literals() if t.split(":", 1)[0] in FEATURE_ONLY_KINDS]
