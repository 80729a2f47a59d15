"""oomguard.lazy_re: re's behaviour, compiled on first use (diagnose's start-up)."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys

import pytest

from oomguard import lazy_re


@pytest.mark.parametrize("pattern, flags", [(r"(\d+) GiB", 0), (r"out of memory", re.IGNORECASE), (rb"\bOOM\b", 0),
                                            (r"^x$", re.MULTILINE | re.ASCII)])
def test_same_answers_and_attributes_as_re(pattern, flags):
    lazy, real = lazy_re.compile(pattern, flags), re.compile(pattern, flags)
    assert (lazy.pattern, lazy.flags) == (real.pattern, real.flags)
    assert lazy._compiled is None  # nothing compiled by reading pattern and flags
    text = "12 GiB\nOut Of Memory\nx" if isinstance(pattern, str) else b"an OOM here"
    assert lazy.search(text) is not None and lazy.search(text).group() == real.search(text).group()
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in real.finditer(text)]
    assert lazy.groups == real.groups and lazy == real and hash(lazy) == hash(lazy_re.compile(pattern, flags))
    assert pickle.loads(pickle.dumps(lazy)) == lazy
    assert lazy_re.is_pattern(lazy) and lazy_re.is_pattern(real) and not lazy_re.is_pattern(pattern)


def test_a_bad_pattern_fails_when_used():
    lazy = lazy_re.compile("(unclosed")
    with pytest.raises(re.error):
        lazy.search("x")


def test_importing_diagnose_parsers_compiles_no_cue_pattern():
    code = ("from oomguard.diagnose.parsers import cues, errors, memory\n"
            "from oomguard.diagnose.parsers.scanset import module_patterns\n"
            "compiled = [r.feature for r in cues.TABLE if r.pattern._compiled is not None]\n"
            "compiled += [n for m in (errors, memory) for n, p in module_patterns(m).values()\n"
            "             if getattr(p, '_compiled', None) is not None]\n"
            "print(len(cues.TABLE), compiled)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(None, 1)
    assert int(out[0]) > 50 and out[1].strip() == "[]"
